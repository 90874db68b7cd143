"""Base and head binaries for kld/bench: explicit folders, or built from a pin set (bare tree vs pinned tree)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from pinset.build.programs import LlamaBin
from pinset.build.settings import BuildSettings
from pinset.config.schema import PinSet
from pinset.errors import PinsetError, RuntimeFailure, ToolchainError
from pinset.store import Store, file_sha256


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


# The libraries a llama.cpp program loads from its own folder (RPATH $ORIGIN; Windows: beside the .exe).
LIBRARY_SUFFIXES = (".so", ".dylib", ".dll")


def _program_files(bin_dir: Path, program: str) -> list[Path]:
    """The program and the shared libraries in its folder: what decides what it runs."""
    folder = Path(bin_dir)
    libs = [p for p in folder.iterdir() if p.is_file() and (p.suffix in LIBRARY_SUFFIXES or ".so." in p.name)]
    return [folder / program, *sorted(libs, key=lambda p: p.name)]


def same_programs(base_dir: Path, head_dir: Path, program: str) -> bool:
    """base and head run the same code: one folder, or `program` and the libraries beside it byte-identical in
    both (same names, sizes and SHA-256; sizes first, so two real builds are told apart without hashing them)."""
    a, b = Path(base_dir).resolve(), Path(head_dir).resolve()
    if a == b:
        return True
    try:
        fa, fb = _program_files(a, program), _program_files(b, program)
        if [p.name for p in fa] != [p.name for p in fb] or any(x.stat().st_size != y.stat().st_size
                                                                for x, y in zip(fa, fb)):
            return False
        return all(file_sha256(x) == file_sha256(y) for x, y in zip(fa, fb))
    except OSError:
        return False


# `--version` of llama.cpp's common-argument programs (common/build-info.cpp): "version: b7216-0c1e570 (build 7216,
# commit 0c1e570)" today, "version: 7216 (0c1e570)" in older trees.
VERSION_LINE = re.compile(r"^version: (?:\S+ \(build \d+, commit (?P<new>[0-9a-f]+)\)|\d+ \((?P<old>[0-9a-f]+)\))", re.M)


def version_commit(text: str) -> str | None:
    """The commit a llama.cpp program's `--version` output names: llama.cpp's LLAMA_COMMIT, the same that
    llama-bench records as build_commit; None when it does not say (a build outside git says "unknown")."""
    m = VERSION_LINE.search(text)
    return (m.group("new") or m.group("old")) if m else None


def with_build_identity(side: Side, program: str) -> Side:
    """An explicit folder without --*-commit: its commit from `<program> --version`, so a kld from a folder records
    the build identity bench records from llama-bench's build_commit (and the report can merge them). Sides that
    know their commit, and programs that do not say, are returned as they are ("unknown")."""
    from pinset import runner

    if side.commit != "unknown":
        return side
    done = runner.run([side.exe(program), "--version"], env={"CUDA_VISIBLE_DEVICES": ""}, timeout=60)
    commit = version_commit(done.stdout + "\n" + done.stderr) if done.ok else None
    return replace(side, commit=commit) if commit else side


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
                built = ensure_build(store, sim.mirror, trees[label], settings, targets,
                                     label=f"{build_name}-{label}", commit=build.commit,
                                     pinset_digest=pinset.digest, jobs=jobs)
            except BuildFailed as exc:
                raise RuntimeFailure(f"{label} build of {build_name} failed at {exc.stage}: {exc} "
                                     f"(log: {exc.log})") from None
            sides.append(Side(label, build_name, build.commit, built.bin_dir, built.source_dir, pinset.digest))
    return sides
