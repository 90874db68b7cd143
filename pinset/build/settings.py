"""A pin set's build settings, computed one way for verify, kld, bench and model.

A build folder is keyed by the tree and its CMake flags, so two verbs that spell the same settings
differently ("86,90" vs "86;90", pins.yaml's flags in another order) build the same tree twice and may
compare binaries that differ in more than the pins.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pinset.checks.nvidia_smi import cuda_architectures_from_gpu, visible_gpus
from pinset.config.schema import PinSet
from pinset.errors import PinsetError, ToolchainError


@dataclass(frozen=True)
class BuildSettings:
    cuda: bool
    cuda_architectures: str | None = None  # CMAKE_CUDA_ARCHITECTURES ("86;90"); None for a CPU build
    gpu_architectures: str | None = None   # what nvidia-smi listed when the settings were made
    cuda_flags: tuple[str, ...] = ()       # extra -D flags of the CUDA build: pins.yaml's, then the command line's

    def coverage_warning(self) -> str | None:
        """A warning when a visible GPU's architecture is not built for (its kernels then fail at run time)."""
        if not (self.cuda and self.gpu_architectures):
            return None
        if covers(self.cuda_architectures or "", self.gpu_architectures.split(";")):
            return None
        return (f"the build is for CUDA architectures {self.cuda_architectures}, the GPU here is "
                f"{self.gpu_architectures}: GPU runs may fail with 'no kernel image'")


CPU_BUILD = BuildSettings(cuda=False)


def require_visible_gpu(hint: str) -> str:
    """The visible GPUs' architectures ("90"), or one line: no GPU, and `hint` says what to do instead."""
    found = cuda_architectures_from_gpu()
    if found is None:
        raise ToolchainError(f"no NVIDIA GPU visible ({hint})")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:  # nvidia-smi lists every GPU, CUDA sees these
        seen = visible_gpus()
        if not seen:  # every GPU hidden from CUDA: the GPU gates would find no device and say of none
            raise ToolchainError(f"no NVIDIA GPU visible: CUDA_VISIBLE_DEVICES={visible!r} hides every GPU "
                                 f"nvidia-smi lists ({hint})")
        if all(g.uuid for g in seen):
            found = ";".join(sorted({g.compute_capability.replace(".", "") for g in seen}, key=int))
    return found


def normalize_architectures(text: str) -> str:
    """"86,90", "90;86" and " 86 ; 90" -> "86;90": one spelling, so one build folder."""
    parts = {p.strip() for p in re.split(r"[,;]", text) if p.strip()}
    return ";".join(sorted(parts, key=lambda a: (int(re.match(r"\d*", a).group() or 0), a)))  # type: ignore[union-attr]


def covers(architectures: str, capabilities) -> bool:
    """Whether code built for `architectures` (CMake's spelling) runs on GPUs of each compute capability ("90")
    in `capabilities`: "90a" (arch-specific features) and "100f" (family) run on a 9.0 and a 10.0 GPU,
    "90-real" (machine code only) and "90-virtual" (PTX only, compiled for the GPU when loaded) on a 9.0 GPU;
    "native" is the GPU's own, "all" and "all-major" every GPU."""
    built = {re.sub(r"(?<=\d)[af]$", "", re.sub(r"-(real|virtual)$", "", a))
             for a in normalize_architectures(architectures).split(";") if a}
    return bool(built & {"native", "all", "all-major"}) or set(capabilities) <= built


def build_settings(pinset: PinSet, *, cuda: bool, gpu_hint: str, architectures: str | None = None,
                   extra_flags: list[str] | tuple[str, ...] = (), gpu_class: str | None = None) -> BuildSettings:
    """The settings of a build of `pinset`'s trees.

    A CUDA build runs on this machine's GPU, so one must be visible (else ToolchainError naming
    `gpu_hint`). Architectures: `architectures` (a command-line override), else the architectures of
    pins.yaml's GPU class `gpu_class` (a CI matrix cell), else pins.yaml's `cuda.architectures`, else the
    visible GPUs'. Flags: pins.yaml's `cuda.flags`, then `extra_flags`.

    A cell of a GPU class claims evidence for that class, so a visible GPU the class's architectures do not
    cover (a runner labelled for the wrong GPU) is refused: its results would be filed under a GPU they
    never ran on.
    """
    gpu_arch = pinset.gpu_class(gpu_class).architectures if gpu_class else None  # unknown class: exit 2 first
    if not cuda:
        if gpu_class:
            raise PinsetError(f"--gpu-class {gpu_class}: a GPU class needs a run on the GPU (verify --cuda; "
                              "kld/bench without --cpu): a CPU run is no evidence for a GPU")
        return CPU_BUILD
    gpu = require_visible_gpu(gpu_hint)
    if gpu_arch is not None:
        seen = visible_gpus()  # CUDA_VISIBLE_DEVICES applied: the GPU this cell runs on
        here = ";".join(g.compute_capability.replace(".", "") for g in seen) if seen else gpu
        stray = [a for a in normalize_architectures(here).split(";") if not covers(gpu_arch, [a])]
        if stray:
            raise ToolchainError(f"GPU class {gpu_class} builds for CUDA architectures "
                                 f"{normalize_architectures(gpu_arch)}, but this machine's visible GPU is "
                                 f"{';'.join(stray)} (check the runner's labels or CUDA_VISIBLE_DEVICES)")
    arch = normalize_architectures(architectures or gpu_arch or pinset.cuda_architectures or gpu)
    flags = tuple(dict.fromkeys([*pinset.cuda_flags, *extra_flags]))
    return BuildSettings(True, arch, gpu, flags)
