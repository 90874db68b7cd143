"""What to test for a pin set: the types the pins touch, the targets the gates need, check argv.

Pure functions, so the choices can be tested without building anything.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from pathlib import Path

from pinset.config.schema import FeatureCheck, PinSpec

BASE_TARGETS = ["test-backend-ops", "test-chat"]
CPU_GATE_OPS = ["MUL_MAT", "MUL_MAT_ID"]
DEFAULT_GPU_OPS = ["MUL_MAT", "MUL_MAT_ID", "PAD", "GET_ROWS"]
TYPE_SYMBOL_RE = re.compile(r"^GGML_TYPE_([A-Z0-9_]+)$")
NOT_TYPES = {"COUNT"}
TYPE_NAME_RE = re.compile(r"\[GGML_TYPE_(?P<sym>[A-Z0-9_]+)\]\s*=\s*\{[^{}]*?\.type_name\s*=\s*\"(?P<name>[^\"]+)\"", re.S)

# Placeholders a `command` check's argv may use; see docs/verify.md.
PLACEHOLDERS = ("bin", "build", "src")


def ggml_type_names(ggml_c: str | None) -> dict[str, str]:
    """GGML_TYPE_* suffix -> the name test-backend-ops prints (type_traits in ggml/src/ggml.c)."""
    if not ggml_c:
        return {}
    return {m["sym"]: m["name"] for m in TYPE_NAME_RE.finditer(ggml_c)}


def pin_types(symbols: set[str], names: dict[str, str]) -> list[str]:
    """The test-backend-ops type names of the GGML_TYPE_* symbols on the pins' added lines.

    F32 is dropped when other types are there: nearly every mat-mul line names it as the
    activation type (type_b), and f32 weights are the bulk of the MUL_MAT cases.
    """
    found = set()
    for symbol in symbols:
        m = TYPE_SYMBOL_RE.match(symbol)
        if m and m.group(1) not in NOT_TYPES:
            found.add(m.group(1))
    if len(found) > 1:
        found.discard("F32")
    return sorted(names.get(t, t.lower()) for t in found)


def types_params_regex(types: list[str]) -> str | None:
    """A `-p` filter selecting MUL_MAT / MUL_MAT_ID cases whose weight type is one of `types`."""
    if not types:
        return None
    return "type_a=(" + "|".join(re.escape(t) for t in types) + "),"


# Files whose code is (or feeds) the matrix multiplications: a pin changing only these needs MUL_MAT/MUL_MAT_ID
MATMUL_FILES = ("ggml/src/ggml-cpu/quants.*", "ggml/src/ggml-cpu/arch/*", "ggml/src/ggml-cpu/repack.*",
                "ggml/src/ggml-cpu/llamafile/*", "ggml/src/ggml-cpu/amx/*", "ggml/src/ggml-cpu/kleidiai/*",
                "ggml/src/ggml-cpu/spacemit/*", "ggml/src/ggml-cpu/traits.*", "ggml/src/ggml-quants.*",
                "ggml/src/ggml-common.h", "ggml/src/ggml-cuda/mm*", "ggml/src/ggml-cuda/vecdotq*",
                "ggml/src/ggml-cuda/quantize*", "ggml/src/ggml-cuda/convert*", "ggml/src/ggml-cuda/dequantize*",
                "ggml/src/ggml-cuda/template-instances/mmq*", "ggml/src/ggml-cuda/template-instances/mmf*")
OP_SYMBOL_RE = re.compile(r"^GGML_(?:OP|UNARY_OP|GLU_OP)_([A-Z0-9_]+)$")
NOT_OPS = {"COUNT", "NONE"}


def cpu_gate_scope(touched: list[list[str] | None] | None, symbols: set[str]) -> tuple[list[str], str]:
    """The ops of the CPU gate's own runs for the files the pins change, and the rule that chose them
    (recorded as the gate's `scope`, docs/verify.md). `touched`: per pin the build carries, its files (None:
    unknown; [] for a carried pin is unknown too). Never fewer than needed: unknown files, or files no rule
    names, run the whole default set.

    - no compute code (the report's "no compute code" / "tests only" classes, but tests/test-backend-ops.cpp):
      no op of the pins' own (the gate then runs only the pins' backend-op checks, if any);
    - matrix-multiply code only (MATMUL_FILES): MUL_MAT, MUL_MAT_ID (with the pins' types);
    - any other compute code, test-backend-ops.cpp, or unknown files: MUL_MAT, MUL_MAT_ID and every op a
      `GGML_OP_*` / `GGML_UNARY_OP_*` / `GGML_GLU_OP_*` symbol on the pins' added lines names."""
    from pinset.sim.evidence import OTHER, TESTS, VERIFY_ONLY, file_class

    if touched is None or any(not t for t in touched):   # [] of a carried pin: its files were not read
        return list(CPU_GATE_OPS), "the files a pin changes are unknown: every op of the gate"
    files = sorted({f for t in touched for f in t or []})
    compute = [f for f in files if f == "tests/test-backend-ops.cpp" or file_class(f) not in (VERIFY_ONLY, TESTS)]
    if not compute:
        return [], "no pin changes ggml compute code (evidence rules: " + (
            "no pin changes a file" if not files else f"{files[0]}" + (f" and {len(files) - 1} more" if len(files) > 1 else "")) + ")"
    other = [f for f in compute if not any(fnmatch.fnmatchcase(f, p) for p in MATMUL_FILES)]
    if not other:
        return list(CPU_GATE_OPS), f"matrix-multiply code only ({compute[0]}" + (
            f" and {len(compute) - 1} more" if len(compute) > 1 else "") + ")"
    named = sorted({m.group(1) for s in symbols if (m := OP_SYMBOL_RE.match(s)) and m.group(1) not in NOT_OPS})
    ops = list(CPU_GATE_OPS) + [op for op in named if op not in CPU_GATE_OPS]
    unclassified = [f for f in other if file_class(f) == OTHER]
    why = ("files no rule names" if unclassified else "compute code") + f" ({other[0]}" + (
        f" and {len(other) - 1} more" if len(other) > 1 else "") + ")"
    return ops, why + (f"; ops named on the added lines: {', '.join(named)}" if named else "")


def cpu_gate_runs(types: list[str], checks: list[FeatureCheck], params_override: str | None = None,
                  ops: list[str] | None = None) -> list[tuple[str, str | None]]:
    """(op, params regex) pairs for the CPU gate: `ops` (default MUL_MAT/MUL_MAT_ID; cpu_gate_scope), the
    mat-muls filtered to the pins' types, then the ops of the pins' backend-op checks with their own filters
    (test mode only). `--cpu-params` (params_override) always runs MUL_MAT/MUL_MAT_ID with that filter."""
    params = params_override if params_override is not None else types_params_regex(types)
    if ops is None or params_override is not None:
        ops = list(dict.fromkeys(CPU_GATE_OPS + list(ops or [])))
    runs: list[tuple[str, str | None]] = [(op, params if op in CPU_GATE_OPS else None) for op in ops]
    for check in checks:
        if check.kind != "backend-op" or check.mode != "test" or (check.op, check.params) in runs:
            continue
        if params_override is None and _covered(check, types, ops):
            continue
        assert check.op is not None   # config.schema: a backend-op check names its op
        runs.append((check.op, check.params))
    return runs


def _covered(check: FeatureCheck, types: list[str], ops: list[str] = CPU_GATE_OPS) -> bool:
    """A MUL_MAT/MUL_MAT_ID check on one of the pins' types is already inside the types run."""
    if check.op not in CPU_GATE_OPS or check.op not in ops or not check.params or not types:
        return False
    m = re.fullmatch(r"type_a=([A-Za-z0-9_]+)(?:,.*)?", check.params)
    return m is not None and m.group(1) in types


def parse_ops(text: str | None) -> list[str]:
    if not text:
        return list(DEFAULT_GPU_OPS)
    ops = [o.strip() for o in text.split(",") if o.strip()]
    for op in ops:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", op):
            from pinset.errors import PinsetError

            raise PinsetError(f"--ops: malformed op name {op!r} (e.g. MUL_MAT,PAD)")
    if not ops:
        from pinset.errors import PinsetError

        raise PinsetError("--ops: empty list")
    return ops


# The programs of the check kinds that run one of llama.cpp's own test programs
CHECK_PROGRAMS = {"arch": "test-llama-archs", "mtmd": "test-mtmd-impl"}


def check_targets(check: FeatureCheck) -> list[str]:
    """The build targets a check runs: a command check's `{bin}/NAME` programs, an arch or mtmd check's test program."""
    if check.kind in CHECK_PROGRAMS:
        return [CHECK_PROGRAMS[check.kind]]
    return command_targets(check) if check.kind == "command" else []


def command_targets(check: FeatureCheck) -> list[str]:
    """Programs a command check runs from the build: argv items `{bin}/NAME` -> target NAME."""
    targets = []
    for arg in check.argv:
        m = re.fullmatch(r"\{bin\}/([A-Za-z0-9_.+-]+)", arg)
        if m:
            targets.append(m.group(1))
    return targets


def substitute(argv: tuple[str, ...], *, bin_dir: Path, build_dir: Path, source_dir: Path) -> list[str]:
    """Replace {bin}, {build} and {src} in each argument; other braces are left alone."""
    values = {"bin": str(bin_dir), "build": str(build_dir), "src": str(source_dir)}
    return [re.sub(r"\{(bin|build|src)\}", lambda m: values[m.group(1)], arg) for arg in argv]


def pin_ref(spec: PinSpec) -> str:
    """PR pins: the reviewed commit. Patch pins: sha256 of the series (file bytes in order), 12 hex."""
    if spec.patches is None:
        return spec.commit or ""
    h = hashlib.sha256()
    for patch in spec.patch_files():
        h.update(patch.read_bytes())
    return h.hexdigest()[:12]


def ctest_regex_escape(name: str) -> str:
    """Escape a test name for ctest -R (CMake regex: no \\Q, escape metacharacters one by one)."""
    return re.sub(r"([.+*?\[\]()^$|\\])", r"\\\1", name)


def ctest_targets(show_only_json: str, names: list[str]) -> list[str]:
    """The executables (= CMake targets) that the named tests run, from `ctest --show-only=json-v1`.

    ctest lists a test's command only once its executable exists; before the first build the
    test's own name is the target (llama_build_and_test names both alike).
    """
    import json

    try:
        listing = json.loads(show_only_json)
    except ValueError:
        return []
    tests = listing.get("tests") if isinstance(listing, dict) else None
    targets = []
    for test in tests if isinstance(tests, list) else []:
        if not isinstance(test, dict) or test.get("name") not in names:
            continue
        command = test.get("command")
        if command and not (isinstance(command, list) and all(isinstance(a, str) for a in command)):
            continue  # not ctest's own listing: no target read from it (the check then finds no test: red)
        target = Path(command[0]).name if command else test["name"]
        if target not in targets:
            targets.append(target)
    return targets
