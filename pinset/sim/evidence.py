"""The evidence a pin needs, derived from the files it changes (sim's `touched`) by documented rules.

A pin that only rewords an error message in `common/` has nothing a KLD or a bench could show; a pin in
`ggml/src/ggml-cuda/` is not shown to work by anything that ran on the CPU. The rules (docs/report.md,
"The evidence a pin needs"), the strongest class among a pin's files deciding:

    CUDA code (ggml/src/ggml-cuda/**, *.cu, *.cuh)      -> verify, gpu-verify, kld (on a device), bench
    build files anywhere (CMakeLists.txt, *.cmake, ...), any other file -> every kind
    other ggml compute code (ggml/**), llama compute    -> verify, kld
    llama's other src/ and include/ code                 -> verify, kld (src/llama-chat* -> verify)
    tools, common, docs, examples, tests                -> verify
    files unknown (touched missing/null/empty)           -> every kind (never "touches nothing")

pins.yaml `evidence: [...]` replaces the derived kinds of one pin, except that it cannot take `gpu-verify` from
a pin that changes CUDA code (or whose files are unknown): that is read from the pin's CUDA files themselves,
whatever else the pin touches and whichever class decides its rule (cuda_reason). Pure functions, no I/O.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from pinset.config.schema import EVIDENCE_KINDS
from pinset.sim.model import SimResult, is_cuda_path

KINDS = EVIDENCE_KINDS   # pins.yaml `evidence:` items, in this order when shown
VERIFY, GPU_VERIFY, KLD, BENCH = KINDS

# llama library code that builds or feeds the compute graph: a change there can move a model's output
LLAMA_COMPUTE = ("src/models/*", "src/llama-model*", "src/llama-graph*", "src/llama-context*",
                 "src/llama-kv-cache*", "src/llama-memory*", "src/llama-batch*", "src/llama-vocab*",
                 "src/llama-sampling*", "src/llama-arch*", "src/llama-hparams*", "src/llama-adapter*",
                 "src/llama-model-loader*", "src/llama.cpp")
# code and text no model's numbers depend on (what verify's builds and tests cover)
NO_COMPUTE_PREFIXES = ("tools/", "common/", "docs/", "examples/", "tests/", "gguf-py/", "scripts/",
                       ".github/", ".devops/", "grammars/", "prompts/", "licenses/", "media/", "vendor/",
                       "models/templates/", "pocs/", "requirements/")
# the rest of llama's library (tokenizer, mmap, cparams, KV cells, the public header) feeds the model's numbers
# too; only the chat templates compute nothing a model runs
LLAMA_LIBRARY_PREFIXES = ("src/", "include/")
LLAMA_NO_COMPUTE = ("src/llama-chat*",)
# build files change how everything compiles (flags, backends), wherever they are: never "no compute code"
BUILD_FILES = ("CMakeLists.txt", "Makefile", "build.zig", "CMakePresets.json")
BUILD_SUFFIXES = (".cmake", ".cmake.in", ".mk")
NO_COMPUTE_SUFFIXES = (".md", ".txt.in", ".gitignore")

# (rule, kinds); the order is strength: a pin's strongest file class decides
CUDA, GGML, VERIFY_ONLY, TESTS, OTHER, UNKNOWN, DECLARED = (
    "CUDA code", "ggml compute code", "no compute code", "tests only", "other files", "files unknown",
    "pins.yaml evidence:")
RULE_KINDS = {
    UNKNOWN: KINDS,
    OTHER: KINDS,
    CUDA: KINDS,
    GGML: (VERIFY, KLD),
    VERIFY_ONLY: (VERIFY,),
    TESTS: (VERIFY,),
}
# CUDA before OTHER: both ask for every kind, but a pin changing CUDA code and a CMakeLists is CUDA code (its
# missing-evidence line names the CUDA file)
_STRENGTH = (UNKNOWN, CUDA, OTHER, GGML, VERIFY_ONLY, TESTS)


@dataclass(frozen=True)
class Need:
    """What one pin needs, and why: the rule and the file that decided it (None for unknown / declared)."""

    pin: str
    kinds: tuple[str, ...]
    rule: str
    file: str | None = None
    more: int = 0          # further files of the deciding class

    def text(self) -> str:
        """"verify, kld (ggml compute code: ggml/src/ggml-cpu/ops.cpp and 2 more)"."""
        why = self.rule
        if self.file:
            why += ("; " if self.rule == DECLARED else ": ") + self.file + (f" and {self.more} more" if self.more else "")
        return f"{', '.join(self.kinds)} ({why})"

    def why(self) -> str:
        """Why the pin needs evidence from a CUDA device, for the verdict's missing-evidence line."""
        if self.rule == UNKNOWN:
            return "may change CUDA code (the files it touches are unknown)"
        if self.rule == CUDA:
            return f"changes CUDA code ({self.file}" + (f" and {self.more} more" if self.more else "") + ")"
        if self.rule == OTHER:
            return f"changes files no rule classifies ({self.file}" + (f" and {self.more} more" if self.more else "") + ")"
        if self.rule == DECLARED and self.file:
            return self.file.removeprefix("gpu-verify kept: ") + " (pins.yaml evidence: cannot drop gpu-verify)"
        return f"needs {', '.join(self.kinds)} (pins.yaml evidence:)" if self.rule == DECLARED else self.text()

    @property
    def on_device(self) -> bool:
        """Its KLD and bench must come from a device: a pin that needs a GPU verify is GPU code."""
        return GPU_VERIFY in self.kinds


def file_class(path: str) -> str:
    """The rule class of one changed file."""
    if is_cuda_path(path):
        return CUDA
    if path.rsplit("/", 1)[-1] in BUILD_FILES or path.endswith(BUILD_SUFFIXES):
        return OTHER
    if path.startswith("tests/"):
        return TESTS
    if any(fnmatch.fnmatchcase(path, pattern) for pattern in LLAMA_COMPUTE):
        return GGML
    if path.startswith("ggml/"):
        # ggml's own docs, tests and examples compute nothing a model runs
        if path.endswith(NO_COMPUTE_SUFFIXES) or path.startswith(("ggml/docs/", "ggml/examples/", "ggml/tests/")):
            return VERIFY_ONLY
        return GGML
    if path.startswith(LLAMA_LIBRARY_PREFIXES) and not path.endswith(NO_COMPUTE_SUFFIXES):
        return VERIFY_ONLY if any(fnmatch.fnmatchcase(path, p) for p in LLAMA_NO_COMPUTE) else GGML
    if path.startswith(NO_COMPUTE_PREFIXES) or path.endswith(NO_COMPUTE_SUFFIXES) or "/" not in path and \
            path.lower().startswith(("readme", "license", "authors", "contributing", "security", "changelog")):
        return VERIFY_ONLY
    return OTHER


def pin_needs(pin: str, touched: list[str] | None, declared: list[str] | tuple[str, ...] | None = None) -> Need:
    """The evidence of one pin: `declared` (pins.yaml `evidence:`) when given, else by the rules."""
    kinds = tuple(k for k in KINDS if k in (declared or ()))
    if kinds:
        device = cuda_reason(touched)
        if device and GPU_VERIFY not in kinds:
            # a label cannot stand in for a device: CUDA code (or files unknown) keeps its GPU verify, whatever
            # else the pin touches
            kinds = tuple(k for k in KINDS if k in kinds or k in (VERIFY, GPU_VERIFY))
            return Need(pin, kinds, DECLARED, f"gpu-verify kept: {device}")
        return Need(pin, kinds, DECLARED)
    if not touched:
        # None, or an applied pin whose files were not read (a plain `diff -u` without `diff --git`): unknown
        return Need(pin, KINDS, UNKNOWN)
    by_class: dict[str, list[str]] = {}
    for path in touched:
        by_class.setdefault(file_class(path), []).append(path)
    rule = next(c for c in _STRENGTH if c in by_class)
    files = sorted(by_class[rule])
    return Need(pin, RULE_KINDS[rule], rule, files[0], len(files) - 1)


def cuda_reason(touched: list[str] | None) -> str | None:
    """Why a pin's GPU verify can never be dropped (its CUDA files, or files unknown); None when it changes no
    CUDA code. Read from every file, never from the rule that decided: a build file beside a .cu is still CUDA."""
    if not touched:
        return "may change CUDA code (the files it touches are unknown)"
    cuda = sorted(f for f in touched if is_cuda_path(f))
    if not cuda:
        return None
    return f"changes CUDA code ({cuda[0]}" + (f" and {len(cuda) - 1} more" if len(cuda) > 1 else "") + ")"


def union(needs) -> set[str]:
    """Every kind some pin needs."""
    return {k for n in needs for k in n.kinds}


def needs_by_build(sim: SimResult | None) -> dict[tuple[str, str], Need]:
    """(pin, build) -> Need for every pin applied on a build of a sim result (a pin upstream or skipped there
    brings no change of its own; one that conflicts or errors blocks instead)."""
    out: dict[tuple[str, str], Need] = {}
    for b in sim.builds if sim else []:
        for p in b.pins:
            if p.applied:
                out[p.id, b.build] = pin_needs(p.id, p.touched, p.evidence)
    return out


def wanted_kinds(sim: SimResult | None) -> set[str]:
    """Every kind of evidence the pin set needs: verify always; without a sim result every kind (the files the
    pins touch are unknown)."""
    if sim is None:
        return set(KINDS)
    return {VERIFY} | union(needs_by_build(sim).values())


def needs_by_pin(sim: SimResult | None) -> dict[str, Need]:
    """One Need per pin for the report's Pin set section: the one asking the most where builds differ."""
    out: dict[str, Need] = {}
    for (pin, _), need in needs_by_build(sim).items():
        if pin not in out or len(need.kinds) > len(out[pin].kinds):
            out[pin] = need
    return out


def evidence_lines(sim: SimResult | None) -> list[str]:
    """Markdown lines: which rule applied to each pin (docs/report.md)."""
    if not sim:
        return []
    needs = needs_by_pin(sim)
    pins = list(dict.fromkeys(p.id for b in sim.builds for p in b.pins))
    items = [f"- `{pin}`: {needs[pin].text()}" if pin in needs else f"- `{pin}`: nothing (applied on no build)"
             for pin in pins]
    return ["Evidence each pin needs (rules: docs/report.md):", "", *items, ""] if items else []
