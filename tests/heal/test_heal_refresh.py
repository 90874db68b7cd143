"""`pinset sim` apply modes and `pinset refresh` on real git repositories made in temp dirs."""

from __future__ import annotations

import json
import subprocess

import pytest

from pinset.cli import main
from tests.testing import series, write_pins

LINES = "".join(f"line {i}\n" for i in range(1, 41))


@pytest.fixture
def moved(make_repo, tmp_path):
    """b1: the file; b2: five lines added above (context moved: offset); b3: a line beside the pin's
    changed (3-way); b4: the pin's own line changed by upstream (conflict)."""
    up = make_repo("upstream")
    b1 = up.commit("base", {"a.txt": LINES, "other.txt": "x\n"})
    up.tag("b1")
    pins = tmp_path / "patches"
    series(up, b1, [("change line 20", {"a.txt": LINES.replace("line 20\n", "line 20 pinned\n")}),
                    ("change line 30", {"a.txt": LINES.replace("line 20\n", "line 20 pinned\n")
                                                   .replace("line 30\n", "line 30 pinned\n")})],
           pins / "p", f"--base={b1}")
    up.commit("moved", {"a.txt": "".join(f"top {i}\n" for i in range(5)) + LINES})
    up.tag("b2")
    up.commit("beside", {"a.txt": "".join(f"top {i}\n" for i in range(5))
                          + LINES.replace("line 18\n", "line 18 upstream\n")})
    up.tag("b3")
    up.commit("clash", {"a.txt": "".join(f"top {i}\n" for i in range(5))
                         + LINES.replace("line 18\n", "line 18 upstream\n").replace("line 20\n", "line 20 upstream\n")})
    up.tag("b4")
    pins_yaml = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1, b2, b3, b4]
        pins:
          - id: p
            patches: patches/p   # my comment
            unchecked: test
        """)
    return up, pins_yaml, pins / "p"


def sim_json(tmp_path, pins_yaml, *extra):
    out = tmp_path / f"sim-{len(list(tmp_path.glob('sim-*.json')))}.json"
    rc = main(["sim", "-c", str(pins_yaml), "--json", str(out), *extra])
    return rc, json.loads(out.read_text())


def modes_of(doc, pin="p"):
    return {b["build"]: (next(p for p in b["pins"] if p["id"] == pin)["status"],
                         next(p for p in b["pins"] if p["id"] == pin).get("apply_mode")) for b in doc["builds"]}


def test_sim_records_how_each_pin_applied(moved, tmp_path, capsys):
    _, pins_yaml, _ = moved
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert modes_of(doc) == {"b1": ("applied", "exact"), "b2": ("applied", "offset"),
                             "b3": ("applied", "3-way"), "b4": ("conflict", None)}
    assert rc == 1
    out = capsys.readouterr().out
    assert "needs a refresh" in out


def test_refresh_shows_range_diff_and_changes_nothing_without_write(moved, tmp_path, capsys):
    _, pins_yaml, folder = moved
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    yaml_before = pins_yaml.read_bytes()
    assert main(["refresh", "-c", str(pins_yaml), "--onto", "b3"]) == 0
    out = capsys.readouterr().out
    assert "3-way -> exact on b3" in out
    assert "1:" in out and "change line 20" in out and "@@" in out   # git range-diff's pairs and diffs
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert pins_yaml.read_bytes() == yaml_before


def test_refresh_write_replaces_the_series_same_commits_new_context(moved, tmp_path, capsys):
    up, pins_yaml, folder = moved
    old = {p.name: p.read_text() for p in folder.iterdir()}
    assert main(["apply", "-c", str(pins_yaml), "--build", "b3", "--out", str(tmp_path / "before")]) == 0
    assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b3", "--write"]) == 0
    new = {p.name: p.read_text() for p in folder.iterdir()}
    assert sorted(new) == sorted(old)            # same files, one per commit
    b3 = up.git("rev-parse", "b3").strip()
    for name in old:
        for header in ("From: ", "Date: ", "Subject: "):
            assert [l for l in new[name].splitlines() if l.startswith(header)] == \
                   [l for l in old[name].splitlines() if l.startswith(header)]
    assert new["0001-change-line-20.patch"] != old["0001-change-line-20.patch"]
    assert any(f"base-commit: {b3}" in text for text in new.values())
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert modes_of(doc)["b3"] == ("applied", "exact")
    assert modes_of(doc)["b2"][0] == "applied"
    # The tree is the one `pinset apply` wrote before the refresh (the command's proof, checked here too).
    assert main(["apply", "-c", str(pins_yaml), "--build", "b3", "--out", str(tmp_path / "after")]) == 0
    same = subprocess.run(["git", "diff", "--no-index", "--quiet", str(tmp_path / "before"), str(tmp_path / "after")])
    assert same.returncode == 0
    capsys.readouterr()


def test_refresh_of_a_conflicting_pin_says_rebase_and_writes_nothing(moved, tmp_path, capsys):
    _, pins_yaml, folder = moved
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b4", "--write"]) == 1
    assert "pinset rebase p --onto b4" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_refresh_refuses_unknown_and_pr_pins(moved, tmp_path, capsys):
    _, pins_yaml, _ = moved
    assert main(["refresh", "nope", "-c", str(pins_yaml), "--onto", "b2"]) == 2
    assert "no pin 'nope'" in capsys.readouterr().err


def test_refresh_whose_new_series_would_change_the_tree_writes_nothing(moved, tmp_path, capsys, monkeypatch):
    """The proof inside the command: an export that would change what is applied (injected here: the
    exported patch's added line altered) is an error, nothing written."""
    from pinset.heal.worktree import Worktree

    _, pins_yaml, folder = moved
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    real = Worktree.export

    def tampered(self, *args, **kw):
        files = real(self, *args, **kw)
        files[0].write_text(files[0].read_text().replace("+line 20 pinned", "+line 20 pinned, differently"))
        return files

    monkeypatch.setattr(Worktree, "export", tampered)
    assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b2", "--write"]) == 1
    assert "nothing written" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not list(folder.parent.glob(".p.pinset-*"))


def test_interrupted_write_leaves_the_patches_untouched(moved, tmp_path, capsys, monkeypatch):
    """Ctrl-C while the new folder is being staged: the pin's folder is the old one, nothing left beside it."""
    import shutil

    _, pins_yaml, folder = moved
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    real, calls = shutil.copyfile, []

    def interrupted(src, dst, *a, **kw):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(src, dst, *a, **kw)

    monkeypatch.setattr("pinset.heal.series.shutil.copyfile", interrupted)
    assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b2", "--write"]) == 130
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not list(folder.parent.glob(".p.pinset-*"))


@pytest.mark.parametrize("base", [True, False], ids=["base-commit", "no-base-commit"])
def test_refresh_of_a_series_whose_second_patch_needs_the_first_ones_blob(make_repo, tmp_path, capsys, base):
    """Issue 27: both patches need a 3-way merge on b2, and the second one's preimage is the blob the first
    creates, which no upstream history holds: the sim makes it (replaying the series on its base, or on the
    preimages b2's history holds) and the worktree's `git am -3` must find it too (it said "could not build
    fake ancestor")."""
    up = make_repo("upstream")
    b1 = up.commit("base", {"a.txt": LINES})
    up.tag("b1")
    one = LINES.replace("line 20\n", "line 20 pinned\n")
    series(up, b1, [("change line 20", {"a.txt": one}),
                    ("change line 22", {"a.txt": one.replace("line 22\n", "line 22 pinned\n")})],
           tmp_path / "patches" / "p", *([f"--base={b1}"] if base else []))
    up.commit("beside", {"a.txt": LINES.replace("line 18\n", "line 18 upstream\n").replace("line 24\n", "line 24 up\n")})
    up.tag("b2")
    pins_yaml = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b2]
        pins:
          - id: p
            patches: patches/p
        """)
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert modes_of(doc) == {"b2": ("applied", "3-way")}, doc
    assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b2", "--write"]) == 0, capsys.readouterr()
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert modes_of(doc) == {"b2": ("applied", "exact")}
    capsys.readouterr()
