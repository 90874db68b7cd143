"""upstream.builds.fetch_head: upstream's default branch, None when upstream has none (an empty repository, a
HEAD naming no branch), and then no earlier run's ref left to stand in for it; any other failed fetch is an
UpstreamError."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pinset.errors import UpstreamError
from pinset.upstream.builds import UPSTREAM_HEAD_REF, fetch_head
from pinset.upstream.mirror import Mirror

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@example.com"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *IDENTITY, *args], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def upstream_and_mirror(tmp_path):
    upstream = tmp_path / "upstream"
    subprocess.run(["git", "init", "-q", "-b", "master", str(upstream)], check=True)
    (upstream / "a.c").write_text("one\n")
    _git(upstream, "add", "a.c")
    _git(upstream, "commit", "-q", "-m", "one")
    repo = tmp_path / "cache" / "mirror.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    mirror = Mirror(repo)
    yield upstream, mirror
    mirror.close()


def test_the_default_branch_is_fetched_and_its_tip_returned(upstream_and_mirror):
    upstream, mirror = upstream_and_mirror
    assert fetch_head(str(upstream), mirror) == _git(upstream, "rev-parse", "HEAD")
    assert mirror.rev_parse(UPSTREAM_HEAD_REF) == _git(upstream, "rev-parse", "HEAD")


def test_an_upstream_without_a_default_branch_is_none_and_leaves_no_earlier_ref(upstream_and_mirror):
    """An earlier run fetched the branch; now upstream's HEAD names no branch: None, not the earlier tip."""
    upstream, mirror = upstream_and_mirror
    assert fetch_head(str(upstream), mirror) is not None
    _git(upstream, "symbolic-ref", "HEAD", "refs/heads/gone")
    assert fetch_head(str(upstream), mirror) is None
    assert mirror.rev_parse(UPSTREAM_HEAD_REF) is None


def test_a_fetch_that_fails_otherwise_is_an_error_and_keeps_the_ref(upstream_and_mirror, tmp_path):
    """A broken upstream (here: its objects gone) is no answer at all: UpstreamError naming what it was for."""
    upstream, mirror = upstream_and_mirror
    tip = fetch_head(str(upstream), mirror)
    (upstream / "a.c").write_text("two\n")
    _git(upstream, "commit", "-q", "-am", "two")
    new = _git(upstream, "rev-parse", "HEAD")
    (upstream / ".git" / "objects" / new[:2] / new[2:]).unlink()
    with pytest.raises(UpstreamError, match=r"its default branch could not be fetched for the lookup"):
        fetch_head(str(upstream), mirror, needed_for=" for the lookup")
    assert mirror.rev_parse(UPSTREAM_HEAD_REF) == tip
