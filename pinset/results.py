"""The reading half of every result model (sim, verify, kld, bench, report): one JSON object at a time,
each access naming the file and the key when the document does not hold what the model needs.

Each kind's model lives beside its producer (pinset/sim/model.py, pinset/verify/model.py,
pinset/measures/kld_model.py, pinset/measures/bench_model.py, pinset/nightly/model.py for pick and blame,
pinset/report/model.py) and owns both `to_json` and
`from_json`; `pinset report` reads every file through the model of its kind, so what the producer writes
and what the report reads cannot drift apart. Like pyperf's Benchmark.load/dump, a model reads the older
versions of its kind where that costs little.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, overload

from pinset.errors import PinsetError

# The one registry of schema versions: the version each kind's JSON is written with (bumped when a field's
# meaning changes; "model" is `pinset model synth`'s document), and the versions `from_json` reads.
SCHEMAS = {"sim": 1, "verify": 1, "kld": 1, "bench": 2, "report": 2, "pick": 1, "blame": 1, "model": 1,
           "forecast": 1}
READS = {"sim": (1,), "verify": (1,), "kld": (1,), "bench": (1, 2), "report": (1, 2), "pick": (1,), "blame": (1,)}
# What a workflow step reads (`--json` of import, apply, refresh; issue 43): each kind's model and JSON Schema
# beside its producer (config/import_model.py, sim/apply_model.py, heal/model.py; `pinset schema --kind KIND`).
SCHEMAS.update({"import": 1, "apply": 1, "refresh": 1})
READS.update({"import": (1,), "apply": (1,), "refresh": (1,)})
# `pinset bump --json` (issue 43): its model is bump.BumpResult, its JSON Schema pinset/bump/model.py's.
SCHEMAS["bump"] = 1
READS["bump"] = (1,)

NUM = (int, float)
_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true/false", list: "a list",
          dict: "an object", type(None): "null"}


def type_name(types: tuple) -> str:
    types = _types(types)
    return " or ".join(dict.fromkeys(_NAMES.get(t, "an object") for t in types))


def _types(types: tuple) -> tuple:
    return tuple(type(None) if t is None else t for t in types)


def _is(value, types: tuple) -> bool:
    types = _types(types)
    if isinstance(value, bool) and bool not in types:
        return False  # JSON true is not a number
    if type(None) in types and value is None:
        return True
    return isinstance(value, tuple(t for t in types if t is not type(None)))


class Doc:
    """A JSON object of a result file being read: `path` names the file, `where` the key path so far
    (`verify.builds[0].gates[3]`), so every refusal is one line naming both."""

    def __init__(self, value, path: Path | str, where: str):
        self.path, self.where = Path(path), where
        if not isinstance(value, dict):
            self.fail(None, "expected an object")
        self.raw: dict = value

    def at(self, key) -> str:
        return self.where if key is None else f"{self.where}.{key}"

    def fail(self, key, message: str):
        raise PinsetError(f"{self.path}: {self.at(key)}: {message}")

    def has(self, key: str) -> bool:
        return key in self.raw

    def get(self, key: str, *types, default=...):
        """The value of a key of one of `types` (None allows null); `default` makes the key optional."""
        if key not in self.raw:
            if default is ...:
                self.fail(key, "missing")
            return default
        value = self.raw[key]
        if not _is(value, types):
            self.fail(key, f"expected {type_name(types)}, got {json.dumps(value)[:40]}")
        return value

    @overload
    def num(self, key: str) -> float: ...

    @overload
    def num(self, key: str, *, null: bool = ..., default: Any = ...) -> float | None: ...

    def num(self, key: str, *, null: bool = False, default=...) -> float | None:
        """A finite number. With null=True, null or a non-finite value (NaN, inf: a number that could not be
        measured) reads as None; otherwise a non-finite value is refused."""
        value = self.get(key, *NUM, *((type(None),) if null else ()), default=default)
        if isinstance(value, float) and not math.isfinite(value):
            if null:
                return None
            self.fail(key, f"expected a finite number, got {value}")
        return value

    def choice(self, key: str, allowed, default=...) -> str:
        value = self.get(key, str, default=default)
        if value not in allowed and not (default is not ... and value == default):
            self.fail(key, f"unknown value {value!r} (expected one of {', '.join(sorted(allowed))})")
        return value

    @overload
    def obj(self, key: str) -> Doc: ...

    @overload
    def obj(self, key: str, *, null: bool = ..., default: Any = ...) -> Doc | None: ...

    def obj(self, key: str, *, null: bool = False, default=...) -> Doc | None:
        value = self.get(key, dict, *((type(None),) if null else ()), default=default)
        return Doc(value, self.path, self.at(key)) if isinstance(value, dict) else None

    def objs(self, key: str, default=...) -> list[Doc]:
        """A list of objects, each readable with its index in the key path."""
        items = self.get(key, list, default=default)
        return [Doc(item, self.path, f"{self.at(key)}[{i}]") for i, item in enumerate(items or [])]

    def strs(self, key: str, default=...) -> list[str]:
        items = self.get(key, list, default=default) or []
        for i, item in enumerate(items):
            if not isinstance(item, str):
                self.fail(f"{key}[{i}]", f"expected a string, got {json.dumps(item)[:40]}")
        return list(items)

    def nums(self, key: str, *, null: bool = False) -> list[float] | None:
        """A list of finite numbers (null for the whole list allowed with null=True)."""
        items = self.get(key, list, *((type(None),) if null else ()))
        if items is None:
            return None
        for i, item in enumerate(items):
            if not _is(item, NUM) or (isinstance(item, float) and not math.isfinite(item)):
                self.fail(f"{key}[{i}]", f"expected a finite number, got {json.dumps(item)[:40]}")
        return list(items)


def read_json(path: str | Path, what: str = "result") -> tuple[object, bytes]:
    """A JSON file's value and its bytes; anything unreadable (a folder, missing, not UTF-8 JSON, nested
    beyond Python's recursion limit) is one line naming the file."""
    path = Path(path)
    if path.is_dir():
        raise PinsetError(f"{path}: is a folder, not a {what} file")
    if not path.is_file():
        raise PinsetError(f"{path}: no such {what} file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PinsetError(f"{path}: cannot read ({(exc.strerror or str(exc)).lower()})") from None
    try:
        return json.loads(raw.decode("utf-8")), raw
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PinsetError(f"{path}: not a JSON {what} file ({str(exc).splitlines()[0][:120]})") from None
    except RecursionError:
        raise PinsetError(f"{path}: not a pinset {what} (nested too deeply)") from None


def read_document(path: str | Path) -> tuple[Doc, str, int, bytes]:
    """A result file's top-level object, kind and schema version (checked against READS), and its bytes."""
    path = Path(path)
    data, raw = read_json(path)
    if not isinstance(data, dict):
        raise PinsetError(f"{path}: not a pinset result (top level is not an object)")
    kind = data.get("kind")
    if kind == "model":
        raise PinsetError(f"{path}: a model document (pinset model synth), not a result of sim, verify, kld or bench")
    if not isinstance(kind, str) or kind not in READS:
        raise PinsetError(f"{path}: unknown kind {kind!r} (expected one of {', '.join(READS)})")
    schema = data.get("schema")
    if isinstance(schema, bool) or schema not in READS[kind]:
        reads = " and ".join(map(str, READS[kind]))
        raise PinsetError(f"{path}: schema {schema!r}, this pinset reads {kind} schema {reads} only "
                          f"(re-run the verb that wrote it with this pinset version)")
    return Doc(data, path, kind), kind, schema, raw
