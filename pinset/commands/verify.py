"""`pinset verify`: build each chosen build's pinned tree and prove it works, gate by gate."""

from __future__ import annotations

import re
import signal
from dataclasses import replace
from pathlib import Path

from rich.table import Table

from pinset import ci_annotations
from pinset.build.cmake import find_nvcc
from pinset.checks.machine import Machine, probe_machine
from pinset.checks.nvidia_smi import visible_gpus
from pinset.commands.common import add_config_args, count, only_with, open_config, seconds
from pinset.commands.paths import OUTPUT_FILE, OUTPUT_FOLDER, add_path
from pinset.commands.sim import build_grid
from pinset.config.schema import cuda_flag_problem
from pinset.errors import PinsetError
from pinset.output import console, err_console, is_stdout, remove_stale, write_result
from pinset.result_parts import MachineRecord
from pinset.sim.run import pick_builds, simulate
from pinset.verify.gates import Gates, VerifyOptions
from pinset.verify.markdown import verify_markdown
from pinset.verify.model import FAILED, NOT_RUN, PASSED, VerifyResult
from pinset.verify.plan import parse_ops
from pinset.verify.run import add_not_tested, check_toolchain, verify_builds

STYLE = {PASSED: "green", FAILED: "red", NOT_RUN: "yellow"}


def add_parser(sub):
    p = sub.add_parser("verify")
    add_config_args(p)
    p.add_argument("--cuda", action="store_true", help="also build with CUDA and run the GPU gates")
    p.add_argument("--ops", help="ops for the GPU test-backend-ops gate (default MUL_MAT,MUL_MAT_ID,PAD,GET_ROWS)")
    p.add_argument("--backend", help="test-backend-ops CUDA backend for the GPU gates (default CUDA0)")
    p.add_argument("--cpu-params", help="-p filter for the CPU gate's MUL_MAT/MUL_MAT_ID (default: the pins' types)")
    p.add_argument("--cuda-flags", help="extra CMake flags for the CUDA build, space-separated "
                   "(e.g. \"-DGGML_CUDA_FA=OFF\"; part of the build's cache key and of the JSON)")
    p.add_argument("--gpu-class", help="pins.yaml `gpus:` class this run is a cell of: its CUDA architectures are "
                   "built, the visible GPU must be one of them, and the class is recorded (pinset matrix passes it)")
    p.add_argument("-j", "--jobs", type=count(1), help="parallel compile jobs (default: all cores)")
    p.add_argument("--op-timeout", type=seconds, default=1800.0, help="seconds per test-backend-ops run (default 1800)")
    p.add_argument("--op-jobs", type=count(1), default=1,
                   help="test-backend-ops -j N (parallel workers) for the GPU runs (default 1)")
    add_path(p, "--json", role=OUTPUT_FILE, help="write the result JSON here")
    add_path(p, "--markdown", role=OUTPUT_FILE, help="write a markdown summary here")
    add_path(p, "--logs", role=OUTPUT_FOLDER, derived=_logs_next_to_json,
             help="folder for program output (default: next to --json, else in the cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while building")
    return p


def run(args) -> int:
    ops = parse_ops(args.ops)
    cuda_flags = (args.cuda_flags or "").split()
    if problem := next(filter(None, map(cuda_flag_problem, cuda_flags)), None):
        raise PinsetError(f"--cuda-flags: {problem}")
    only_with("--cuda", args.cuda, {"--cuda-flags": bool(cuda_flags), "--ops": args.ops is not None,
                                    "--backend": args.backend is not None, "--op-jobs": args.op_jobs != 1})
    backend = gpu_backend(args.backend)
    # A timeout or `kill` should stop the compilers too: run_streaming kills ninja's process group
    # when the wait is interrupted.
    signal.signal(signal.SIGTERM, _interrupt)
    pinset, store = open_config(args, require_pins=False)
    build_names = pick_builds(pinset, args.builds)
    settings = check_toolchain(pinset, args.cuda, cuda_flags, gpu_class=args.gpu_class, warn=warn)
    cuda_flags, arch, gpu_arch = list(settings.cuda_flags), settings.cuda_architectures, settings.gpu_architectures
    machine = probe_machine(find_nvcc() if args.cuda else None)
    if args.cuda:
        machine = on_backend(machine, backend)
    with simulate(pinset, build_names, store) as sim:
        # The builds resolved (an unknown one was bad input, and changed nothing): from here on the run's own
        # result replaces an earlier one, so a run that is interrupted or fails before its JSON is written does
        # not leave the last run's (maybe green) files in place to be read as this run's.
        remove_stale([args.json, args.markdown])
        options = VerifyOptions(cuda=args.cuda, ops=ops, backend=backend, cuda_architectures=arch,
                                jobs=args.jobs, op_timeout=args.op_timeout, cpu_params=args.cpu_params,
                                cuda_flags=cuda_flags, op_jobs=args.op_jobs,
                                log_dir=_log_dir(args, store), progress=not args.no_progress,
                                gpu_name=machine.gpu.name if args.cuda and machine.gpu else None,
                                settings=settings if args.cuda else None)
        gates = Gates(pinset, store, sim.mirror, options, say=err_console.print)  # progress: stderr
        verified, interrupted = verify_builds(gates, sim)
    add_not_tested(sim.result.builds, verified, cuda=args.cuda, settings=settings)
    result = VerifyResult(pinset.digest, MachineRecord.of(machine.to_json()), verified, args.cuda,
                          {"ops": ops, "backend": backend if args.cuda else "CPU",
                           "cpu_params": args.cpu_params, "cuda_architectures": arch,
                           "gpu_architectures": gpu_arch, "cuda_flags": cuda_flags,
                           "op_jobs": args.op_jobs, "gpu_class": args.gpu_class})
    summary = result.summary()
    console.print(_table(result))
    console.print(f"[green]ok[/]: {summary}" if result.ok else f"[red]not ok[/]: {summary}")
    write_result(result, args.json, args.markdown, verify_markdown)
    ci_annotations.verify_annotations(pinset, result)   # GitHub Actions only
    ci_annotations.step_summary("## pinset verify\n\n" + verify_markdown(result))
    if interrupted:
        raise interrupted
    return 0 if result.ok else 1


def warn(text: str) -> None:
    err_console.print(f"[yellow]warning:[/] {text}")


def gpu_backend(backend: str | None) -> str:
    """The test-backend-ops backend of the GPU gates: a CUDA device. Any other (CPU is in every build) would
    run the "GPU" gates and feature checks somewhere else and still call them GPU evidence."""
    if backend is None:
        return "CUDA0"
    if not re.fullmatch(r"CUDA\d+", backend):
        raise PinsetError(f"--backend {backend}: the GPU gates need a CUDA device backend (CUDA0, CUDA1, ...)")
    return backend


def on_backend(machine: Machine, backend: str) -> Machine:
    """The machine with the GPU its GPU gates run on as its `gpu`: CUDA<n> is the n-th visible GPU in
    nvidia-smi's order (CUDA_DEVICE_ORDER=PCI_BUS_ID, CUDA_VISIBLE_DEVICES applied), not always the first
    (`--backend CUDA1` on a host of two GPU models was red for running on the GPU it was asked to)."""
    gpus = visible_gpus()
    index = int(backend.removeprefix("CUDA"))
    return replace(machine, gpu=gpus[index]) if index < len(gpus) else machine


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _log_dir(args, store) -> Path:
    if args.logs:
        return Path(args.logs)
    if args.json and not is_stdout(args.json):
        return _next_to(args.json)
    return store.dir("logs", "verify")


def _next_to(json: str) -> Path:
    """The logs folder of a run given --json and no --logs: `r.json` -> `r-logs`."""
    return Path(json).with_name(Path(json).stem + "-logs")


def _logs_next_to_json(args) -> dict[str, str]:
    """The `derived` hook of --logs: without it the logs go next to --json, an output folder too."""
    return ({str(_next_to(args.json)): "the logs folder next to --json,"}
            if args.json and not args.logs and not is_stdout(args.json) else {})


def _table(result: VerifyResult) -> Table:
    table = build_grid(f"pinset verify ({'CUDA' if result.cuda else 'CPU only'})", "gate", result.builds, 12)
    names = [g.name for g in result.builds[0].gates] if result.builds else []
    for i, name in enumerate(names):
        cells = []
        for b in result.builds:
            g = b.gates[i]
            text = f"[{STYLE[g.status]}]{g.status}[/]"
            if g.status != NOT_RUN:
                text += f" {g.shown_seconds:.0f} s"
            if g.ops:
                text += "\n" + ", ".join(o.short() for o in g.ops)
            elif g.name == "feature-checks" and g.detail:
                text += "\n" + g.detail.split(";")[0].split(" — ")[0]
            cells.append(text)
        table.add_row(name, *cells)
    return table
