"""An object another run writes while git looks for it is no damage; a damaged loose object still is.

git reads an object, fails because it is not there yet, then stats its loose file, which a concurrent
fetch has just written, and says "loose object X ... is corrupt" (seen in CI: 8 concurrent `pinset sim`
on a fresh cache, one exited 1 with "cache damaged"). The fake git injects exactly that first answer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from pinset.errors import CacheDamaged
from pinset.store import Store
from pinset.upstream.mirror import Mirror
from tests.testing import GIT_ENV, fake_program


@pytest.fixture
def mirror_with_blob(tmp_path):
    store = Store.open(tmp_path / "cache")
    mirror = Mirror(store.mirror)
    oid = subprocess.run(["git", "--git-dir", str(store.mirror), "hash-object", "-w", "--stdin"], input=b"hello\n",
                         capture_output=True, check=True, env={**os.environ, **GIT_ENV}).stdout.decode().strip()
    yield mirror, oid
    mirror.close()


def test_an_object_written_while_git_looked_is_read_again_not_called_damage(mirror_with_blob, tmp_path, monkeypatch):
    mirror, oid = mirror_with_blob
    real = shutil.which("git")
    once = tmp_path / "said-once"
    stored = mirror.path / "objects" / oid[:2] / oid[2:]
    fake_program(tmp_path / "bin", "git", f"""#!/bin/sh
case " $* " in
  *" cat-file -t "*)
    if [ ! -e "{once}" ]; then
      touch "{once}"
      echo "fatal: loose object {oid} (stored in {stored}) is corrupt" >&2
      exit 128
    fi;;
esac
exec "{real}" "$@"
""")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    result = mirror.git("cat-file", "-t", oid)
    assert once.exists()            # the first call did fail as git fails in that race
    assert result.ok and result.stdout.strip() == "blob"


def test_a_damaged_loose_object_is_still_cache_damage(mirror_with_blob):
    mirror, oid = mirror_with_blob
    stored = Path(mirror.path / "objects" / oid[:2] / oid[2:])
    stored.chmod(0o644)
    stored.write_bytes(zlib.compress(b"blob 6\0hello\n")[:-4] + b"\0\0\0\0")  # the checksum broken
    with pytest.raises(CacheDamaged):
        mirror.git("cat-file", "-p", oid)
