"""Real llama.cpp snapshots from llama-cpp-python sdists, and real pins cut from their history.

Shared by the integration tests and benchmarks/sim_speed.py. The sdists come from PyPI once into a
shared download folder (PINSET_SDIST_CACHE, default ~/.cache/pinset-sdists) so repeated runs don't
fetch 75 MB again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pinset.store import Store
from pinset.upstream.builds import Build, resolve_build
from pinset.upstream.mirror import Mirror

SNAPSHOTS = {  # llama-cpp-python version -> vendored llama.cpp commit (from its CHANGELOG)
    "0.3.36": "0c1e57098",
    "0.3.35": "4df29be4f",
    "0.3.34": "e3546c794",
}


def build_name(version: str) -> str:
    return f"pypi:llama-cpp-python=={version}"


def sdist_cache() -> Path:
    path = Path(os.environ.get("PINSET_SDIST_CACHE", Path.home() / ".cache" / "pinset-sdists"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def sdist_file(version: str) -> Path:
    """The llama-cpp-python sdist of `version` in the shared download folder, from PyPI when it is not there yet
    (pinset's own download: checked against PyPI's sha256): a test that needs one runs, never skips."""
    from pinset.upstream.pypi import download_sdist

    path = sdist_cache() / f"llama_cpp_python-{version}.tar.gz"
    return path if path.exists() else download_sdist("llama-cpp-python", version, sdist_cache(), progress=False)


def seed_downloads(store: Store, versions) -> None:
    """Put already-downloaded sdists into the store so resolve_build does not fetch them again."""
    for version in versions:
        name = f"llama_cpp_python-{version}.tar.gz"
        src = sdist_cache() / name
        if src.exists() and not (store.downloads / name).exists():
            shutil.copy(src, store.downloads / name)


def keep_downloads(store: Store) -> None:
    for path in store.downloads.glob("llama_cpp_python-*.tar.gz"):
        target = sdist_cache() / path.name
        if not target.exists():
            shutil.copy(path, target)


def import_snapshots(store: Store, versions=tuple(SNAPSHOTS)) -> dict[str, Build]:
    seed_downloads(store, versions)
    mirror = Mirror(store.mirror)
    try:
        builds = {v: resolve_build(build_name(v), None, Path("."), store, mirror) for v in versions}
    finally:
        mirror.close()
    keep_downloads(store)
    return builds


def copy_store(seed: Store, dest: Path) -> Store:
    """A store of its own with what `seed` holds, in well under a second instead of ~25 s of imports.

    Git object files and downloaded sdists are hard links (neither git nor pinset ever rewrites one in place:
    new objects, packs and downloads are new files); refs, config and the rest are copied, and locks/ and tmp/
    start empty, so what one test's store writes never reaches the seed or another copy."""
    def link_or_copy(src: str, dst: str) -> None:
        rel = Path(src).relative_to(seed.root).parts
        if rel[0] == "downloads" or rel[:2] == ("mirror.git", "objects"):
            os.link(src, dst)
        else:
            shutil.copy2(src, dst)

    shutil.copytree(seed.root, dest, copy_function=link_or_copy,
                    ignore=lambda folder, names: [n for n in names if Path(folder) == seed.root and n in ("locks", "tmp")])
    return Store.open(dest)


def make_backport_pins(store: Store, old: Build, new: Build, dest: Path, count: int,
                       under: str = "ggml/src/ggml-cuda/") -> list[Path]:
    """Pins that backport upstream's changes of single files from `old` to `new`.

    Real llama.cpp changes, one file each, picked deterministically (modified text files with a
    modest diff). On `new` they are already upstream; on `old` they apply; on older builds they may
    conflict. Each pin is a folder holding one patch file.
    """
    mirror = Mirror(store.mirror)
    try:
        numstat = mirror.git_ok("diff", "--numstat", "--diff-filter=M", old.oid, new.oid, "--", under)
        picked = []
        for line in numstat.splitlines():
            added, removed, path = line.split("\t")
            if added == "-" or not (4 <= int(added) + int(removed) <= 120):
                continue
            picked.append(path)
        picked = sorted(picked)[:count]
        folders = []
        for path in picked:
            folder = dest / ("backport-" + Path(path).name.replace(".", "-"))
            folder.mkdir(parents=True, exist_ok=True)
            diff = mirror.git_ok("diff", "--full-index", old.oid, new.oid, "--", path)
            header = f"From: pinset tests\nSubject: [PATCH] backport {path} from {new.commit}\n\n---\n"
            (folder / "0001-backport.patch").write_text(header + diff)
            folders.append(folder)
        return folders
    finally:
        mirror.close()


_VENDORED: dict[tuple[str, str], str] = {}


def vendored_file(version: str, path: str) -> str:
    """The text of one file of the llama.cpp tree an sdist vendors (`src/llama-arch.cpp`), read from the
    sdist in the shared download folder (PyPI once when it is not there): real upstream text for tests
    that need a few files, not a whole imported tree."""
    import tarfile  # noqa: PLC0415 (only the tests that read a vendored file need it)

    if (version, path) not in _VENDORED:
        with tarfile.open(sdist_file(version)) as tar:
            for member in tar:
                if "/vendor/llama.cpp/" in member.name and member.isfile():
                    rel = member.name.split("/vendor/llama.cpp/", 1)[1]
                    if rel in ("src/llama-arch.cpp", "src/llama-arch.h", "tools/mtmd/clip.cpp", path):
                        data = tar.extractfile(member)
                        assert data is not None
                        _VENDORED[version, rel] = data.read().decode("utf-8")
    return _VENDORED[version, path]
