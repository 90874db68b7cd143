"""The two imports of an sdist's vendored tree that must agree: the streamed one pinset does (`git
fast-import` straight from the archive) and the old one (unpack, then `git add -A`)."""

from __future__ import annotations

from pathlib import Path

from pinset.store import Store
from pinset.upstream import builds, pypi
from pinset.upstream.mirror import Mirror


def import_sdist(sdist: Path, ref: str, store: Store, mirror: Mirror, streamed: bool) -> str:
    """The commit of `sdist`'s vendored tree (package pkg, version 1.0) imported at `ref`, streamed or the old way."""
    if streamed:
        return builds._import_tree(sdist, "pkg", "1.0", ref, store, mirror)
    with store.scratch("old-") as tree_dir:
        upstream = pypi.extract_vendored_tree(sdist, "pkg", "1.0", tree_dir)
        return mirror.import_directory(tree_dir, ref, builds._import_message("pkg", "1.0", upstream))
