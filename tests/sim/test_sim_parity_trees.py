"""3-way parity on trees git refuses, and git's own tests of 3-way application rebuilt as pins (issue 40).

Ground truth: `git am -3` of each pin's patch folder, in order, on the build in a full clone of upstream
(tests.testing.git_am_3): every pin's status and the final tree. The scenarios follow git's tests of 3-way
application (git/git t4108-apply-threeway, t4150-am, t4131-apply-fake-ancestor, t4151-am-abort,
t4253-am-keep-cr-dos, t4255-am-submodule: their setups rebuilt as pins on small upstreams, read not copied)
and the trees a careful user meets: a file where a pin needs a folder and the reverse, merge attributes in
upstream's `.gitattributes` or a pin's, a preimage the build holds at another path, a patch whose fake
ancestor lacks one preimage, a file deleted and added anew.

Each scenario builds upstream (tag `b1` is the build) and the pins' patch folders, and names the status
`git am -3` gives each pin: the comparison has teeth (a git that answers otherwise fails the test first).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pinset.config.schema import load_pinset
from pinset.sim.run import simulate
from pinset.store import Store
from tests.testing import GIT_ENV, GitRepo, git_am_3, write_pins

LINES = "".join(f"line {i}\n" for i in range(1, 31))
TEN = LINES.replace("line 10\n", "ten\n")                 # upstream's change near the pin's hunk
PIN12 = LINES.replace("line 12\n", "twelve\n")           # the pin's change, written on LINES
OTHER = "".join(f"other {i}\n" for i in range(1, 31))


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=check,
                          capture_output=True, text=True)


class World:
    """Upstream (its history: `base`, then the build `b1`) and the pins' patch folders beside it."""

    def __init__(self, make_repo, tmp_path: Path):
        self.tmp = tmp_path
        self.up: GitRepo = make_repo("upstream")
        self.pins: list[str] = []

    def clone(self, name: str, at: str = "base") -> Path:
        """A clone of upstream at `at` where a pin's author works (its commits never reach upstream)."""
        work = self.tmp / f"work-{name}"
        git(self.tmp, "clone", "-q", str(self.up.path), str(work))
        git(work, "checkout", "-q", "--detach", at)
        return work

    def pin(self, name: str, commits: list[dict[str, str | None]], at: str = "base", before: dict | None = None,
            *format_patch: str) -> Path:
        """The pin `name`: `commits` (path -> text, None deletes) on `at` in a clone, exported by format-patch;
        `before`: a commit of the author's own first (not exported: the pin is written on a tree upstream
        never had)."""
        work = self.clone(name, at)
        for files in ([before] if before else []) + commits:
            for path, text in files.items():
                target = work / path
                if text is None:
                    git(work, "rm", "-q", "-r", path)
                    continue
                if target.is_dir():
                    git(work, "rm", "-q", "-r", path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(text.encode()) if isinstance(text, str) else target.write_bytes(text)
                git(work, "add", path)
            git(work, "commit", "-q", "--allow-empty", "-m", f"{name} {len(commits)}")
        out = self.tmp / name
        git(work, "format-patch", "-q", *format_patch, "-o", str(out), f"HEAD~{len(commits)}..HEAD")
        self.pins.append(name)
        return out

    def raw_pin(self, name: str, text: str) -> Path:
        """The pin `name` as one patch file of exactly `text`."""
        out = self.tmp / name
        out.mkdir()
        (out / "0001-pin.patch").write_text(text)
        self.pins.append(name)
        return out

    def commit(self, message: str, files: dict[str, str | None], tag: str | None = None) -> str:
        for path, text in files.items():
            if text is not None and (self.up.path / path).is_dir():
                self.up.git("rm", "-q", "-r", path)
        oid = self.up.commit(message, files)
        if tag:
            self.up.tag(tag)
        return oid

    def truth(self) -> tuple[dict[str, str], str]:
        return git_am_3(self.up.path, self.tmp / "clone", "b1", [(name, self.tmp / name) for name in self.pins])

    def sim(self, cache: str = "cache"):
        cfg = write_pins(self.tmp / "pins.yaml", f"upstream: {self.up.path}\nbuilds: [b1]\npins:\n"
                         + "".join(f"  - id: {pin}\n    patches: {pin}\n" for pin in self.pins))
        with simulate(load_pinset(cfg), ["b1"], Store.open(str(self.tmp / cache))) as run:
            [build] = run.result.builds
            return build.tree, {p.id: p for p in build.pins}


SCENARIOS: dict[str, Callable[[World], dict[str, str]]] = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


# --- a file where a pin needs a folder, a folder where it needs a file --------------------------------------

@scenario
def file_where_the_pin_needs_a_folder(w: World) -> dict[str, str]:
    """Upstream adds the file src/new; the pin (written before) creates src/new/x.txt."""
    w.commit("base", {"src/f.c": LINES}, tag="base")
    w.pin("p", [{"src/new/x.txt": "x\n"}])
    w.commit("upstream adds a file", {"src/new": "a file\n"}, tag="b1")
    return {"p": "conflict"}


@scenario
def folder_where_the_pin_needs_a_file(w: World) -> dict[str, str]:
    """Upstream adds src/new/y.txt; the pin creates the file src/new (and changes f.c: a later pin is fine)."""
    w.commit("base", {"src/f.c": LINES}, tag="base")
    w.pin("p", [{"src/new": "a file\n", "src/f.c": PIN12}])
    w.pin("q", [{"src/g.c": OTHER}])
    w.commit("upstream adds a folder", {"src/new/y.txt": "y\n"}, tag="b1")
    return {"p": "conflict", "q": "applied"}


@scenario
def an_earlier_pins_file_where_a_later_pin_needs_a_folder(w: World) -> dict[str, str]:
    w.commit("base", {"src/f.c": LINES}, tag="base")
    w.pin("p", [{"src/new": "a file\n"}])
    w.pin("q", [{"src/new/x.txt": "x\n"}])
    w.commit("build", {"README": "r\n"}, tag="b1")
    return {"p": "applied", "q": "conflict"}


@scenario
def a_pin_replacing_a_file_by_a_folder(w: World) -> dict[str, str]:
    """Deleting the file src/new and creating src/new/x.txt in one patch is fine (git applies deletions first)."""
    w.commit("base", {"src/f.c": LINES, "src/new": "a file\n"}, tag="base")
    w.pin("p", [{"src/new": None, "src/new/x.txt": "x\n"}])
    w.commit("build", {"README": "r\n"}, tag="b1")
    return {"p": "applied"}


# --- merge attributes --------------------------------------------------------------------------------------

def _attributes(w: World, attributes: dict[str, str], build_line12: str | None = None) -> None:
    """base: f.c; the pin changes line 12 (written on base); the build changes line 10 (or line 12 itself),
    so the pin needs a 3-way merge; `attributes` (path -> text) are upstream's, in the base already."""
    w.commit("base", {"src/f.c": LINES, **attributes}, tag="base")
    w.pin("p", [{"src/f.c": PIN12}])
    w.commit("build", {"src/f.c": LINES.replace("line 12\n", build_line12) if build_line12 else TEN}, tag="b1")


@scenario
def merge_unset_in_upstreams_attributes(w: World) -> dict[str, str]:
    _attributes(w, {".gitattributes": "*.c -merge\n"})
    return {"p": "conflict"}


@scenario
def merge_binary_in_upstreams_attributes_of_a_folder(w: World) -> dict[str, str]:
    _attributes(w, {"src/.gitattributes": "f.c merge=binary\n"})
    return {"p": "conflict"}


@scenario
def merge_union_in_upstreams_attributes(w: World) -> dict[str, str]:
    _attributes(w, {".gitattributes": "*.c merge=union\n"}, build_line12="upstream twelve\n")
    return {"p": "applied"}


@scenario
def text_unset_in_upstreams_attributes(w: World) -> dict[str, str]:
    _attributes(w, {".gitattributes": "*.c -text\n"})
    return {"p": "applied"}


@scenario
def merge_unset_on_a_file_upstream_moved(w: World) -> dict[str, str]:
    """am's own merge into the whole tree (the pin's file renamed upstream) reads the attributes too."""
    w.commit("base", {"src/f.c": LINES, ".gitattributes": "*.c -merge\n"}, tag="base")
    w.pin("p", [{"src/f.c": PIN12}])
    w.up.git("mv", "src/f.c", "src/h.c")
    w.commit("build", {"src/h.c": TEN}, tag="b1")
    return {"p": "conflict"}


@scenario
def merge_unset_in_an_earlier_pins_attributes_on_a_file_upstream_moved(w: World) -> dict[str, str]:
    w.commit("base", {"src/f.c": LINES}, tag="base")
    w.pin("attrs", [{"src/.gitattributes": "*.c -merge\n"}])
    w.pin("p", [{"src/f.c": PIN12}])
    w.up.git("mv", "src/f.c", "src/h.c")
    w.commit("build", {"src/h.c": TEN}, tag="b1")
    return {"attrs": "applied", "p": "conflict"}


@scenario
def merge_unset_in_an_earlier_pins_attributes(w: World) -> dict[str, str]:
    w.commit("base", {"src/f.c": LINES}, tag="base")
    w.pin("attrs", [{".gitattributes": "*.c -merge\n"}])
    w.pin("p", [{"src/f.c": PIN12}])
    w.commit("build", {"src/f.c": TEN}, tag="b1")
    return {"attrs": "applied", "p": "conflict"}


# --- preimages: where am finds them, and that it needs every one ------------------------------------------

@scenario
def a_preimage_the_build_holds_at_another_path(w: World) -> dict[str, str]:
    """The pin is written on the author's own f.c (TEN), which upstream never had at src/f.c but has at
    lib/g.c: `git am -3` finds the preimage by its id and merges."""
    w.commit("base", {"src/f.c": LINES, "lib/g.c": TEN}, tag="base")
    w.pin("p", [{"src/f.c": TEN.replace("line 12\n", "twelve\n")}], before={"src/f.c": TEN})
    w.commit("build", {"README": "r\n"}, tag="b1")
    return {"p": "applied"}


@scenario
def a_fake_ancestor_lacking_one_preimage(w: World) -> dict[str, str]:
    """One patch changes f.c (a 3-way merge is needed: upstream changed line 10; its preimage is upstream's)
    and g.c (applies as it is, but its preimage is the author's own): `git am -3` cannot build the fake
    ancestor, so the patch fails, though `git apply --3way` merges file by file."""
    w.commit("base", {"src/f.c": LINES, "src/g.c": OTHER}, tag="base")
    own = OTHER.replace("other 30\n", "thirty\n")
    w.pin("p", [{"src/f.c": PIN12, "src/g.c": own.replace("other 5\n", "five\n")}], before={"src/g.c": own})
    w.commit("build", {"src/f.c": TEN, "src/g.c": OTHER.replace("other 30\n", "30\n")}, tag="b1")
    return {"p": "conflict"}


@scenario
def a_later_patch_whose_preimage_only_the_authors_tree_had(w: World) -> dict[str, str]:
    """Patch 1 applies as it is on the build (whose f.c differs at line 30); patch 2 needs a 3-way merge
    (upstream changed line 20's neighbour) with the blob patch 1 made on the author's tree: `git am -3`
    never has it (patch 1 made another blob on the build)."""
    w.commit("base", {"src/f.c": LINES}, tag="base")
    one = PIN12
    two = one.replace("line 24\n", "twenty-four\n")
    w.pin("p", [{"src/f.c": one}, {"src/f.c": two}])
    w.commit("build", {"src/f.c": LINES.replace("line 22\n", "22\n").replace("line 30\n", "30\n")}, tag="b1")
    return {"p": "conflict"}


# --- deletions and re-additions -----------------------------------------------------------------------------

@scenario
def a_pin_deleting_a_file_and_adding_it_anew(w: World) -> dict[str, str]:
    w.commit("base", {"src/f.c": LINES, "src/old.c": OTHER}, tag="base")
    w.pin("p", [{"src/old.c": None}, {"src/old.c": "new content\n"}])
    w.commit("build", {"README": "r\n"}, tag="b1")
    return {"p": "applied"}


@scenario
def delete_then_new_in_one_patch(w: World) -> dict[str, str]:
    """t4108 "apply delete then new patch with 3way": one patch deleting a file, then creating it again."""
    w.commit("base", {"src/f.c": LINES, "delnew": "1\n"}, tag="base")
    w.commit("build", {"README": "r\n"}, tag="b1")
    one = w.up.git("rev-parse", "b1:delnew").strip()
    text = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: t <t@example.com>\nSubject: [PATCH] delete then new\n\n---\n"
        f"diff --git a/delnew b/delnew\ndeleted file mode 100644\nindex {one[:7]}..0000000\n"
        "--- a/delnew\n+++ /dev/null\n@@ -1 +0,0 @@\n-1\n"
        "diff --git a/delnew b/delnew\nnew file mode 100644\nindex 0000000..0cfbf08\n"
        "--- /dev/null\n+++ b/delnew\n@@ -0,0 +1 @@\n+2\n--\n2.39.5\n")
    w.raw_pin("p", text)
    return {"p": "applied"}


# --- git's tests of 3-way application --------------------------------------------------------------------

@scenario
def add_add_conflict(w: World) -> dict[str, str]:
    """t4108 "apply -3 with add/add conflict": the pin adds files the build added otherwise."""
    w.commit("base", {"src/f.c": LINES}, tag="base")
    w.pin("p", [{"three": "1\n2\n3\n4\n5\n6\n7\n", "four": "1\n2\n3\nfour\n5\n6\n7\n"}])
    w.commit("build", {"three": "1\n2\n3\n4\n5\n6\n7\n", "four": "1\n2\n3\n4\n5\n6\n7\n"}, tag="b1")
    return {"p": "conflict"}


@scenario
def ambiguous_repeating_file(w: World) -> dict[str, str]:
    """t4108 "apply -3 with ambiguous repeating file"."""
    lines = "1\n2\n1\n2\n1\n2\n1\n2\n1\n2\n1\n"
    w.commit("base", {"one_two_repeat": lines}, tag="base")
    w.pin("p", [{"one_two_repeat": "1\n2\n1\n2\n1\n2\n1\n2\none\n2\n1\n"}])
    w.commit("build", {"one_two_repeat": "1\n2\n1\n2\n1\n2\none\n2\n1\n2\none\n"}, tag="b1")
    return {"p": "applied"}


@scenario
def three_way_and_a_rename(w: World) -> dict[str, str]:
    """t4150 "am -3 can rename a file after falling back to 3-way merge"."""
    w.commit("base", {"src/f.c": LINES}, tag="base")
    w.pin("p", [{"src/f.c": None, "src/h.c": PIN12}])
    w.commit("build", {"src/f.c": TEN}, tag="b1")
    return {"p": "applied"}


@scenario
def a_series_stopping_at_a_patch_that_does_not_apply(w: World) -> dict[str, str]:
    """t4151: am stops at the patch that fails; the next pin goes on from the tree before the failed pin."""
    w.commit("base", {"src/f.c": LINES, "otherfile": "o\n"}, tag="base")
    w.pin("p", [{"otherfile-4": "4\n"}, {"src/f.c": LINES.replace("line 12\n", "pin\n")}])
    w.pin("q", [{"otherfile": "o\nq\n"}])
    w.commit("build", {"src/f.c": LINES.replace("line 12\n", "upstream\n")}, tag="b1")
    return {"p": "conflict", "q": "applied"}


@scenario
def binary_change_with_full_index_lines(w: World) -> dict[str, str]:
    """t4108 "apply full-index patch with 3way": "Binary files ... differ" with full `index` ids applies where
    the repository holds the postimage (here a tag of upstream's has it)."""
    w.commit("base", {"src/f.c": LINES, "bin.dat": "a\0b\n"}, tag="base")
    w.commit("build", {"README": "r\n"}, tag="b1")
    w.up.git("checkout", "-q", "-b", "side")
    w.commit("side", {"bin.dat": "a\0c\n"}, tag="t-side")
    w.up.git("checkout", "-q", "master")
    old, new = (w.up.git("rev-parse", f"{rev}:bin.dat").strip() for rev in ("b1", "t-side"))
    w.raw_pin("p", "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
              "From: t <t@example.com>\nSubject: [PATCH] binary\n\n---\n"
              f"diff --git a/bin.dat b/bin.dat\nindex {old}..{new} 100644\n"
              "Binary files a/bin.dat and b/bin.dat differ\n--\n2.39.5\n")
    return {"p": "applied"}


@scenario
def a_pin_adding_a_submodule(w: World) -> dict[str, str]:
    """t4255-am-submodule: a patch that adds a gitlink applies (the submodule's commit need not be there)."""
    w.commit("base", {"src/f.c": LINES}, tag="base")
    w.commit("build", {"README": "r\n"}, tag="b1")
    w.raw_pin("p", "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
              "From: t <t@example.com>\nSubject: [PATCH] submodule\n\n---\n"
              "diff --git a/sub b/sub\nnew file mode 160000\nindex 0000000..1234567\n--- /dev/null\n+++ b/sub\n"
              "@@ -0,0 +1 @@\n+Subproject commit 1234567890123456789012345678901234567890\n--\n2.39.5\n")
    return {"p": "applied"}


@scenario
def dos_files(w: World) -> dict[str, str]:
    """t4253-am-keep-cr-dos: a file of CRLF lines changed by the pin, the build changed elsewhere."""
    crlf = LINES.replace("\n", "\r\n")
    w.commit("base", {"file": crlf}, tag="base")
    w.pin("p", [{"file": crlf.replace("line 12\r\n", "twelve\r\n")}])
    w.commit("build", {"file": crlf.replace("line 10\r\n", "ten\r\n")}, tag="b1")
    return {"p": "conflict"}   # am strips the CRs of the patch's lines (mailsplit) unless --keep-cr


# Where pinset deliberately does more than `git am -3` (README "How `pinset sim` decides"): its answer.
DELIBERATE = {
    # a CRLF file's own CRs in a patch of LF lines are kept, as `git am --keep-cr` (plain am strips them)
    "dos_files": {"p": "applied"},
    # a series' later patch gets the preimage its earlier patch made on the author's tree (replayed)
    "a_later_patch_whose_preimage_only_the_authors_tree_had": {"p": "applied"},
    # a pin adding or changing a submodule is an error of the pin (pinset cannot build a submodule commit)
    "a_pin_adding_a_submodule": {"p": "error"},
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_gets_git_am_3s_answer(make_repo, tmp_path, name):
    w = World(make_repo, tmp_path)
    expected = SCENARIOS[name](w)
    truth, tree = w.truth()
    assert truth == expected, f"git am -3 answers {truth}"   # the comparison has teeth
    got_tree, pins = w.sim()
    assert {pin: p.status for pin, p in pins.items()} == DELIBERATE.get(name, truth), \
        {p.id: (p.status, p.detail) for p in pins.values()}
    if name not in DELIBERATE:
        assert got_tree == tree
    # a pin git am -3 applies keeps its contract (nothing of it lost on this tree)
    assert all(p.contract.ok for p in pins.values() if p.status == "applied"), \
        {p.id: p.contract.problems for p in pins.values()}


def test_apply_never_writes_a_tree_without_upstreams_file(make_repo, tmp_path, capsys):
    """`pinset apply` of a build where an optional pin needs a folder at upstream's file: the tree written has
    upstream's file (and not the pin's), as `git am -3` leaves it; a required pin makes apply refuse."""
    from pinset.cli import main

    w = World(make_repo, tmp_path)
    SCENARIOS["file_where_the_pin_needs_a_folder"](w)
    _, tree = w.truth()
    cfg = write_pins(tmp_path / "optional.yaml", f"upstream: {w.up.path}\nbuilds: [b1]\npins:\n"
                     "  - id: p\n    patches: p\n    required: false\n")
    out = tmp_path / "tree"
    assert main(["apply", "-c", str(cfg), "--build", "b1", "--out", str(out)]) == 0, capsys.readouterr()
    assert (out / "src/new").read_text() == "a file\n" and (out / "src/f.c").is_file()
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == \
        sorted(git(tmp_path / "clone", "ls-tree", "-r", "--name-only", tree).stdout.split())
    required = write_pins(tmp_path / "required.yaml", f"upstream: {w.up.path}\nbuilds: [b1]\npins:\n"
                          "  - id: p\n    patches: p\n")
    assert main(["apply", "-c", str(required), "--build", "b1", "--out", str(tmp_path / "refused")]) == 1
    assert not (tmp_path / "refused").exists()


def test_where_pinset_does_more_refresh_writes_a_series_plain_git_am_3_applies(make_repo, tmp_path, monkeypatch,
                                                                                capsys):
    """The replayed series (DELIBERATE): sim applies the pin where plain `git am -3` conflicts; `pinset refresh
    --write` then writes a series that plain `git am -3` applies on that build in a full clone, to sim's tree."""
    from pinset.cli import main

    w = World(make_repo, tmp_path)
    SCENARIOS["a_later_patch_whose_preimage_only_the_authors_tree_had"](w)
    assert w.truth()[0] == {"p": "conflict"}
    tree, pins = w.sim()
    assert pins["p"].status == "applied"
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "cache"))
    assert main(["refresh", "p", "-c", str(tmp_path / "pins.yaml"), "--onto", "b1", "--write"]) == 0, \
        capsys.readouterr()
    again, am_tree = git_am_3(w.up.path, tmp_path / "clone-after", "b1", [("p", tmp_path / "p")])
    assert again == {"p": "applied"} and am_tree == tree
