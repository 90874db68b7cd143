"""The verify stage as the verbs use it (`pinset verify`, `pinset pick --verify`): the toolchain check before any
work, a sim build as a gate input, what a run did not test, and the confirmation pick asks for. The domain
rules live here, not in the verbs."""

from __future__ import annotations

import shutil
from typing import Callable

from pinset.build.cmake import require_toolchain
from pinset.build.settings import BuildSettings, build_settings
from pinset.errors import ToolchainError
from pinset.sim.model import BuildResult, is_cuda_path
from pinset.verify.gates import BuildInput, Gates, Interrupted
from pinset.verify.model import INTERRUPTED, BuildVerification, NotTested


def check_toolchain(pinset, cuda: bool, cuda_flags: list[str], *, gpu_class: str | None = None,
                    warn: Callable[[str], None] = lambda _: None) -> BuildSettings:
    """The build settings (CUDA flags and architectures, the GPU's) from the one build-settings function, or one
    line and exit 2 when the GPU or a program the build needs is missing: checked before any download or
    build. `warn` hears the coverage warning (the GPU's own architecture not built)."""
    # The same settings as kld/bench/model, so they find this build in the cache; no GPU is one line.
    settings = build_settings(pinset, cuda=cuda, gpu_hint="drop --cuda for the CPU gates only",
                              extra_flags=cuda_flags, gpu_class=gpu_class)
    require_toolchain(cuda)
    if shutil.which("ctest") is None:
        raise ToolchainError("ctest not found on PATH (it comes with CMake)")
    if coverage := settings.coverage_warning():
        warn(coverage)
    return settings


def build_input(b: BuildResult, symbols: set[str]) -> BuildInput:
    """`symbols`: the feature symbols of the pins the build carries (Simulation.feature_symbols)."""
    pins = {p.id: p for p in b.pins}
    failed = [p.id for p in b.pins if p.required and not p.ok]
    touched = [p.touched for p in b.pins if p.in_tree]  # scopes the CPU gate (plan)
    return BuildInput(b.build, b.commit, b.tree, pins, failed, symbols, touched)


def verify_builds(gates: Gates, sim) -> tuple[list[BuildVerification], Interrupted | None]:
    """Every build of the sim (`sim.Simulation`) through the gates, in order. Ctrl-C or SIGTERM in a gate ends the
    run: that build's gates so far and every later build are recorded as stopped (`not-run`, never a pass), and
    the interruption is returned for the verb to raise once the results are written (exit 130)."""
    verified: list[BuildVerification] = []
    interrupted: Interrupted | None = None
    for b in sim.result.builds:
        item = build_input(b, sim.feature_symbols(b))
        if interrupted:
            verified.append(gates.verify(item, stopped=INTERRUPTED))
            continue
        try:
            verified.append(gates.verify(item))
        except Interrupted as exc:
            interrupted = exc
            verified.append(exc.result)
    return verified, interrupted


def cuda_not_compiled(b: BuildResult) -> list[NotTested]:
    """Without --cuda, the CUDA code an applied pin changes was never compiled: said per pin."""
    out = []
    for p in b.pins:
        cuda = [f for f in p.touched or [] if is_cuda_path(f)]
        if p.applied and cuda:
            more = f" and {len(cuda) - 1} more" if len(cuda) > 1 else ""
            out.append(NotTested(f"CUDA code of pin {p.id} ({cuda[0]}{more})", "not compiled or run: --cuda not given"))
    return out


def add_not_tested(sim_builds: list[BuildResult], verified: list[BuildVerification], *, cuda: bool,
                   settings: BuildSettings) -> None:
    """What the gates alone do not say a run left untested: the CUDA code of each pin without --cuda, and with
    --cuda on a GPU of another architecture (PTX compiled on the fly, or none), the code the GPU's own
    architecture would compile (`__CUDA_ARCH__` paths)."""
    if not cuda:
        for b, v in zip(sim_builds, verified):
            v.not_tested += cuda_not_compiled(b)
    elif settings.coverage_warning():
        for v in verified:
            v.not_tested.append(NotTested(f"CUDA code for this GPU's architecture ({settings.gpu_architectures})",
                                          f"the build is for CUDA architectures {settings.cuda_architectures} only"))


def confirmation(gates: Gates, symbols_of: Callable[[BuildResult], set[str]]):
    """pick --verify's second opinion on a green build: verify it; a gate that failed or was stopped keeps the
    build from being picked (the stopped-gate rule of BuildVerification)."""

    def confirm(build, result: BuildResult) -> tuple[bool, dict]:
        verified = gates.verify(build_input(result, symbols_of(result)))
        return verified.ok, {"failed_gates": verified.failed_gates,
                             "gates": {g.name: g.status for g in verified.gates}}

    return confirm
