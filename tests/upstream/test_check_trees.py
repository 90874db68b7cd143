"""Mirror.check_trees: every build's tree checked whole in one `git rev-list --objects --missing=print`, a lost
blob or folder named as damage of the tree that lacks it (as check_tree of each did), a loose object that does
not read named too, and Mirror.commit_of."""

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


@pytest.mark.parametrize("damage", ["lost blob", "lost folder", "emptied blob", "cut blob", "another's data"])
def test_whole_trees_pass_and_damage_names_what_lacks_or_does_not_read(tmp_path, damage):
    """Lost objects name the tree that lacks them; a loose object emptied or cut (a crash mid-write), or
    holding another object's whole data (which `git cat-file` prints without a word), is named too, although
    the walk only asks whether each exists."""
    mirror, repo, one, two, own, sub = _mirror_with_trees(tmp_path)
    try:
        mirror.check_trees([one, two, one])
        oid = sub if damage == "lost folder" else own
        loose = repo / "objects" / oid[:2] / oid[2:]
        if damage.startswith("lost"):
            loose.unlink()
            expected = rf"tree {two[:12]} lacks 1 objects \(e\.g\. {oid[:12]}\)"
        else:
            data = loose.read_bytes()
            loose.chmod(0o644)
            other = _blob(repo, "another object\n")
            swapped = (repo / "objects" / other[:2] / other[2:]).read_bytes()
            loose.write_bytes({"emptied blob": b"", "cut blob": data[:-3], "another's data": swapped}[damage])
            expected = rf"object {oid[:12]} does not read"
        mirror.check_tree(one)   # the other tree is whole
        with pytest.raises(CacheDamaged, match=expected):
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


def test_a_loose_file_that_does_not_read_but_git_reads_is_no_damage(tmp_path):
    """A loose copy cut while a pack holds the object (git reads packs first), or a loose file another run's
    gc packed away between the listing and the read: git still reads the object, so the mirror is whole."""
    mirror, repo, one, two, own, _ = _mirror_with_trees(tmp_path)
    try:
        loose = repo / "objects" / own[:2] / own[2:]
        data = loose.read_bytes()
        _git(repo, "pack-objects", "-q", str(repo / "objects" / "pack" / "pack"), input=own + "\n")   # a pack holds it
        loose.chmod(0o644)
        loose.write_bytes(data[:-3])
        mirror.check_trees([one, two])
    finally:
        mirror.close()

