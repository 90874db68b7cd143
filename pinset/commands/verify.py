"""`pinset verify`: build each chosen build's pinned tree and prove it works, gate by gate."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

from rich.table import Table

from pinset.build.cmake import cuda_architectures_from_gpu, find_nvcc, require_toolchain
from pinset.checks.machine import probe_machine
from pinset.commands.common import add_config_args, open_config
from pinset.errors import PinsetError, ToolchainError
from pinset.output import console, write_json, write_text
from pinset.sim.run import pick_builds, simulate
from pinset.verify.gates import BuildInput, Gates, VerifyOptions
from pinset.verify.markdown import verify_markdown
from pinset.verify.model import VerifyResult
from pinset.verify.plan import parse_ops

STYLE = {"passed": "green", "failed": "red", "not-run": "yellow"}


def add_parser(sub):
    p = sub.add_parser("verify", help="build the pinned trees and prove them gate by gate (CPU first, then --cuda)")
    add_config_args(p)
    p.add_argument("--cuda", action="store_true", help="also build with CUDA and run the GPU gates")
    p.add_argument("--ops", help="ops for the GPU test-backend-ops gate (default MUL_MAT,MUL_MAT_ID,PAD,GET_ROWS)")
    p.add_argument("--backend", default="CUDA0", help="test-backend-ops backend for the GPU gates (default CUDA0)")
    p.add_argument("--cpu-params", help="-p filter for the CPU gate's MUL_MAT/MUL_MAT_ID (default: the pins' types)")
    p.add_argument("--cuda-flags", help="extra CMake flags for the CUDA build, space-separated "
                   "(e.g. \"-DGGML_CUDA_FA=OFF\"; part of the build's cache key and of the JSON)")
    p.add_argument("-j", "--jobs", type=int, help="parallel compile jobs (default: all cores)")
    p.add_argument("--op-timeout", type=float, default=1800.0, help="seconds per test-backend-ops run (default 1800)")
    p.add_argument("--op-jobs", type=int, default=1,
                   help="test-backend-ops -j N (parallel workers) for the GPU runs (default 1)")
    p.add_argument("--json", help="write the result JSON here")
    p.add_argument("--markdown", help="write a markdown summary here")
    p.add_argument("--logs", help="folder for program output (default: next to --json, else in the cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while building")
    return p


def run(args) -> int:
    ops = parse_ops(args.ops)
    cuda_flags = (args.cuda_flags or "").split()
    bad = [f for f in cuda_flags if not f.startswith("-D")]
    if bad:
        raise PinsetError(f"--cuda-flags: {bad[0]!r} is not a -DNAME=VALUE flag")
    if cuda_flags and not args.cuda:
        raise PinsetError("--cuda-flags needs --cuda")
    # A timeout or `kill` should stop the compilers too: run_streaming kills ninja's process group
    # when the wait is interrupted.
    signal.signal(signal.SIGTERM, _interrupt)
    pinset, store = open_config(args, require_pins=False)
    build_names = pick_builds(pinset, args.builds)
    cuda_flags, arch, gpu_arch = check_toolchain(pinset, args.cuda, cuda_flags)
    machine = probe_machine(find_nvcc() if args.cuda else None)

    sim = simulate(pinset, build_names, store)
    try:
        options = VerifyOptions(cuda=args.cuda, ops=ops, backend=args.backend, cuda_architectures=arch,
                                jobs=args.jobs, op_timeout=args.op_timeout, cpu_params=args.cpu_params,
                                cuda_flags=cuda_flags, op_jobs=args.op_jobs,
                                log_dir=_log_dir(args, store), progress=not args.no_progress)
        gates = Gates(pinset, store, sim.mirror, options, say=console.print)
        verified = [gates.verify(build_input(b, sim.prepared)) for b in sim.result.builds]
    finally:
        sim.mirror.close()
    result = VerifyResult(pinset.digest, machine.to_json(), verified, args.cuda,
                          {"ops": ops, "backend": args.backend if args.cuda else "CPU",
                           "cpu_params": args.cpu_params, "cuda_architectures": arch,
                           "gpu_architectures": gpu_arch, "cuda_flags": cuda_flags,
                           "op_jobs": args.op_jobs})
    doc = result.to_json()
    console.print(_table(doc))
    console.print("[green]ok[/]: all gates green" if result.ok else "[red]not ok[/]: a gate is red (or did not run)")
    if args.json:
        write_json(args.json, doc)
    if args.markdown:
        write_text(args.markdown, verify_markdown(doc))
    return 0 if result.ok else 1


def check_toolchain(pinset, cuda: bool, cuda_flags: list[str]) -> tuple[list[str], str | None, str | None]:
    """(CUDA flags, CUDA architectures, the GPU's architectures), or one line and exit 2 when a program
    the build needs is missing: checked before any download or build (also used by `pinset pick --verify`)."""
    if cuda:  # pins.yaml's cuda.flags first, so kld/bench/model find the same cached build
        cuda_flags = list(pinset.cuda_flags) + [f for f in cuda_flags if f not in pinset.cuda_flags]
    require_toolchain(cuda)
    if shutil.which("ctest") is None:
        raise ToolchainError("ctest not found on PATH (it comes with CMake)")
    arch = gpu_arch = None
    if cuda:
        gpu_arch = cuda_architectures_from_gpu()
        if gpu_arch is None:
            raise ToolchainError("--cuda: no NVIDIA GPU visible (nvidia-smi is missing or lists no GPU)")
        arch = (pinset.cuda_architectures or gpu_arch).replace(",", ";")
        if pinset.cuda_architectures and not set(gpu_arch.split(";")) <= set(arch.replace(",", ";").split(";")):
            console.print(f"[yellow]warning:[/] pins.yaml builds for CUDA architectures {arch}, "
                          f"the GPU here is {gpu_arch}: the GPU gates may fail with 'no kernel image'")
    return cuda_flags, arch, gpu_arch


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def build_input(b, prepared) -> BuildInput:
    status = {p.id: p.status for p in b.pins}
    symbols: set[str] = set()
    for p in b.pins:
        prep = prepared.get(p.id)
        if p.status in ("applied", "upstream") and prep is not None and prep.change is not None:
            for fc in prep.change.files.values():
                symbols |= fc.symbols
    failed = [p.id for p in b.pins if p.required and not p.ok]
    return BuildInput(b.build, b.commit, b.tree, status, failed, symbols)


def _log_dir(args, store) -> Path:
    if args.logs:
        return Path(args.logs)
    if args.json:
        json_path = Path(args.json)
        return json_path.with_name(json_path.stem + "-logs")
    return store.dir("logs", "verify")


def _table(doc: dict) -> Table:
    table = Table(title=f"pinset verify ({'CUDA' if doc['cuda'] else 'CPU only'})")
    table.add_column("gate")
    for b in doc["builds"]:
        table.add_column(f"{b['build']}\n{b['commit'][:12]}")
    names = [g["name"] for g in doc["builds"][0]["gates"]] if doc["builds"] else []
    for i, name in enumerate(names):
        cells = []
        for b in doc["builds"]:
            g = b["gates"][i]
            text = f"[{STYLE[g['status']]}]{g['status']}[/]"
            if g["status"] != "not-run":
                text += f" {g['seconds']:.0f} s"
            if g.get("ops"):
                text += "\n" + ", ".join(f"{o['op']} {o['passed']}/{o['total']}" for o in g["ops"])
            elif g["name"] == "feature-checks" and g.get("detail"):
                text += "\n" + g["detail"].split(";")[0].split(" — ")[0]
            cells.append(text)
        table.add_row(name, *cells)
    return table
