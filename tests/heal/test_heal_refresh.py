"""`pinset sim` apply modes and `pinset refresh` on real git repositories made in temp dirs."""

from __future__ import annotations

import subprocess

import pytest

from pinset.cli import main
from tests.testing import first_build, interrupt_at, run_doc, series, write_pins

LINES = "".join(f"line {i}\n" for i in range(1, 41))


@pytest.fixture
def moved(make_repo, tmp_path):
    """b1: the file; b2: five lines added above (context moved: offset); b3: a line beside the pin's
    changed (3-way); b4: the pin's own line changed by upstream (conflict)."""
    up, b1 = first_build(make_repo, {"a.txt": LINES, "other.txt": "x\n"})
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
    return rc, run_doc(out.read_text())


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
    monkeypatch.setattr("pinset.heal.series.shutil.copyfile", interrupt_at(2, shutil.copyfile))
    assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b2", "--write"]) == 130
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not list(folder.parent.glob(".p.pinset-*"))


# --- a file system without RENAME_EXCHANGE, and a run killed in the middle of the swap --------------------------

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* No RENAME_EXCHANGE here (as on NFS, CIFS, vfat): renameat2 fails with EINVAL. */
int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    (void)olddirfd; (void)oldpath; (void)newdirfd; (void)newpath; (void)flags;
    errno = EINVAL;
    return -1;
}

/* SHIM_KILL_FROM=TEXT: the process is SIGKILLed at the rename whose source contains TEXT, before it happens. */
int rename(const char *oldpath, const char *newpath) {
    static int (*real)(const char *, const char *);
    const char *kill_from = getenv("SHIM_KILL_FROM");
    if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    if (kill_from && *kill_from && strstr(oldpath, kill_from)) raise(SIGKILL);
    return real(oldpath, newpath);
}
"""


@pytest.fixture(scope="module")
def no_exchange(tmp_path_factory):
    import shutil as _shutil

    gcc = _shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the LD_PRELOAD shim that refuses renameat2 cannot be built")
    folder = tmp_path_factory.mktemp("shim")
    (folder / "shim.c").write_text(SHIM)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(folder / "shim.so"), str(folder / "shim.c"), "-ldl"], check=True)
    return folder / "shim.so"


def _refresh_child(tmp_path, pins_yaml, shim, kill_from: str) -> subprocess.CompletedProcess:
    import sys

    from tests.testing import child_env

    env = child_env(LD_PRELOAD=str(shim), SHIM_KILL_FROM=kill_from, PINSET_CACHE=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "pinset", "refresh", "p", "-c", str(pins_yaml), "--onto", "b3",
                           "--write"], env=env, capture_output=True, text=True, timeout=300)


def _hidden(folder):
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith("."))


def test_without_rename_exchange_the_write_takes_two_renames_and_leaves_nothing(moved, tmp_path, no_exchange, capsys):
    _, pins_yaml, folder = moved
    done = _refresh_child(tmp_path, pins_yaml, no_exchange, "")
    assert done.returncode == 0, done.stderr
    assert "base-commit: " in (folder / "0001-change-line-20.patch").read_text() and _hidden(folder) == []
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert modes_of(doc)["b3"] == ("applied", "exact")


def test_killed_between_the_two_renames_the_next_run_completes_the_swap(moved, tmp_path, no_exchange, capsys):
    _, pins_yaml, folder = moved
    old = {p.name: p.read_bytes() for p in folder.iterdir()}
    killed = _refresh_child(tmp_path, pins_yaml, no_exchange, ".pinset-new-")   # after `p` -> .p.pinset-old-*
    assert killed.returncode == -9, killed.stderr
    assert not folder.exists()                                                  # what a kill there leaves
    hidden = _hidden(folder)
    assert [n.split("-")[1] for n in hidden] == ["new", "old"], hidden
    rc, doc = sim_json(tmp_path, pins_yaml)                                     # the next run, any verb
    err = capsys.readouterr().err
    assert "completed the replacement a killed run" in err and str(folder) in err
    assert _hidden(folder) == [] and folder.is_dir()
    new = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert sorted(new) == sorted(old) and new != old                            # the refreshed series, whole
    assert modes_of(doc)["b3"] == ("applied", "exact")


def test_killed_before_the_first_rename_the_next_run_rolls_back(moved, tmp_path, no_exchange, capsys):
    _, pins_yaml, folder = moved
    old = {p.name: p.read_bytes() for p in folder.iterdir()}
    # killed while promoting the staged copy (the half copy a kill while copying leaves looks the same)
    killed = _refresh_child(tmp_path, pins_yaml, no_exchange, ".pinset-part-")
    assert killed.returncode == -9 and [n.split("-")[1] for n in _hidden(folder)] == ["part"]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == old
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert "removed what a killed run" in capsys.readouterr().err and _hidden(folder) == []
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == old


def test_killed_after_moving_the_old_folder_away_only_the_old_folder_goes_back(moved, tmp_path, capsys):
    """The journal's other state: the pin's folder renamed to `old`, no whole `new` (removed by hand, say)."""
    _, pins_yaml, folder = moved
    old = {p.name: p.read_bytes() for p in folder.iterdir()}
    dead = subprocess.Popen(["true"])
    dead.wait()
    from pinset.swap import host_tag

    folder.rename(folder.parent / f".p.pinset-old-{host_tag()}-{dead.pid}-0123abcd")
    (folder.parent / f".p.pinset-part-{host_tag()}-{dead.pid}-0123abcd").mkdir()
    assert main(["sim", "-c", str(pins_yaml), "--json", str(tmp_path / "s.json")]) in (0, 1)
    assert "rolled back" in capsys.readouterr().err and _hidden(folder) == []
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == old


def test_a_live_runs_staging_is_left_alone_and_another_hosts_for_a_day(moved, tmp_path, capsys):
    import os

    from pinset.swap import host_tag

    _, pins_yaml, folder = moved
    live = folder.parent / f".p.pinset-new-{host_tag()}-{os.getppid()}-0123abcd"   # pytest's parent: alive
    live.mkdir()
    elsewhere = folder.parent / ".p.pinset-part-otherhost-1-0123abcd"             # another host's run: not asked
    elsewhere.mkdir()
    stale = folder.parent / ".p.pinset-part-otherhost-2-0123abcd"                 # ... unless a day old
    stale.mkdir()
    os.utime(stale, (0, 0))
    assert main(["sim", "-c", str(pins_yaml), "--json", str(tmp_path / "s.json")]) in (0, 1)
    assert live.is_dir() and elsewhere.is_dir() and not stale.exists()


def test_a_full_disk_while_writing_the_series_is_one_line_naming_the_path_exit_1(moved, tmp_path, capsys):
    import shutil as _shutil

    _, pins_yaml, folder = moved
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(tiny)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}); "
                    "test_a_tree_copy_failure_reads_as_one_line covers the message")
    try:
        _shutil.copytree(folder, tiny / "p")
        pins_yaml.write_text(pins_yaml.read_text().replace("patches: patches/p", "patches: tiny/p"))
        with open(tiny / "filler", "wb", buffering=0) as fh:   # the rest of the disk taken
            try:
                while True:
                    fh.write(b"x" * 4096)
                    fh.flush()
            except OSError:
                pass
        before = {p.name: p.read_bytes() for p in (tiny / "p").iterdir()}
        assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b3", "--write"]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "no space left on device" in err and str(tiny) in err, err
        assert "[(" not in err and "Errno" not in err and "free space there" in err
        assert {p.name: p.read_bytes() for p in (tiny / "p").iterdir()} == before
        assert sorted(p.name for p in tiny.iterdir()) == ["filler", "p"]   # no half copy left
    finally:
        subprocess.run(["umount", "-l", str(tiny)], check=False)


def test_a_tree_copy_failure_reads_as_one_line():
    import shutil as _shutil

    from pinset.cli import os_error_line

    exc = _shutil.Error([("/a/x.patch", "/b/x.patch", "[Errno 28] No space left on device: '/b/x.patch'"),
                         ("/a/y.patch", "/b/y.patch", "[Errno 28] No space left on device: '/b/y.patch'")])
    assert os_error_line(exc) == "no space left on device: /b/x.patch (and 1 more)"


@pytest.mark.parametrize("damage", [b"path: a.txt\nhunk 1: 1 build line, 1 pin line, 1 resolved line\n\xff\xfe\n",
                                    b"path: a.txt\nnot a hunk\n"])
def test_a_damaged_ledger_is_named_and_said_even_where_no_build_needs_it(moved, tmp_path, capsys, damage):
    _, pins_yaml, folder = moved
    (folder / "resolutions").mkdir()
    bad = folder / "resolutions" / "0001-a.txt.txt"
    bad.write_bytes(damage)
    rc, doc = sim_json(tmp_path, pins_yaml, "--builds", "b1")          # applies exactly: the ledger is not needed
    err = capsys.readouterr().err
    assert modes_of(doc)["b1"] == ("applied", "exact")
    assert "warning" in err and str(bad) in err and "resolution ledger" in err, err
    rc = main(["sim", "-c", str(pins_yaml), "--builds", "b4"])           # conflicts: the ledger is needed
    err = capsys.readouterr().err
    assert rc == 2 and str(bad) in err and "Traceback" not in err
    assert ("not UTF-8" in err) == (b"\xff" in damage)
def test_refresh_when_a_required_pin_conflicts_exits_1_with_the_truth(moved, tmp_path, capsys):
    """Trust III: `refresh --write` with no pin named said "applies exactly" and exited 0 while the required
    pin conflicted on the build."""
    _, pins_yaml, folder = moved
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    for extra in ([], ["--write"]):
        assert main(["refresh", "-c", str(pins_yaml), "--onto", "b4", *extra]) == 1
        out = capsys.readouterr().out
        assert "applies exactly" not in out, out
        assert "p (required) on b4: conflict" in out and "pinset rebase p --onto b4" in out, out
        assert "nothing written" in out
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


@pytest.mark.parametrize("verb", [["refresh"], ["rebase", "p"]])
def test_onto_a_selector_naming_two_builds_is_refused(moved, tmp_path, capsys, verb):
    """Trust III: `--onto tags:b*:2` refreshed onto one of the two silently; refused like `--onto b2,b3`."""
    _, pins_yaml, folder = moved
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    wt = ["--worktree", str(tmp_path / "wt")] if verb[0] == "rebase" else []
    for onto in ("b2,b3", "tags:b*:2"):
        assert main([*verb, "-c", str(pins_yaml), "--onto", onto, *wt]) == 2
        err = capsys.readouterr().err
        assert f"--onto {onto!r}: names 2 builds" in err and "give one" in err, err
    assert main([*verb, "-c", str(pins_yaml), "--onto", "tags:b*:1", *wt]) in (0, 1)   # one build: fine
    capsys.readouterr()
    assert not (tmp_path / "wt").exists() or verb[0] == "rebase"
    if verb[0] == "refresh":
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_one_file_pin_holding_an_mbox_of_two_commits_is_refreshed_as_its_commits(moved, tmp_path, capsys):
    """Trust III: `patches: p-series.patch` of two commits passed the dry run and failed --write (two patches made for
    one file). It is written back as one mbox of its refreshed commits; dry run and --write agree."""
    up, pins_yaml, folder = moved
    mbox = tmp_path / "patches" / "p-series.patch"
    mbox.write_bytes(b"".join(p.read_bytes() for p in sorted(folder.glob("*.patch"))))
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    pins_yaml.write_text(pins_yaml.read_text().replace("patches: patches/p ", "patches: patches/p-series.patch "))
    assert "patches/p-series.patch" in pins_yaml.read_text()
    assert main(["apply", "-c", str(pins_yaml), "--build", "b3", "--out", str(tmp_path / "before")]) == 0
    before = mbox.read_bytes()
    assert main(["refresh", "-c", str(pins_yaml), "--onto", "b3"]) == 0
    assert "3-way -> exact on b3" in capsys.readouterr().out and mbox.read_bytes() == before
    assert main(["refresh", "-c", str(pins_yaml), "--onto", "b3", "--write"]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out, out
    text = mbox.read_text()
    assert text.count("\nSubject: [PATCH") + text.startswith("Subject:") == 2 and text != before.decode()
    assert sorted(p.name for p in (tmp_path / "patches").iterdir()) == ["p-series.patch"]   # nothing left beside it
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert modes_of(doc)["b3"] == ("applied", "exact")
    assert main(["apply", "-c", str(pins_yaml), "--build", "b3", "--out", str(tmp_path / "after")]) == 0
    assert subprocess.run(["git", "diff", "--no-index", "--quiet", str(tmp_path / "before"),
                           str(tmp_path / "after")]).returncode == 0
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
@pytest.mark.parametrize("base", [True, False], ids=["base-commit", "no-base-commit"])
def test_refresh_of_a_series_whose_second_patch_needs_the_first_ones_blob(make_repo, tmp_path, capsys, base):
    """Issue 27: both patches need a 3-way merge on b2, and the second one's preimage is the blob the first
    creates, which no upstream history holds: the sim makes it (replaying the series on its base, or on the
    preimages b2's history holds) and the worktree's `git am -3` must find it too (it said "could not build
    fake ancestor")."""
    up, b1 = first_build(make_repo, {"a.txt": LINES})
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


def written_on_newer_master(make_repo, tmp_path, commits):
    """Issue 32: upstream b1 (tag) -> master (line 10 "ten", line 30 "line 30 up"); the pin `p`, `commits`
    ((message, a.txt) pairs), written on master in a clone of its own (never pushed) without base-commit.
    On b1 its patches apply only by a 3-way merge with master's blob, which b1's history lacks."""
    up = make_repo("upstream")
    up.commit("base", {"a.txt": LINES})
    up.tag("b1")
    newer = LINES.replace("line 10\n", "ten\n").replace("line 30\n", "line 30 up\n")
    up.commit("upstream change", {"a.txt": newer})
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(up.path), str(work)], check=True, capture_output=True)
    mine = type(up)(work)
    for message, change in commits:
        mine.commit(message, {"a.txt": change(newer)})
    mine.git("format-patch", "-q", "-o", str(tmp_path / "patches" / "p"), "origin/master..HEAD")
    return up, write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1]
        pins:
          - id: p
            patches: patches/p
        """)


def test_refresh_of_a_pin_written_on_newer_upstream_merges_with_its_preimage(make_repo, tmp_path, capsys):
    """The sim merges it with master's blob (as `git am -3` in a full clone); the worktree's `git am -3`
    finds that blob in the mirror too, and the refreshed series applies exactly."""
    _, pins_yaml = written_on_newer_master(make_repo, tmp_path, [
        ("change line 12", lambda text: text.replace("line 12\n", "twelve\n"))])
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert modes_of(doc) == {"b1": ("applied", "3-way")}, doc
    assert main(["refresh", "p", "-c", str(pins_yaml), "--onto", "b1", "--write"]) == 0, capsys.readouterr()
    rc, doc = sim_json(tmp_path, pins_yaml)
    assert modes_of(doc) == {"b1": ("applied", "exact")}
    text = (tmp_path / "patches" / "p").glob("*.patch").__next__().read_text()
    assert "+twelve" in text and " line 10" in text   # now made on b1's line 10
