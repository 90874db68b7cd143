"""Base and head binaries for kld/bench: explicit folders, or built from a pin set (bare tree vs pinned tree)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pinset.build.programs import LlamaBin
from pinset.build.settings import BuildSettings
from pinset.config.schema import PinSet
from pinset.errors import PinsetError, RuntimeFailure, ToolchainError
from pinset.store import Store


@dataclass(frozen=True)
class Side:
    label: str            # "base" | "head"
    build: str            # build name from pins.yaml, or the folder given
    commit: str           # upstream commit ("unknown" for explicit folders without --*-commit)
    bin_dir: Path
    source_dir: Path | None
    pinset: str | None = None  # digest of the pin set the head tree was built from; None for explicit folders

    def exe(self, name: str) -> Path:
        return LlamaBin(self.bin_dir).exe(name, who=self.label)

    def to_json(self) -> dict:
        return {"build": self.build, "commit": self.commit, "bin_dir": str(self.bin_dir)}


def folder_side(label: str, bin_dir: Path, commit: str | None, targets: list[str]) -> Side:
    """A side from a folder of programs someone built (--base-bin/--head-bin); the targets must be there."""
    folder = Path(bin_dir).expanduser().resolve()
    if not folder.is_dir():
        raise PinsetError(f"--{label}-bin {folder}: not a folder")
    for target in targets:
        if not (folder / target).is_file():
            raise ToolchainError(f"--{label}-bin {folder}: no {target} there")
    source = folder.parent.parent if (folder.parent.parent / "gguf-py").is_dir() else None
    return Side(label, str(folder), commit or "unknown", folder, source)


def built_sides(pinset: PinSet, store: Store, build_name: str, *, targets: list[str], settings: BuildSettings,
                labels: tuple[str, ...] = ("base", "head"), jobs: int | None = None,
                resolved: Callable[[], None] | None = None) -> list[Side]:
    """Build `build_name`'s bare tree (base) and pinned tree (head), cached, in the order of `labels`.

    A pin set that does not apply, or a build that fails, is a runtime failure (exit 1) naming the log.
    """
    from pinset.build.cmake import BuildFailed, ensure_build
    from pinset.sim.run import simulate

    with simulate(pinset, [build_name], store) as sim:
        build, result = sim.build(build_name)
        if resolved is not None:  # the build exists: an unknown one was bad input before anything changed
            resolved()
        if not result.ok:
            raise RuntimeFailure(f"build {build_name}: the pin set does not apply (run `pinset sim`)")
        trees = {"base": build.tree, "head": result.tree}
        sides = []
        for label in labels:
            try:
                built = ensure_build(store, sim.mirror, trees[label], label=f"{build_name}-{label}",
                                     commit=build.commit, pinset_digest=pinset.digest, cuda=settings.cuda,
                                     cuda_architectures=settings.cuda_architectures, targets=targets, jobs=jobs,
                                     extra_flags=list(settings.cuda_flags))
            except BuildFailed as exc:
                raise RuntimeFailure(f"{label} build of {build_name} failed at {exc.stage}: {exc} "
                                     f"(log: {exc.log})") from None
            sides.append(Side(label, build_name, build.commit, built.bin_dir, built.source_dir, pinset.digest))
    return sides
