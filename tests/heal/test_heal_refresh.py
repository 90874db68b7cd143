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


# --- the proof compares commits, not trees only ------------------------------------------------------

def _two_series(make_repo, tmp_path, second_args=(), second_message="change line 20\n\nWhy it is pinned.",
                second_author=None):
    """The same change of a.txt exported twice from real commits (the second with other format-patch
    options, message or author); returns the two series' files."""
    from tests.testing import GIT_ENV
    up = make_repo("twins")
    b1 = up.commit("base", {"a.txt": LINES})
    made = []
    for n, (args, message, author) in enumerate([((), "change line 20\n\nWhy it is pinned.", None),
                                                 (second_args, second_message, second_author)]):
        up.git("checkout", "-q", "-b", f"s{n}", b1)
        up.write("a.txt", LINES.replace("line 20\n", "line 20 pinned\n"))
        up.git("add", "a.txt")
        env = {**GIT_ENV, "GIT_AUTHOR_DATE": "2024-01-02T03:04:05+0100", "GIT_COMMITTER_DATE": "2024-01-02T03:04:05+0100"}
        if author:
            env.update(author)
        subprocess.run(["git", "commit", "-q", "-m", message], cwd=up.path, env={**__import__("os").environ, **env},
                       check=True)
        out = tmp_path / f"series-{n}"
        up.git("format-patch", "-q", *args, "-o", str(out), f"{b1}..s{n}")
        made.append(sorted(out.glob("*.patch")))
        up.git("checkout", "-q", "master")
    return made


def test_same_commits_holds_for_the_same_commits_however_exported(make_repo, tmp_path):
    from pinset.heal.refresh import same_commits
    old, new = _two_series(make_repo, tmp_path, second_args=("-U7", "--numbered", "--subject-prefix=PATCH v2"))
    assert old[0].read_bytes() != new[0].read_bytes()
    assert same_commits(old, new, tmp_path / "mail") is None


@pytest.mark.parametrize("what, kwargs", [
    ("message", {"second_args": ("--signoff",)}),
    ("message", {"second_message": "change line 20\n\nWhy it is pinned, said otherwise."}),
    ("subject", {"second_message": "change line twenty\n\nWhy it is pinned."}),
    ("author", {"second_author": {"GIT_AUTHOR_NAME": "someone"}}),
    ("email", {"second_author": {"GIT_AUTHOR_EMAIL": "someone@example.com"}}),
    ("date", {"second_author": {"GIT_AUTHOR_DATE": "2024-01-02T03:04:06+0100"}}),
    ("date", {"second_author": {"GIT_AUTHOR_DATE": "2024-01-02T02:04:05+0000"}}),   # the same instant, another zone
])
def test_same_commits_names_what_differs(make_repo, tmp_path, what, kwargs):
    from pinset.heal.refresh import same_commits
    old, new = _two_series(make_repo, tmp_path, **kwargs)
    said = same_commits(old, new, tmp_path / "mail")
    assert said is not None and f"would change its {what}:" in said, said
    assert same_commits(old, old, tmp_path / "again") is None


def test_refresh_write_whose_export_adds_a_sign_off_writes_nothing(moved, tmp_path, capsys, monkeypatch):
    """A sign-off in the exported series (format.signOff reaching git) is no refresh: the trees agree, the
    commits do not; exit 1, the series as it was."""
    from pinset.heal import worktree
    _, pins_yaml, folder = moved
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    monkeypatch.setattr(worktree, "_NEUTRAL", [*worktree._NEUTRAL, "-c", "format.signOff=true"])
    assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b2", "--write"]) == 1
    err = capsys.readouterr().err
    assert "would change its message" in err and "nothing written" in err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
