"""`pinset rebase`'s default worktree lives outside the user's checkout (issue 43: it was ./pinset-rebase-PIN,
an untracked tree of llama.cpp's size in `git status`, one `git add -A` away from a commit): in the cache,
one folder per pin set file and pin, named in the output; a rebase an older pinset started in ./ goes on."""

from __future__ import annotations

from pinset.cli import main
from pinset.commands.rebase import default_worktree
from tests.heal.test_heal_rebase import git, resolve_line_20
from tests.heal.test_heal_refresh import moved  # noqa: F401 (the fixture)


def checkout_of(tmp_path):
    """The distributor's checkout: tmp_path (pins.yaml, patches/) as a git repository, all committed."""
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("upstream/\ncache/\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "the pin set")
    return tmp_path


def test_the_default_worktree_is_in_the_cache_not_the_checkout(moved, tmp_path, capsys, monkeypatch, isolated_cache):
    _, pins_yaml, folder = moved
    checkout = checkout_of(tmp_path)
    monkeypatch.chdir(checkout)
    assert main(["rebase", "p", "-c", "pins.yaml", "--onto", "b4"]) == 1
    out = capsys.readouterr().out
    wt = default_worktree(isolated_cache, pins_yaml, "p")
    assert wt.is_dir() and isolated_cache.resolve() in wt.resolve().parents
    assert f"resolve a.txt in {wt}" in out.replace("\n", "")
    assert git(checkout, "status", "--porcelain", "--untracked-files=all") == ""   # nothing new in the checkout
    resolve_line_20(wt)
    assert main(["rebase", "p", "-c", "pins.yaml", "--continue"]) == 0
    capsys.readouterr()
    assert not wt.exists() and [p.name for p in (folder / "resolutions").iterdir()] == ["0001-a.txt.txt"]


def test_two_pin_set_files_do_not_share_a_worktree(tmp_path, isolated_cache):
    a = default_worktree(isolated_cache, tmp_path / "one" / "pins.yaml", "o/r#1")
    b = default_worktree(isolated_cache, tmp_path / "two" / "pins.yaml", "o/r#1")
    assert a != b and a.name == b.name == "pinset-rebase-o-r-1"


def test_a_rebase_started_in_the_old_place_goes_on_there(moved, tmp_path, capsys, monkeypatch):
    _, pins_yaml, _ = moved
    monkeypatch.chdir(tmp_path)
    assert main(["rebase", "p", "-c", str(pins_yaml), "--onto", "b4", "--worktree", "pinset-rebase-p"]) == 1
    capsys.readouterr()
    assert main(["rebase", "p", "-c", str(pins_yaml), "--abort"]) == 0
    assert f"removed {tmp_path / 'pinset-rebase-p'}" in capsys.readouterr().out
    assert not (tmp_path / "pinset-rebase-p").exists()
