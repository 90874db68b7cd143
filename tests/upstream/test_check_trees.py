"""Mirror.check_trees: every build's tree checked whole in one `git rev-list --objects --missing=print`, a lost
blob or folder named as damage of the tree that lacks it (as check_tree of each did), and Mirror.commit_of."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pinset.errors import CacheDamaged
from pinset.upstream.mirror import Mirror


def _git(repo: Path, *args: str, input: str | None = None) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], input=input, capture_output=True, text=True,
                          check=True).stdout.strip()


def _blob(repo: Path, text: str) -> str:
    return _git(repo, "hash-object", "-w", "--stdin", input=text)


def _mirror_with_trees(tmp_path: Path) -> tuple[Mirror, Path, str, str, str, str]:
    repo = tmp_path / "cache" / "mirror.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    shared, own = _blob(repo, "shared\n"), _blob(repo, "only in two\n")
    sub = _git(repo, "mktree", input=f"100644 blob {own}\tb.c\n")
    one = _git(repo, "mktree", input=f"100644 blob {shared}\ta.c\n")
    two = _git(repo, "mktree", input=f"100644 blob {shared}\ta.c\n040000 tree {sub}\tsrc\n")
    return Mirror(repo), repo, one, two, own, sub


def test_whole_trees_pass_and_a_lost_blob_names_the_tree_that_lacks_it(tmp_path):
    mirror, repo, one, two, own, _ = _mirror_with_trees(tmp_path)
    try:
        mirror.check_trees([one, two, one])
        (repo / "objects" / own[:2] / own[2:]).unlink()
        mirror.check_tree(one)   # the other tree is whole
        with pytest.raises(CacheDamaged, match=rf"tree {two[:12]} lacks 1 objects \(e\.g\. {own[:12]}\)"):
            mirror.check_trees([one, two])
    finally:
        mirror.close()


def test_a_lost_folder_is_damage_too(tmp_path):
    mirror, repo, one, two, _, sub = _mirror_with_trees(tmp_path)
    try:
        (repo / "objects" / sub[:2] / sub[2:]).unlink()
        with pytest.raises(CacheDamaged, match=rf"tree {two[:12]} lacks"):
            mirror.check_trees([one, two])
    finally:
        mirror.close()


def test_commit_of_reads_commit_tree_and_message_without_a_process(tmp_path):
    mirror, repo, one, _, _, _ = _mirror_with_trees(tmp_path)
    try:
        commit = subprocess.run(["git", "--git-dir", str(repo), "commit-tree", one, "-m", "imported\n\nupstream-commit: abc"],
                                capture_output=True, text=True, check=True,
                                env={"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a", "GIT_COMMITTER_NAME": "a",
                                     "GIT_COMMITTER_EMAIL": "a@a", "PATH": "/usr/bin:/bin"}).stdout.strip()
        _git(repo, "update-ref", "refs/pinset/pypi/p/1", commit)
        assert mirror.commit_of("refs/pinset/pypi/p/1") == (commit, one, mirror.commit_message(commit).rstrip("\n") + "\n")
        assert mirror.commit_of("refs/pinset/pypi/p/2") is None
        assert mirror.commit_of(one) is None   # a tree is no commit
    finally:
        mirror.close()
