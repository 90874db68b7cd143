"""Reading result files of sim, verify, kld and bench, and checking they follow the JSON contracts.

A report is only as trustworthy as its inputs: a file from another schema version or with a missing
key is refused with a message naming the file and the key (exit 2), never rendered half-understood.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pinset import SCHEMA_VERSION
from pinset.errors import PinsetError

KINDS = ("sim", "verify", "kld", "bench")

# Shapes of the contract (notes/json.md): key -> type, a nested shape, or [shape] for a list of them.
# A type tuple allows several; None in it allows null. Producers may add keys; missing ones are errors.
NUM = (int, float)
OPT_STR = (str, type(None))
OPT_NUM = (int, float, type(None))

SIM_PIN = {"id": str, "status": str, "required": bool, "conflict_with": OPT_STR, "files": list,
           "retire": bool, "contract": {"ok": bool, "problems": list}}
SIM = {"pinset": str, "ok": bool, "builds": [{"build": str, "commit": str, "ok": bool, "pins": [SIM_PIN]}]}

GATE = {"name": str, "status": str, "seconds": NUM, "detail": OPT_STR}
OP = {"op": str, "backend": str, "passed": int, "total": int, "not_supported": int, "failures": list}
CHECK = {"pin": str, "check": str, "status": str, "cases": int, "detail": OPT_STR}
VERIFY = {"pinset": str, "ok": bool,
          "machine": {"hostname": str, "gpu": ({"name": str, "driver": str, "compute_capability": str,
                                                "memory_mib": int}, None),
                      "cuda_version": OPT_STR, "compiler": OPT_STR, "cmake": OPT_STR},
          "builds": [{"build": str, "commit": str, "ok": bool, "pins": [{"id": str, "status": str, "ref": str}],
                      "cmake_flags": list, "cuda_architectures": OPT_STR, "gates": [GATE],
                      "not_tested": [{"what": str, "why": str}]}]}

VALUE_ERR = {"value": NUM, "err": NUM}
KLD = {"ok": bool, "model": {"path": str, "name": str, "size_bytes": int},
       "text": {"path": str, "sha256": str}, "ctx": int, "chunks": int,
       "reference": {"backend": str, "build": str, "commit": str, "cached": bool},
       "runs": [{"label": str, "build": str, "commit": str, "backend": str, "ppl": VALUE_ERR,
                 "kld": {"mean": NUM, "err": NUM, "median": NUM, "p99": NUM, "p99_9": NUM, "max": NUM},
                 "same_top_p": VALUE_ERR, "rms_dp": VALUE_ERR, "ok": bool, "detail": OPT_STR}],
       "verdict": {"text": str, "head_minus_base_kld": NUM, "sigma": NUM}}


def kld_delta_text(verdict: dict) -> str:
    """head − base mean KLD with its standard error and how many of them it is: `sigma` in the KLD JSON is the
    standard error of the difference, not a count of them."""
    diff, sigma = verdict["head_minus_base_kld"], verdict["sigma"]
    if diff is None:
        return "head − base mean KLD unknown"
    if not sigma:
        return f"head − base mean KLD {diff:+.6f}"
    return f"head − base mean KLD {diff:+.6f} ± {sigma:.6f}, {diff / sigma:+.1f}σ"


BENCH = {"ok": bool, "model": {"path": str, "name": str}, "llama_bench_args": list, "rounds": int,
         "repetitions": int, "warmup_rounds": int,
         "base": {"build": str, "commit": str}, "head": {"build": str, "commit": str},
         "gpu": ({"name": str, "driver": str}, None),
         "round_log": [{"round": int, "order": str, "warmup": bool, "gpu_clock_mhz": (int, type(None)),
                        "other_gpu_processes": (bool, type(None))}],
         "rows": [{"test": str, "params": dict, "base_tps": list, "head_tps": list, "ratio": NUM,
                   "ci95": list, "p_value": OPT_NUM, "aa_spread": OPT_NUM, "verdict": str, "excluded": list}]}

SHAPES = {"sim": SIM, "verify": VERIFY, "kld": KLD, "bench": BENCH}

ENUMS = {
    ("sim", "status"): {"applied", "conflict", "upstream", "skipped", "error"},
    ("verify", "gate"): {"passed", "failed", "not-run"},
    ("verify", "check"): {"passed", "failed", "not-run", "unchecked"},
    ("bench", "verdict"): {"faster", "slower", "no change", "too noisy", "insufficient data"},
}


@dataclass(frozen=True)
class ResultFile:
    """One parsed result document and where it came from."""

    path: Path
    kind: str
    data: dict
    sha256: str  # of the file's bytes: names the input in provenance independent of its path

    @property
    def name(self) -> str:
        return self.path.name


def load_result(path: str | Path) -> ResultFile:
    """One result file, checked against its kind's contract."""
    path = Path(path)
    if path.is_dir():
        raise PinsetError(f"{path}: is a folder, not a result file")
    if not path.is_file():
        raise PinsetError(f"{path}: no such result file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PinsetError(f"{path}: cannot read ({(exc.strerror or str(exc)).lower()})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PinsetError(f"{path}: not a JSON result file ({exc})") from None
    except RecursionError:
        raise PinsetError(f"{path}: not a pinset result (nested too deeply)") from None
    if not isinstance(data, dict):
        raise PinsetError(f"{path}: not a pinset result (top level is not an object)")
    schema = data.get("schema")
    if schema != SCHEMA_VERSION:
        raise PinsetError(f"{path}: schema {schema!r}, this pinset reads schema {SCHEMA_VERSION} only "
                          f"(re-run the verb that wrote it with this pinset version)")
    kind = data.get("kind")
    if kind not in KINDS:
        raise PinsetError(f"{path}: unknown kind {kind!r} (expected one of {', '.join(KINDS)})")
    _check_shape(path, data, SHAPES[kind], kind)
    _check_enums(path, kind, data)
    return ResultFile(path, kind, data, hashlib.sha256(raw).hexdigest())


def load_results(paths: list[str | Path]) -> list[ResultFile]:
    if not paths:
        raise PinsetError("no result files given (pass the JSON files written by sim, verify, kld and bench)")
    files = [load_result(p) for p in paths]
    for f in files:
        if f.kind == "bench" and f.data.get("compare", "builds") != "builds":
            raise PinsetError(f"{f.path}: compare {f.data['compare']!r}: a comparison of two models on one build "
                              "(pinset bench --vs-model), not base vs head of the pin set; pinset report takes "
                              "base/head results only")
    return files


def _type_name(expected) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    names = {int: "an integer", float: "a number", str: "a string", bool: "true/false", list: "a list",
             dict: "an object", type(None): "null"}
    return " or ".join(dict.fromkeys(names.get(t, "an object") for t in types))


def _check_shape(path: Path, value, shape, where: str) -> None:
    if isinstance(shape, list):
        if not isinstance(value, list):
            raise PinsetError(f"{path}: {where}: expected a list")
        for i, item in enumerate(value):
            _check_shape(path, item, shape[0], f"{where}[{i}]")
        return
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise PinsetError(f"{path}: {where}: expected an object")
        for key, sub in shape.items():
            if key not in value:
                raise PinsetError(f"{path}: {where}.{key}: missing")
            _check_shape(path, value[key], sub, f"{where}.{key}")
        return
    options = shape if isinstance(shape, tuple) else (shape,)
    for option in options:
        if option is None:
            if value is None:
                return
        elif isinstance(option, dict):
            if isinstance(value, dict):
                _check_shape(path, value, option, where)
                return
        elif option in (int, float) and isinstance(value, bool):
            continue  # JSON true is not a number
        elif isinstance(value, option):
            return
    plain = tuple(dict if isinstance(o, dict) else type(None) if o is None else o for o in options)
    raise PinsetError(f"{path}: {where}: expected {_type_name(plain)}, got {json.dumps(value)[:40]}")


def _check_enums(path: Path, kind: str, data: dict) -> None:
    def need(value, allowed, where):
        if value not in allowed:
            raise PinsetError(f"{path}: {where}: unknown value {value!r} (expected one of {', '.join(sorted(allowed))})")

    if kind == "sim":
        for b, build in enumerate(data["builds"]):
            for p, pin in enumerate(build["pins"]):
                need(pin["status"], ENUMS["sim", "status"], f"sim.builds[{b}].pins[{p}].status")
    elif kind == "verify":
        for b, build in enumerate(data["builds"]):
            for g, gate in enumerate(build["gates"]):
                where = f"verify.builds[{b}].gates[{g}]"
                need(gate["status"], ENUMS["verify", "gate"], where + ".status")
                for o, op in enumerate(gate.get("ops") or []):
                    _check_shape(path, op, OP, f"{where}.ops[{o}]")
                for c, check in enumerate(gate.get("checks") or []):
                    _check_shape(path, check, CHECK, f"{where}.checks[{c}]")
                    need(check["status"], ENUMS["verify", "check"], f"{where}.checks[{c}].status")
    elif kind == "bench":
        for r, row in enumerate(data["rows"]):
            need(row["verdict"], ENUMS["bench", "verdict"], f"bench.rows[{r}].verdict")
