"""`pinset rebase` and the resolution ledger on real git repositories with real conflicts."""

from __future__ import annotations

import json
import subprocess

from pinset.cli import main
from tests.heal.test_heal_refresh import modes_of, moved, sim_json  # noqa: F401 (the fixture)
from tests.testing import GIT_ENV


def git(cwd, *args):
    import os
    return subprocess.run(["git", *args], cwd=cwd, env=dict(os.environ, **GIT_ENV), check=True,
                          capture_output=True, text=True).stdout


def resolve_line_20(wt):
    text = (wt / "a.txt").read_text()
    assert "<<<<<<<" in text and ">>>>>>>" in text
    start, end = text.index("<<<<<<<"), text.index(">>>>>>>")
    end = text.index("\n", end) + 1
    (wt / "a.txt").write_text(text[:start] + "line 20 upstream pinned\n" + text[end:])
    git(wt, "add", "a.txt")


def start(pins_yaml, wt, build="b4"):
    return main(["rebase", "p", "-c", str(pins_yaml), "--onto", build, "--worktree", str(wt)])


def test_rebase_stops_at_the_conflict_continue_exports_records_and_heals_the_grid(moved, tmp_path, capsys):
    up, pins_yaml, folder = moved
    wt = tmp_path / "wt"
    assert main(["apply", "-c", str(pins_yaml), "--build", "b1", "--out", str(tmp_path / "b1-before")]) == 0
    yaml_before = pins_yaml.read_bytes()
    assert start(pins_yaml, wt) == 1
    out = capsys.readouterr().out
    lines = [l for l in out.splitlines() if l.strip()][-3:]
    assert "conflicts on b4 at 0001-change-line-20.patch: resolve a.txt" in lines[0]
    assert "add a.txt" in lines[1] and "pinset rebase p --continue" in lines[2]
    assert not (folder / "resolutions").exists()      # nothing changed yet
    resolve_line_20(wt)
    assert main(["rebase", "p", "-c", str(pins_yaml), "--continue", "--worktree", str(wt)]) == 0
    out = capsys.readouterr().out
    assert not wt.exists()
    assert pins_yaml.read_bytes() == yaml_before          # pins.yaml is never rewritten by a rebase
    ledger = sorted((folder / "resolutions").iterdir())
    assert [p.name for p in ledger] == ["0001-a.txt.txt"]
    text = ledger[0].read_text()
    assert "line 20 upstream pinned" in text and "path: a.txt" in text
    assert "p on b4: applied (exact)" in out
    assert "p on b1: applied (recorded resolution 0001-a.txt)" in out
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert rc == 0
    got = {b["build"]: next(p for p in b["pins"] if p["id"] == "p") for b in doc["builds"]}
    assert got["b4"]["apply_mode"] == "exact" and "resolutions" not in got["b4"]
    for older in ("b1", "b2", "b3"):   # recorded on b4, reused on the older builds
        assert got[older]["status"] == "applied" and got[older]["apply_mode"] == "resolution"
        assert got[older]["resolutions"] == ["0001-a.txt"]
    # One fix serves every build: b1 gets exactly the tree the old series gave it.
    assert main(["apply", "-c", str(pins_yaml), "--build", "b1", "--out", str(tmp_path / "b1-after")]) == 0
    assert subprocess.run(["git", "diff", "--no-index", "--quiet", str(tmp_path / "b1-before"),
                           str(tmp_path / "b1-after")]).returncode == 0
    # pick and blame count the pin as applied there, and say so.
    pick = tmp_path / "pick.json"
    assert main(["pick", "-c", str(pins_yaml), "--builds", "b1,b2", "--json", str(pick),
                 "--markdown", str(tmp_path / "pick.md")]) == 0
    doc = json.loads(pick.read_text())
    assert doc["picked"] == "b2" and doc["builds"][0]["resolved"] == {"p": ["0001-a.txt"]}
    assert "pin p applied by recorded resolution 0001-a.txt" in (tmp_path / "pick.md").read_text()
    blame = tmp_path / "blame.json"
    assert main(["blame", "-c", str(pins_yaml), "--good", "b1", "--bad", "b4", "--json", str(blame)]) == 0
    pin = json.loads(blame.read_text())["pins"][0]
    assert pin["status"] == "ok" and pin["resolutions"] == ["0001-a.txt"]
    assert pin["summary"] == "fine on both ends (applied by recorded resolution 0001-a.txt)"
    # A build whose conflict is another one: the resolution is ignored with a note, never forced.
    git(up.path, "checkout", "-q", "-b", "side", "b1")
    (up.path / "a.txt").write_text((up.path / "a.txt").read_text().replace("line 20\n", "line 20 other\n"))
    git(up.path, "commit", "-qam", "other")
    git(up.path, "tag", "b5")
    git(up.path, "checkout", "-q", "master")
    rc, doc = sim_json(tmp_path, pins_yaml, "--builds", "b5")
    pin = doc["builds"][0]["pins"][0]
    assert rc == 1 and pin["status"] == "conflict"
    assert "recorded resolution 0001-a.txt does not match this conflict (ignored)" in pin["detail"]


def test_continue_refuses_markers_left_and_changes_nothing(moved, tmp_path, capsys):
    _, pins_yaml, folder = moved
    wt = tmp_path / "wt"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert start(pins_yaml, wt) == 1
    git(wt, "add", "a.txt")                              # staged with the markers still in
    assert main(["rebase", "p", "-c", str(pins_yaml), "--continue", "--worktree", str(wt)]) == 1
    assert "conflict markers left in: a.txt" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert wt.is_dir()
    resolve_line_20(wt)
    (wt / "a.txt").write_text((wt / "a.txt").read_text() + "unstaged\n")
    assert main(["rebase", "p", "-c", str(pins_yaml), "--continue", "--worktree", str(wt)]) == 1
    assert "changes not staged: a.txt" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    # An existing worktree folder is never reused by a new start.
    assert start(pins_yaml, wt) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["rebase", "p", "-c", str(pins_yaml), "--abort", "--worktree", str(wt)]) == 0
    assert not wt.exists()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_abort_removes_the_worktree_and_changes_nothing(moved, tmp_path, capsys, isolated_cache):
    _, pins_yaml, folder = moved
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    wt = tmp_path / "wt"
    assert start(pins_yaml, wt) == 1
    assert main(["rebase", "p", "-c", str(pins_yaml), "--abort", "--worktree", str(wt)]) == 0
    assert not wt.exists()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    listed = git(isolated_cache / "mirror.git", "worktree", "list")
    assert str(wt) not in listed


def test_continue_or_abort_without_a_rebase_is_bad_input(moved, tmp_path, capsys, isolated_cache):
    _, pins_yaml, _ = moved
    assert main(["rebase", "p", "-c", str(pins_yaml), "--continue", "--worktree", str(tmp_path / "none")]) == 2
    assert "no rebase of p in progress" in capsys.readouterr().err
    (tmp_path / "plain").mkdir()
    assert main(["rebase", "p", "-c", str(pins_yaml), "--abort", "--worktree", str(tmp_path / "plain")]) == 2
    assert (tmp_path / "plain").is_dir()
    assert main(["rebase", "p", "-c", str(pins_yaml), "--onto", "b4", "--worktree",
                 str(isolated_cache / "wt")]) == 2
    assert "inside the cache" in capsys.readouterr().err


def test_pin_that_applies_needs_no_rebase(moved, tmp_path, capsys):
    _, pins_yaml, _ = moved
    assert start(pins_yaml, tmp_path / "wt", build="b2") == 0
    assert "nothing to rebase" in capsys.readouterr().out
    assert not (tmp_path / "wt").exists()


def test_a_damaged_rebase_state_is_one_line_exit_2_for_continue_and_abort_still_removes_it(moved, tmp_path, capsys,
                                                                                         isolated_cache):
    """--continue cannot go on from a damaged state (exit 2, nothing changed); --abort, the way out, still
    removes the worktree: it needs no state, only proof that the folder is a `pinset rebase` worktree."""
    _, pins_yaml, folder = moved
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    yaml_before = pins_yaml.read_bytes()
    wt = tmp_path / "wt"
    assert start(pins_yaml, wt) == 1
    state = next((isolated_cache / "mirror.git" / "worktrees").glob("*/pinset-rebase.json"))
    good = state.read_text()
    capsys.readouterr()
    for damaged in ("{not json", "[1, 2]", json.dumps({"pin": "p"}), good.replace('"stops": [', '"stops": [7, '),
                    "[" * 100_000 + "]" * 100_000, b"\xff\xfe{".decode("latin-1"), json.dumps({**json.loads(good),
                                                                                                "names": 5})):
        state.write_text(damaged, encoding="latin-1")
        assert main(["rebase", "p", "-c", str(pins_yaml), "--continue", "--worktree", str(wt)]) == 2, damaged[:30]
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "damaged `pinset rebase` state" in err and str(state) in err, err
        assert "--abort" in err
        assert wt.is_dir() and {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert main(["rebase", "p", "-c", str(pins_yaml), "--abort", "--worktree", str(wt)]) == 0
    out = capsys.readouterr().out
    assert "removed" in out and "damaged" in out and "nothing changed" in out
    assert not wt.exists() and not state.exists()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before and pins_yaml.read_bytes() == yaml_before
    assert main(["rebase", "p", "-c", str(pins_yaml), "--onto", "b4", "--worktree", str(wt)]) == 1   # starts anew


def test_abort_never_removes_a_folder_that_is_not_a_pinset_rebase_worktree(moved, tmp_path, capsys, isolated_cache):
    """A folder whose .git names a git dir outside the cache's mirror (the user's own worktree), with a file
    named like the state in it, is not ours: --abort refuses, and it stays whole."""
    _, pins_yaml, _ = moved
    theirs = tmp_path / "theirs"
    git(tmp_path, "init", "-q", str(theirs))
    own = tmp_path / "own-wt"
    git(theirs, "commit", "-q", "--allow-empty", "-m", "x")
    git(theirs, "worktree", "add", "-q", str(own))
    (own / "keep.txt").write_text("mine\n")
    gitdir = (own / ".git").read_text().split("gitdir: ", 1)[1].strip()
    (tmp_path / gitdir if not gitdir.startswith("/") else __import__("pathlib").Path(gitdir)).joinpath(
        "pinset-rebase.json").write_text("{damaged")
    assert main(["rebase", "p", "-c", str(pins_yaml), "--abort", "--worktree", str(own)]) == 2
    assert (own / "keep.txt").read_text() == "mine\n"


def test_a_resolution_holding_conflict_markers_is_refused_when_read(moved, tmp_path, capsys):
    """Trust III: a ledger file whose resolved side holds conflict markers was applied and `apply` wrote them."""
    _, pins_yaml, folder = moved
    wt = tmp_path / "wt"
    assert start(pins_yaml, wt) == 1
    resolve_line_20(wt)
    assert main(["rebase", "p", "-c", str(pins_yaml), "--continue", "--worktree", str(wt)]) == 0
    [path] = sorted((folder / "resolutions").iterdir())
    lines = path.read_text().rstrip("\n").split("\n")
    # hunk 2 is the way back, the one b1 uses: its one resolved line becomes a leftover conflict
    assert lines[-2:] == [">>>>>>> pin", "line 20 pinned"] and lines[-7].startswith("hunk 2:")
    lines[-7] = lines[-7].replace("1 resolved lines", "5 resolved lines")
    resolved_at = len(lines)
    lines[-1:] = ["<<<<<<< ours", "line 20", "=======", "line 20 pinned", ">>>>>>> theirs"]
    path.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    out = tmp_path / "tree"
    assert main(["apply", "-c", str(pins_yaml), "--build", "b1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{resolved_at}:" in err and "conflict marker" in err and "<<<<<<< ours" in err, err
    assert not out.exists()
    rc = main(["sim", "-c", str(pins_yaml), "--json", str(tmp_path / "s.json")])
    assert rc == 2 and "conflict marker" in capsys.readouterr().err


def test_continue_refuses_a_leftover_diff3_marker_and_records_nothing(moved, tmp_path, capsys):
    """Every marker style git writes (diff3's `|||||||` too) is a leftover; --continue records nothing."""
    _, pins_yaml, folder = moved
    wt = tmp_path / "wt"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert start(pins_yaml, wt) == 1
    text = (wt / "a.txt").read_text()
    start_at, end = text.index("<<<<<<<"), text.index(">>>>>>>")
    end = text.index("\n", end) + 1
    (wt / "a.txt").write_text(text[:start_at] + "line 20 upstream pinned\n||||||| base\n" + text[end:])
    git(wt, "add", "a.txt")
    assert main(["rebase", "p", "-c", str(pins_yaml), "--continue", "--worktree", str(wt)]) == 1
    assert "conflict markers left in: a.txt" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert main(["rebase", "p", "-c", str(pins_yaml), "--abort", "--worktree", str(wt)]) == 0


def test_rebase_of_a_series_written_on_newer_upstream_stops_at_its_real_conflict(make_repo, tmp_path, capsys):
    """Issue 32: the first patch needs master's blob for its 3-way merge on b1, the second conflicts for real.
    The worktree's `git am -3` builds the first one's fake ancestor (the sim's lookup fetched master into the
    mirror) and stops at the second, where the sim's conflict is."""
    from tests.heal.test_heal_refresh import written_on_newer_master

    _, pins_yaml = written_on_newer_master(make_repo, tmp_path, [
        ("change line 12", lambda text: text.replace("line 12\n", "twelve\n")),
        ("change line 30", lambda text: text.replace("line 12\n", "twelve\n").replace("line 30 up\n", "line 30 pinned\n"))])
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert rc == 1 and modes_of(doc) == {"b1": ("conflict", None)}, doc
    assert "0002-change-line-30.patch" in doc["builds"][0]["pins"][0]["detail"]
    wt = tmp_path / "wt"
    assert start(pins_yaml, wt, "b1") == 1
    out = capsys.readouterr().out
    assert "conflicts on b1 at 0002-change-line-30.patch: resolve a.txt" in out, out
    assert "twelve\n" in (wt / "a.txt").read_text()
    assert main(["rebase", "p", "-c", str(pins_yaml), "--abort", "--worktree", str(wt)]) == 0
