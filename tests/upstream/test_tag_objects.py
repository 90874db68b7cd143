"""Upstream tags that point at trees or blobs (issue #20 §4): selectors skip them with a note, a build named
as one is bad input in one line. Real git repositories."""

from __future__ import annotations

import json

import pytest

from pinset.cli import main
from tests.testing import write_pins


@pytest.fixture
def upstream(make_repo):
    """b1, b2: commits; b3tree: a lightweight tag of a tree; b4blob: an annotated tag of a blob;
    b5nest: an annotated tag of an annotated tag of a tree; b6ann: an annotated tag of b2."""
    up = make_repo("upstream")
    up.commit("one", {"src/a.c": "int a(void) { return 1; }\n"})
    up.tag("b1")
    up.commit("two", {"src/a.c": "int a(void) { return 2; }\n"})
    up.tag("b2")
    up.git("tag", "b3tree", up.git("rev-parse", "HEAD^{tree}").strip())
    up.git("tag", "-a", "-m", "a blob", "b4blob", up.git("rev-parse", "HEAD:src/a.c").strip())
    up.git("tag", "-a", "-m", "inner", "inner-tree", up.git("rev-parse", "HEAD^{tree}").strip())
    up.git("-c", "advice.nestedTag=false", "tag", "-a", "-m", "outer", "b5nest", "inner-tree")
    up.git("tag", "-a", "-m", "release", "b6ann", "HEAD")
    return up


def pins_yaml(tmp_path, up, builds: str):
    patch = tmp_path / "patches"
    patch.mkdir(exist_ok=True)
    (patch / "0001-x.patch").write_text("diff --git a/src/b.c b/src/b.c\nnew file mode 100644\n--- /dev/null\n"
                                         "+++ b/src/b.c\n@@ -0,0 +1 @@\n+int b_function_of_the_pin(void) { return 3; }\n")
    return write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: {builds}\npins:\n"
                                              f"  - id: x\n    patches: {patch}\n")


def test_selector_skips_tags_of_trees_and_blobs_with_a_note(upstream, tmp_path, capsys):
    out = tmp_path / "sim.json"
    code = main(["sim", "-c", str(pins_yaml(tmp_path, upstream, "['tags:b*:9']")), "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    builds = [b["build"] for b in json.loads(out.read_text())["builds"]]
    assert builds[0] == "b1" and sorted(builds[1:]) == ["b2", "b6ann"]   # b2 and b6ann: the same commit
    for name, kind in (("b3tree", "tree"), ("b4blob", "blob"), ("b5nest", "tree")):
        assert f"tag {name} skipped (it points at a {kind}, not a commit)" in err
    assert "Traceback" not in err


def test_selector_with_only_non_commit_tags_is_one_line(upstream, tmp_path, capsys):
    code = main(["sim", "-c", str(pins_yaml(tmp_path, upstream, "['tags:b3*:2']"))])
    err = capsys.readouterr().err
    assert code == 2
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "no tag at" in errors[0] and "point at no commit: b3tree" in errors[0]


@pytest.mark.parametrize("name, kind", [("b3tree", "tree"), ("b4blob", "blob"), ("b5nest", "tree")])
def test_a_build_named_as_a_tag_of_a_tree_or_blob_is_bad_input(upstream, tmp_path, capsys, name, kind):
    out = tmp_path / "sim.json"
    code = main(["sim", "-c", str(pins_yaml(tmp_path, upstream, f"[{name}]")), "--json", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert err.splitlines() == [f"pinset sim: error: build {name!r}: tag {name} at {upstream.path} points at a {kind}, "
                                "not a commit (a build is a commit)"]
