"""Base and head binaries for kld/bench: explicit folders, or built from pins.yaml (bare tree vs pinned tree)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

from pinset.build.programs import LlamaBin
from pinset.commands.common import count
from pinset.errors import PinsetError, ToolchainError


@dataclass(frozen=True)
class Side:
    label: str            # "base" | "head"
    build: str            # build name from pins.yaml, or the folder given
    commit: str           # upstream commit ("unknown" for explicit folders without --*-commit)
    bin_dir: Path
    source_dir: Path | None

    def exe(self, name: str) -> Path:
        return LlamaBin(self.bin_dir).exe(name, who=self.label)

    def to_json(self) -> dict:
        return {"build": self.build, "commit": self.commit, "bin_dir": str(self.bin_dir)}


def add_side_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("builds (either -c/--build, or --base-bin/--head-bin)")
    g.add_argument("-c", "--config", default=None, help="pin set file: base = bare build, head = build + pins")
    g.add_argument("--build", help="which build of pins.yaml (default: the first)")
    g.add_argument("--cache", help="cache folder (default: $PINSET_CACHE or $XDG_CACHE_HOME/pinset)")
    g.add_argument("--base-bin", type=Path, help="folder with the base build's llama.cpp programs")
    g.add_argument("--head-bin", type=Path, help="folder with the head build's llama.cpp programs")
    g.add_argument("--base-commit", default=None, help="commit to record for --base-bin")
    g.add_argument("--head-commit", default=None, help="commit to record for --head-bin")
    g.add_argument("--cuda-architectures", help="CMAKE_CUDA_ARCHITECTURES when building (default: pins.yaml, else the GPU's)")
    g.add_argument("-j", "--jobs", type=count(1), help="build jobs")


def resolve_sides(args, targets: list[str], cuda: bool, *, head_only: bool = False):
    """(base, head, store). Explicit folders win; otherwise both trees are built (cached). head_only: only the
    head build is needed (it is returned as both sides), e.g. to compare two models on it."""
    from pinset.store import Store

    if head_only and args.base_bin:
        raise PinsetError("--base-bin: not used here (only the head build runs); give --head-bin")
    if args.base_bin or args.head_bin:
        if not args.head_bin or not (args.base_bin or head_only):
            raise PinsetError("--base-bin and --head-bin go together")
        if args.config:
            raise PinsetError("give either -c/--build or --base-bin/--head-bin, not both")
        wanted = [("head", args.head_bin, args.head_commit)] if head_only else \
            [("base", args.base_bin, args.base_commit), ("head", args.head_bin, args.head_commit)]
        sides = []
        for label, d, commit in wanted:
            d = d.expanduser().resolve()
            if not d.is_dir():
                raise PinsetError(f"--{label}-bin {d}: not a folder")
            for t in targets:
                if not (d / t).is_file():
                    raise ToolchainError(f"--{label}-bin {d}: no {t} there")
            source = d.parent.parent if (d.parent.parent / "gguf-py").is_dir() else None
            sides.append(Side(label, str(d), commit or "unknown", d, source))
        store = Store.open(args.cache)
    else:
        *sides, store = _built_sides(args, targets, cuda, labels=("head",) if head_only else ("base", "head"))
    if head_only:
        return replace(sides[0], label="base"), sides[0], store
    return sides[0], sides[1], store


def built_base(args, targets: list[str], cuda: bool) -> Side:
    """Only the base (bare) build: for tools that are the same on both sides (imatrix, quantize)."""
    return _built_sides(args, targets, cuda, labels=("base",))[0]


def _built_sides(args, targets: list[str], cuda: bool, labels=("base", "head")):
    from pinset.build.cmake import BuildFailed, cuda_architectures_from_gpu, ensure_build
    from pinset.config.schema import load_pinset
    from pinset.sim.run import simulate
    from pinset.store import Store

    pinset = load_pinset(args.config or "pins.yaml")
    store = Store.open(args.cache)
    name = args.build or (pinset.builds[0] if pinset.builds else None)
    if not name:
        raise PinsetError("no build: give --build")
    sim = simulate(pinset, [name], store)
    try:
        build, result = sim.build(name)
        if not result.ok:
            raise PinsetError(f"build {name}: the pin set does not apply (run `pinset sim`)")
        arch = args.cuda_architectures or pinset.cuda_architectures or (cuda_architectures_from_gpu() if cuda else None)
        sides = []
        for label, tree in (("base", build.tree), ("head", result.tree)):
            if label not in labels:
                continue
            try:
                built = ensure_build(store, sim.mirror, tree, label=f"{name}-{label}", commit=build.commit,
                                     pinset_digest=pinset.digest, cuda=cuda, cuda_architectures=arch,
                                     targets=targets, jobs=args.jobs,
                                     extra_flags=list(pinset.cuda_flags) if cuda else [])
            except BuildFailed as exc:
                raise PinsetError(f"{label} build of {name} failed at {exc.stage} (log: {exc.log})\n{exc.tail}") from None
            sides.append(Side(label, name, build.commit, built.bin_dir, built.source_dir))
    finally:
        sim.mirror.close()
    return (*sides, store)
