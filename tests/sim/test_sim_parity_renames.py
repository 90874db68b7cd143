"""3-way parity where upstream moved a pin's file (issue 32): `git am -3` falls back to merging the patch's fake
ancestor with the whole tree, which follows renames; `git apply --3way` cannot. The sim answers as `git am -3`
does: the same status for every pin and the same tree, and where am fails (the file deleted, a conflict in the
moved file, a preimage lacking) it fails too.

Ground truth: `git am -3` of the pins, in order, on each build in a full clone of upstream."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.sim.run import simulate
from pinset.store import Store
from tests.testing import GIT_ENV, git_am_3, write_pins

LINES = "".join(f"line {i}\n" for i in range(1, 41))
OTHER = "".join(f"other {i}\n" for i in range(1, 41))


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=check,
                          capture_output=True, text=True)


def pins_yaml(path: Path, up, builds: list[str], pins: list[str]) -> Path:
    """pins.yaml of the named pins (each the patch folder of its name beside the file), in order."""
    return write_pins(path, f"upstream: {up.path}\nbuilds: [{', '.join(builds)}]\npins:\n"
                      + "".join(f"  - id: {pin}\n    patches: {pin}\n" for pin in pins))


def sim(cfg: Path, cache: Path, builds: list[str]):
    with simulate(load_pinset(cfg), builds, Store.open(str(cache))) as run:
        return [(b.tree, {p.id: (p.status, p.apply_mode, p.detail, p.contract.ok) for p in b.pins})
                for b in run.result.builds]


def world(make_repo, tmp_path: Path, upstream_change: dict[str, str | None]):
    """b-old: src/f.c, src/g/a.c, README. Two pins written on b-old in a clone of its own: `one` (a hunk in
    f.c and a new file beside it), `two` (two patches on a.c). b-new: upstream's change on top of b-old."""
    up = make_repo("upstream")
    up.commit("base", {"src/f.c": LINES, "src/g/a.c": OTHER, "README": "r\n"})
    up.tag("b-old")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(up.path), str(work))
    (work / "src/f.c").write_text(LINES.replace("line 12\n", "twelve\n"))
    (work / "src/new.c").write_text("new\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "one")
    git(work, "format-patch", "-q", "-o", str(tmp_path / "one"), "HEAD~1..HEAD")
    (work / "src/g/a.c").write_text(OTHER.replace("other 5\n", "five\n"))
    git(work, "commit", "-q", "-am", "two: first")
    (work / "src/g/a.c").write_text(OTHER.replace("other 5\n", "five\n").replace("other 30\n", "thirty\n"))
    git(work, "commit", "-q", "-am", "two: second")
    git(work, "format-patch", "-q", "-o", str(tmp_path / "two"), "HEAD~2..HEAD")
    for path, text in upstream_change.items():
        if text is None:
            up.git("rm", "-q", path)
        elif text.startswith("mv "):
            (up.path / text[3:]).parent.mkdir(parents=True, exist_ok=True)
            up.git("mv", path, text[3:])
        else:
            up.write(path, text)
            up.git("add", path)
    up.git("commit", "-q", "-m", "upstream moves things")
    up.tag("b-new")
    cfg = pins_yaml(tmp_path / "pins.yaml", up, ["b-old", "b-new"], ["one", "two"])
    return up, cfg, [("one", tmp_path / "one"), ("two", tmp_path / "two")]


CASES = {
    # f.c renamed: `one` follows it (its new file still lands in src/); a.c's folder renamed: `two` follows it
    "renamed": ({"src/f.c": "mv src/h.c", "src/g/a.c": "mv lib/a.c"}, {"one": "applied", "two": "applied"}),
    # renamed and changed where the pin's hunk is: the merge conflicts in the moved file
    "renamed and changed": ({"src/f.c": "mv src/h.c", "src/h.c": LINES.replace("line 12\n", "12\n")},
                            {"one": "conflict", "two": "applied"}),
    # deleted, nothing like it elsewhere: am's merge is a modify/delete conflict
    "deleted": ({"src/f.c": None}, {"one": "conflict", "two": "applied"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pin_whose_file_upstream_moved_gets_git_am_3s_answer(make_repo, tmp_path, case):
    change, expected = CASES[case]
    if case == "renamed and changed":   # the move first, then the change of the moved file
        change = {"src/f.c": "mv src/h.c"}
    up, cfg, pins = world(make_repo, tmp_path, change)
    if case == "renamed and changed":
        up.commit("change the moved file", {"src/h.c": LINES.replace("line 12\n", "12\n")})
        up.git("tag", "-f", "b-new")
    truth, tree = git_am_3(up.path, tmp_path / "clone", "b-new", pins)
    assert truth == expected   # the comparison has teeth: am follows a rename, and fails where it must
    [(old_tree, old), (new_tree, new)] = sim(cfg, tmp_path / "cache", ["b-old", "b-new"])
    assert {pin: got[0] for pin, got in new.items()} == truth, new
    assert new_tree == tree
    assert all(got[3] for got in new.values() if got[0] == "applied"), new   # contracts read the moved files
    if case == "renamed and changed":   # the conflict names where the file went
        assert "upstream moved src/f.c to src/h.c: git am -3's merge there conflicts" in new["one"][2], new
    if case == "renamed":
        assert new["one"][1] == new["two"][1] == "3-way"
        assert "src/f.c -> src/h.c" in new["one"][2] and "src/g/a.c -> lib/a.c" in new["two"][2]
    # b-old has every file: no fallback, the same as before
    assert {pin: got[:2] for pin, got in old.items()} == {"one": ("applied", "exact"), "two": ("applied", "exact")}
    # a second run (the build memo) and a fresh cache answer the same
    assert sim(cfg, tmp_path / "cache", ["b-old", "b-new"]) == sim(cfg, tmp_path / "fresh", ["b-old", "b-new"])


def test_apply_writes_am_3s_tree_and_attribution_probes_follow_the_rename(make_repo, tmp_path, capsys):
    """`pinset apply` of a build where upstream renamed the pin's files writes the tree `git am -3` makes;
    `pinset sim --json` says where each went."""
    up, cfg, pins = world(make_repo, tmp_path, CASES["renamed"][0])
    git_am_3(up.path, tmp_path / "clone", "b-new", pins)
    out = tmp_path / "tree"
    assert main(["apply", "-c", str(cfg), "--build", "b-new", "--out", str(out)]) == 0, capsys.readouterr()
    for path in ("src/h.c", "lib/a.c", "src/new.c"):
        assert (out / path).read_text() == (tmp_path / "clone" / path).read_text(), path
    assert not (out / "src/f.c").exists() and "twelve\n" in (out / "src/h.c").read_text()
    result = tmp_path / "sim.json"
    assert main(["sim", "-c", str(cfg), "--json", str(result)]) == 0, capsys.readouterr()
    doc = json.loads(result.read_text())
    new = {p["id"]: p for p in doc["builds"][1]["pins"]}
    assert new["one"]["status"] == "applied" and "src/f.c -> src/h.c" in new["one"]["detail"]


def test_a_preimage_lacking_fails_as_git_am_3_fails(make_repo, tmp_path):
    """am's merge needs every preimage the patch names (its fake ancestor): a pin written on a commit upstream
    never had fails on the build where its file moved, as `git am -3` fails there ("could not build fake
    ancestor"), even though the mirror is handed the pin's other blobs."""
    up, cfg, pins = world(make_repo, tmp_path, CASES["renamed"][0])
    work = tmp_path / "work"
    git(work, "checkout", "-q", "-b", "private", "b-old")
    (work / "src/f.c").write_text(LINES.replace("line 1\n", "one\n"))
    git(work, "commit", "-q", "-am", "a change upstream never had")
    (work / "src/f.c").write_text(LINES.replace("line 1\n", "one\n").replace("line 12\n", "twelve\n"))
    git(work, "commit", "-q", "-am", "the pin")
    git(work, "format-patch", "-q", "-o", str(tmp_path / "private"), "HEAD~1..HEAD")
    only = pins_yaml(tmp_path / "private.yaml", up, ["b-new"], ["private"])
    truth, tree = git_am_3(up.path, tmp_path / "clone", "b-new", [("private", tmp_path / "private")])
    assert truth == {"private": "conflict"}
    [(got_tree, got)] = sim(only, tmp_path / "cache", ["b-new"])
    assert got["private"][0] == "conflict" and got_tree == tree


def test_refresh_fits_the_moved_pins_to_the_build_and_they_then_apply_exactly(make_repo, tmp_path, capsys):
    """A pin merged into upstream's renamed file needs a refresh (3-way): `pinset refresh --write` replays it
    with `git am -3` on the build, which follows the rename as the sim did; the new series applies exactly
    there and gives the same tree."""
    up, cfg, pins = world(make_repo, tmp_path, CASES["renamed"][0])
    [(_, _), (before, _)] = sim(cfg, tmp_path / "cache", ["b-old", "b-new"])
    assert main(["refresh", "-c", str(cfg), "--onto", "b-new", "--write"]) == 0, capsys.readouterr()
    assert "src/h.c" in "".join(p.read_text() for p in (tmp_path / "one").glob("*.patch"))
    [(after, pins_after)] = sim(cfg, tmp_path / "cache", ["b-new"])
    assert after == before
    assert {pin: got[:2] for pin, got in pins_after.items()} == {"one": ("applied", "exact"), "two": ("applied", "exact")}


def test_a_merged_blob_the_mirror_already_has_is_readable_by_the_later_pins(make_repo, tmp_path):
    """The merge into a moved file gives content another build of the run already has (upstream landed the same
    change later), and a later pin changes that file: on both builds the statuses and trees of `git am -3`
    (the merged blob stays readable by the later pin's apply, and the apply memo's answers carry over)."""
    up, cfg, _ = world(make_repo, tmp_path, {"src/f.c": "mv src/h.c"})
    landed = LINES.replace("line 12\n", "twelve\n")
    up.commit("upstream lands the change", {"src/h.c": landed})
    up.tag("b-landed")
    work = tmp_path / "work"
    git(work, "fetch", "-q", "origin", "--tags")
    git(work, "checkout", "-q", "-B", "three", "b-new")
    (work / "src/h.c").write_text(LINES.replace("line 30\n", "thirty\n"))
    git(work, "commit", "-q", "-am", "three")
    git(work, "format-patch", "-q", "-o", str(tmp_path / "three"), "HEAD~1..HEAD")
    cfg = pins_yaml(tmp_path / "three.yaml", up, ["b-landed", "b-new"], ["one", "three"])
    pins = [("one", tmp_path / "one"), ("three", tmp_path / "three")]
    results = sim(cfg, tmp_path / "cache", ["b-landed", "b-new"])
    for build, (got_tree, got) in zip(["b-landed", "b-new"], results):
        truth, tree = git_am_3(up.path, tmp_path / f"clone-{build}", build, pins)
        assert truth == {"one": "applied", "three": "applied"}
        assert {pin: status for pin, (status, *_) in got.items()} == truth, (build, got)
        assert got_tree == tree, build


def _upstream_moving(make_repo, tmp_path: Path, files: dict[str, str], moves: list[tuple[str, str]],
                     then: dict[str, str] | None = None):
    """b-old with `files`; b-new: `moves` (git mv), then `then` written; a clone of b-old to write pins in."""
    up = make_repo("upstream")
    up.commit("base", files)
    up.tag("b-old")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(up.path), str(work))
    for old, new in moves:
        (up.path / new).parent.mkdir(parents=True, exist_ok=True)
        up.git("mv", old, new)
    up.commit("upstream moves things", then or {})
    up.tag("b-new")
    return up, work


def _pin(work: Path, out: Path, message: str, edit) -> None:
    edit(work)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    git(work, "format-patch", "-q", "-o", str(out), "HEAD~1..HEAD")


def test_a_moved_file_beside_a_mode_change_builds_ams_fake_ancestor_from_the_index(make_repo, tmp_path):
    """A patch that edits a file upstream moved and only changes the mode of another: `git am -3` takes that
    entry's blob from the index for its fake ancestor (it has no `index` line to name one) and applies."""
    up, work = _upstream_moving(make_repo, tmp_path, {"src/f.c": LINES, "tools/g.sh": "echo hi\n"},
                                [("src/f.c", "src/h.c")])

    def edit(tree: Path) -> None:
        (tree / "src/f.c").write_text(LINES.replace("line 12\n", "twelve\n"))
        (tree / "tools/g.sh").chmod(0o755)
    _pin(work, tmp_path / "m", "edit and chmod", edit)
    cfg = pins_yaml(tmp_path / "pins.yaml", up, ["b-new"], ["m"])
    truth, tree = git_am_3(up.path, tmp_path / "clone", "b-new", [("m", tmp_path / "m")])
    assert truth == {"m": "applied"}
    [(got_tree, got)] = sim(cfg, tmp_path / "cache", ["b-new"])
    assert got["m"][0] == "applied" and got_tree == tree, got


def test_a_pin_deleting_a_file_upstream_moved_is_a_conflict_not_retired(make_repo, tmp_path):
    """Upstream renamed the file a pin deletes: `git am -3`'s merge is a rename/delete conflict. Not `upstream`
    (the file is still there, at its new path)."""
    up, work = _upstream_moving(make_repo, tmp_path, {"src/f.c": LINES, "README": "r\n"}, [("src/f.c", "src/h.c")])
    _pin(work, tmp_path / "d", "delete f.c", lambda tree: (tree / "src/f.c").unlink())
    cfg = pins_yaml(tmp_path / "pins.yaml", up, ["b-new"], ["d"])
    truth, _ = git_am_3(up.path, tmp_path / "clone", "b-new", [("d", tmp_path / "d")])
    assert truth == {"d": "conflict"}
    [(_, got)] = sim(cfg, tmp_path / "cache", ["b-new"])
    assert got["d"][0] == "conflict", got


def test_the_memo_of_a_whole_tree_merge_knows_the_paths_an_earlier_pin_deleted(make_repo, tmp_path):
    """Upstream moved and changed the file pin P edits; pin X deletes it at its new path. With X first, am's
    merge for P is a modify/delete conflict; without X it merges. A run of P alone on the same cache first
    (the same tree, the same entries on P's paths) must not lend its answer to the run of X then P."""
    up, work = _upstream_moving(make_repo, tmp_path, {"src/f.c": LINES}, [("src/f.c", "lib/h.c")],
                                {"lib/h.c": LINES.replace("line 35\n", "x35\n")})
    _pin(work, tmp_path / "p", "p", lambda tree: (tree / "src/f.c").write_text(LINES.replace("line 12\n", "twelve\n")))
    git(work, "fetch", "-q", "origin", "--tags")
    git(work, "checkout", "-q", "--detach", "b-new")
    _pin(work, tmp_path / "x", "x deletes h.c", lambda tree: (tree / "lib/h.c").unlink())
    pins = [("x", tmp_path / "x"), ("p", tmp_path / "p")]
    truth, tree = git_am_3(up.path, tmp_path / "clone", "b-new", pins)
    assert truth == {"x": "applied", "p": "conflict"}
    sim(pins_yaml(tmp_path / "p.yaml", up, ["b-new"], ["p"]), tmp_path / "cache", ["b-new"])
    both = pins_yaml(tmp_path / "xp.yaml", up, ["b-new"], ["x", "p"])
    [(got_tree, got)] = sim(both, tmp_path / "cache", ["b-new"])
    assert {pin: status for pin, (status, *_) in got.items()} == truth, got
    assert got_tree == tree


def test_a_later_pin_that_undoes_a_moved_pins_lines_is_named_in_its_contract(make_repo, tmp_path):
    """`one` lands in src/h.c (upstream moved src/f.c there); `undo`, written on b-new with `one`, rewrites
    the line `one` added: one's contract is broken there, and the pin that touched the moved file later is named."""
    up, work = _upstream_moving(make_repo, tmp_path, {"src/f.c": LINES}, [("src/f.c", "src/h.c")])
    _pin(work, tmp_path / "one", "one", lambda tree: (tree / "src/f.c").write_text(LINES.replace("line 12\n", "twelve\n")))
    git(work, "fetch", "-q", "origin", "--tags")
    git(work, "checkout", "-q", "--detach", "b-new")
    (work / "src/h.c").write_text(LINES.replace("line 12\n", "twelve\n"))   # b-new with `one`, as the sim makes it
    git(work, "commit", "-q", "-am", "one on b-new")
    _pin(work, tmp_path / "undo", "undo", lambda tree: (tree / "src/h.c").write_text(
        LINES.replace("line 12\n", "12 again\n")))
    cfg = pins_yaml(tmp_path / "pins.yaml", up, ["b-new"], ["one", "undo"])
    [(_, got)] = sim(cfg, tmp_path / "cache", ["b-new"])
    assert got["one"][0] == "applied" and got["one"][3] is False, got
    with simulate(load_pinset(cfg), ["b-new"], Store.open(str(tmp_path / "cache"))) as run:
        problems = next(p for p in run.result.builds[0].pins if p.id == "one").contract.problems
    assert any("touched later by: undo" in problem for problem in problems), problems
