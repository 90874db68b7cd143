"""The pieces of the nightly worlds (`pinset blame` and `pinset pick` on fast-import histories): upstream
files, the pins feat and types most worlds carry, and the steps every such world ends with."""

from __future__ import annotations

from pathlib import Path

from tests.testing import GitRepo, write_pins
from tests.testing.history import FastHistory

FILLER = "".join(f"int filler_{i}(void) {{ return {i}; }}\n" for i in range(30))
TYPES_H = "enum ggml_type {\n    GGML_TYPE_F32 = 0,\n    GGML_TYPE_Q4_0 = 2,\n    GGML_TYPE_COUNT,\n};\n" + FILLER
MMQ_CU = ("bool should_use_mmq(enum ggml_type type) {\n    switch (type) {\n        case GGML_TYPE_Q4_0:\n"
          "            return true;\n        default:\n            return false;\n    }\n}\n" + FILLER)
README = "upstream\n" + "".join(f"line {i} of the readme\n" for i in range(10))
# upstream gates MMQ on a runtime flag: the pin feat's context is gone (a conflict)
BROKEN_MMQ = MMQ_CU.replace("            return true;\n", "            return mmq_enabled();\n")
FEAT = {"src/mmq.cu": MMQ_CU.replace("        case GGML_TYPE_Q4_0:\n",
                                     "        case GGML_TYPE_Q4_0:\n        case GGML_TYPE_IQ1_M:\n")}
TYPES = {"src/types.h": TYPES_H.replace("    GGML_TYPE_COUNT", "    GGML_TYPE_IQ1_S = 3,\n    GGML_TYPE_COUNT")}
FEAT_AND_TYPES = "  - id: feat\n    patches: patches/feat\n  - id: types\n    patches: patches/types\n"


def series(up: GitRepo, base: str, name: str, files: dict[str, str], out: Path) -> None:
    """One commit on top of `base` with `files`, exported with format-patch into out/name."""
    up.git("checkout", "-q", "-B", "series-tmp", base)
    up.commit(f"pin {name}", files)
    up.format_patch(f"{base}..series-tmp", out / name)
    up.git("checkout", "-q", "-f", "master")


def import_history(h: FastHistory, up: GitRepo, marks: dict) -> dict:
    """Write `h` into `up` and check out its master: -> each key of `marks` -> its commit's sha."""
    by_mark = h.write(up.path)
    up.git("checkout", "-q", "-f", "master")
    return {i: by_mark[m] for i, m in marks.items()}


def feat_and_types(up: GitRepo, base: str, pins: Path, path: Path, builds: str, extra: str = "") -> Path:
    """The pins feat and types made from `base` (series in pins/feat, pins/types) and pins.yaml at `path`
    naming them on `builds`, then the pin entries `extra` (written as FEAT_AND_TYPES is)."""
    series(up, base, "feat", FEAT, pins)
    series(up, base, "types", TYPES, pins)
    return write_pins(path, f"upstream: {up.path}\nbuilds: [{builds}]\npins:\n" + FEAT_AND_TYPES + extra)
