"""The build arguments of kld, bench and model: turned here into explicit sides and build settings."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from pinset.build.settings import build_settings, require_visible_gpu
from pinset.commands.common import add_cache_arg, count, cuda_architectures, pins_read_unless
from pinset.commands.paths import INPUT_FILE, INPUT_FOLDER, add_path
from pinset.errors import PinsetError
from pinset.measures.sides import Side, built_sides, folder_side
from pinset.output import err_console, remove_stale
from pinset.store import Store

NO_GPU_HINT = "use --cpu"


GGUF_MAGIC = b"GGUF"


def check_gguf(files: dict[str, Path | None]) -> None:
    """Each model (option -> path) starts with the GGUF magic: a text file, a safetensors file or an empty file
    given as a model is bad input named in one line before anything is built or run (llama.cpp's programs would
    fail later, as a runtime failure)."""
    for flag, path in files.items():
        if path is None:
            continue
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic != GGUF_MAGIC:
            raise PinsetError(f"{flag} {path}: not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r})")


def add_side_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("builds (either -c/--build, or --base-bin/--head-bin)")
    add_path(g, "-c", "--config", role=INPUT_FILE, derived=pins_read_unless("base_bin", "head_bin"), default=None,
             help="pin set file: base = bare build, head = build + pins")
    g.add_argument("--build", help="which build of pins.yaml (default: the first)")
    add_cache_arg(g)
    add_path(g, "--base-bin", role=INPUT_FOLDER, type=Path, help="folder with the base build's llama.cpp programs")
    add_path(g, "--head-bin", role=INPUT_FOLDER, type=Path, help="folder with the head build's llama.cpp programs")
    g.add_argument("--base-commit", default=None, help="commit to record for --base-bin")
    g.add_argument("--head-commit", default=None, help="commit to record for --head-bin")
    g.add_argument("--cuda-architectures", type=cuda_architectures, help="CMAKE_CUDA_ARCHITECTURES when building (default: pins.yaml, else the GPU's)")
    g.add_argument("--gpu-class", help="pins.yaml `gpus:` class this run is a cell of (its CUDA architectures; "
                   "the visible GPU must be one of them)")
    g.add_argument("-j", "--jobs", type=count(1), help="build jobs")


def resolve_sides(args, targets: list[str], *, cpu: bool, head_only: bool = False,
                  replaced=()) -> tuple[Side, Side, Store]:
    """(base, head, store). Explicit folders win; otherwise both trees are built (cached). head_only: only the
    head build is needed (it is returned as both sides), e.g. to compare two models on it.

    Without `cpu` the programs run on the GPU, so a GPU must be visible, before anything is built.
    `replaced`: the result files of this run, removed once the command line has passed every check and the
    build resolved, before any build or run (bad input changes nothing; a stopped run leaves no earlier result).
    """
    if head_only and args.base_bin:
        raise PinsetError("--base-bin: not used here (only the head build runs); give --head-bin")
    if args.base_bin or args.head_bin:
        if getattr(args, "gpu_class", None):
            raise PinsetError("--gpu-class builds the class's architectures: give -c/--build, not --base-bin/--head-bin")
        if not args.head_bin or not (args.base_bin or head_only):
            raise PinsetError("--base-bin and --head-bin go together")
        if args.config:
            raise PinsetError("give either -c/--build or --base-bin/--head-bin, not both")
        wanted = [("head", args.head_bin, args.head_commit)] if head_only else \
            [("base", args.base_bin, args.base_commit), ("head", args.head_bin, args.head_commit)]
        sides = [folder_side(label, folder, commit, targets) for label, folder, commit in wanted]
        if not cpu:
            require_visible_gpu(NO_GPU_HINT)
        store = Store.open(args.cache)
        remove_stale(replaced)
    else:
        sides, store = _build(args, targets, cuda=not cpu, gpu_hint=NO_GPU_HINT,
                              labels=("head",) if head_only else ("base", "head"), replaced=replaced)
    if head_only:
        return replace(sides[0], label="base"), sides[0], store
    return sides[0], sides[1], store


def built_base(args, targets: list[str], *, cuda: bool, gpu_hint: str) -> Side:
    """Only the base (bare) build: for tools that are the same on both sides (imatrix, quantize)."""
    return _build(args, targets, cuda=cuda, gpu_hint=gpu_hint, labels=("base",))[0][0]


def _build(args, targets: list[str], *, cuda: bool, gpu_hint: str, labels: tuple[str, ...], replaced=()):
    from pinset.build.cmake import require_toolchain
    from pinset.config.schema import load_pinset

    pinset = load_pinset(args.config or "pins.yaml")
    name = args.build or (pinset.builds[0] if pinset.builds else None)
    if not name:
        raise PinsetError("no build: give --build")
    settings = build_settings(pinset, cuda=cuda, gpu_hint=gpu_hint, architectures=args.cuda_architectures,
                              gpu_class=getattr(args, "gpu_class", None))
    require_toolchain(cuda)  # one line and exit 2 before any download or build
    if settings.coverage_warning():
        err_console.print(f"[yellow]warning:[/] {settings.coverage_warning()}")
    store = Store.open(args.cache)
    return built_sides(pinset, store, name, targets=targets, settings=settings, labels=labels, jobs=args.jobs,
                       resolved=lambda: remove_stale(replaced)), store
