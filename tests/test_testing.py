"""The shared testing module's own promises: a copied store never writes into its seed."""

from __future__ import annotations

import os
import subprocess

from pinset.store import Store
from tests.testing import GIT_ENV
from tests.testing.snapshots import copy_store


def git(repo, *args: str, input: str | None = None) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], input=input, capture_output=True, text=True,
                          check=True, env=dict(os.environ, **GIT_ENV)).stdout.strip()


def test_a_copied_store_shares_objects_but_writes_only_its_own(tmp_path):
    seed = Store.open(tmp_path / "seed")
    git(seed.mirror, "init", "-q", "--bare")
    blob = git(seed.mirror, "hash-object", "-w", "--stdin", input="seed\n")
    git(seed.mirror, "update-ref", "refs/pinset/a", git(seed.mirror, "mktree", input=f"100644 blob {blob}\ta\n"))
    (seed.downloads / "x.tar.gz").write_bytes(b"sdist")
    with seed.lock("mirror"):
        pass

    copy = copy_store(seed, tmp_path / "copy")
    obj = f"objects/{blob[:2]}/{blob[2:]}"
    assert os.path.samefile(seed.mirror / obj, copy.mirror / obj)  # linked, not copied
    assert os.path.samefile(seed.downloads / "x.tar.gz", copy.downloads / "x.tar.gz")
    assert not (copy.root / "locks").exists()
    assert git(copy.mirror, "cat-file", "-p", blob) == "seed"

    other = git(copy.mirror, "hash-object", "-w", "--stdin", input="copy\n")
    git(copy.mirror, "update-ref", "refs/pinset/a", git(copy.mirror, "mktree", input=f"100644 blob {other}\ta\n"))
    git(copy.mirror, "gc", "-q", "--prune=now")
    assert subprocess.run(["git", "--git-dir", str(seed.mirror), "cat-file", "-e", other],
                          env=dict(os.environ, **GIT_ENV)).returncode != 0  # the copy's object is not the seed's
    assert git(seed.mirror, "ls-tree", "refs/pinset/a").endswith(f"{blob}\ta")  # the seed's ref is as it was
    assert git(seed.mirror, "cat-file", "-p", blob) == "seed"  # and gc in the copy removed nothing of the seed's
    git(seed.mirror, "fsck", "--strict")
