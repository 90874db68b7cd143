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

import functools
import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, overload

from pinset.errors import PinsetError

# The one registry of schema versions: the version each kind's JSON is written with (bumped when a field's
# meaning changes; "model" is `pinset model synth`'s document), and the versions `from_json` reads.
SCHEMAS = {"sim": 1, "verify": 1, "kld": 1, "bench": 2, "report": 2, "pick": 1, "blame": 1, "model": 1,
           "forecast": 1, "history": 1}
READS = {"sim": (1,), "verify": (1,), "kld": (1,), "bench": (1, 2), "report": (1, 2), "pick": (1,), "blame": (1,)}
# What a workflow step reads (`--json` of import, apply, refresh; issue 43): each kind's model and JSON Schema
# beside its producer (config/import_model.py, sim/apply_model.py, heal/model.py; `pinset schema --kind KIND`).
SCHEMAS.update({"import": 1, "apply": 1, "refresh": 1})
READS.update({"import": (1,), "apply": (1,), "refresh": (1,)})
# `pinset bump --json` (issue 43): its model is bump.BumpResult, its JSON Schema pinset/bump/model.py's.
SCHEMAS["bump"] = 1
READS["bump"] = (1,)

# Every result document says when its run began: the top-level key STARTED, the UTC time the verb started, as
# ISO 8601 with a Z ("2026-11-04T02:13:07Z"), put after "schema" and "kind" by `stamped` when a verb writes its
# file (pinset.output.write_json: one place for every kind). Adding it changed no field's meaning, so no schema
# was bumped: files written before it have no such key and read as "start time unknown" (None); older
# pinsets read the newer files too (they ignore a key they do not know). A damaged value is refused naming
# the file and the key.
STARTED = "started"
# the JSON Schema of STARTED, for the result kinds whose schema is written out (pinset schema --kind KIND)
STARTED_SCHEMA = {"type": "string", "format": "date-time", "description": "the UTC time the run began"}
_run_started: str | None = None

NUM = (int, float)
_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true/false", list: "a list",
          dict: "an object", type(None): "null"}


def type_name(types: tuple) -> str:
    types = _types(types)
    return " or ".join(dict.fromkeys(_NAMES.get(t, "an object") for t in types))


@functools.lru_cache(maxsize=256)
def _types(types: tuple) -> tuple:
    return tuple(type(None) if t is None else t for t in types)


@functools.lru_cache(maxsize=256)
def _checks(types: tuple) -> tuple[bool, bool, tuple]:
    """(bool allowed, null allowed, the other types): what _is asks of `types`, worked out once per spelling
    (every key of every result file is read through it: a year of nights is millions of reads)."""
    types = _types(types)
    return bool in types, type(None) in types, tuple(t for t in types if t is not type(None))


def _is(value, types: tuple) -> bool:
    bools, null, others = _checks(types)
    if value is None:
        return null
    if value.__class__ is bool and not bools:
        return False  # JSON true is not a number
    return isinstance(value, others)


class Doc:
    """A JSON object of a result file being read: `path` names the file, `where` the key path so far
    (`verify.builds[0].gates[3]`), so every refusal is one line naming both."""

    def __init__(self, value, path: Path | str, where: str):
        self.path, self.where = (path if isinstance(path, Path) else Path(path)), where
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


def utc_text(when: datetime) -> str:
    """A time as the result files spell it: UTC, whole seconds, `Z` (2026-11-04T02:13:07Z)."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def mark_run_started(when: datetime | None = None) -> str:
    """Note when this run began (cli._main calls it first thing): the time every result it writes carries."""
    global _run_started
    _run_started = utc_text(when or datetime.now(timezone.utc))
    return _run_started


def run_started() -> str:
    """The time this run began (marked by the command line; for a caller that never marked it, the first ask)."""
    return _run_started or mark_run_started()


def stamped(doc: dict) -> dict:
    """A result document (a dict with a `kind` of SCHEMAS) with its run's start time after "schema" and "kind";
    one that already says when it started (a result re-analysed, re-written) keeps its own. Anything else (a
    matrix, the cache's listing) is returned as it is."""
    if doc.get("kind") not in SCHEMAS or STARTED in doc:
        return doc
    head = {k: doc[k] for k in ("schema", "kind") if k in doc}
    return {**head, STARTED: run_started(), **{k: v for k, v in doc.items() if k not in head}}


def parse_utc(text: str) -> datetime | None:
    """An ISO 8601 time with a zone (Z or +HH:MM), as UTC; None when the text is no such time."""
    try:
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        return None
    return when.astimezone(timezone.utc) if when.tzinfo is not None else None


def started_of(doc: Doc) -> datetime | None:
    """The UTC time a result's run began (its STARTED key); None for a file written before pinsets said so. A
    value that is no ISO 8601 time with a zone is refused naming the file and the key."""
    text = doc.get(STARTED, str, None, default=None)
    if text is None:
        return None
    when = parse_utc(text)
    if when is None:
        doc.fail(STARTED, f"expected a UTC time such as 2026-11-04T02:13:07Z, got {json.dumps(text)[:40]}")
    return when
