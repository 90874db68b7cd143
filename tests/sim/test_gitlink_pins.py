"""A pin that adds a submodule (gitlink) or touches a `.git` path is an error of that pin naming why
(issue #20 §4), not "cache damaged" or "conflict with upstream"; `.gitmodules` is an ordinary file."""

from __future__ import annotations

import pytest

from pinset.cli import main
from tests.testing import run_doc, write_pins


@pytest.fixture
def upstream(make_repo):
    up = make_repo("upstream")
    base = up.commit("base", {"src/a.c": "int a(void) { return 1; }\n", "README": "upstream\n"})
    up.tag("b1")
    return up, base


def export(up, base, out, change) -> None:
    """Make a commit on a side branch with `change(up)` and export it with format-patch."""
    up.git("checkout", "-q", "-b", "pin", base)
    change(up)
    up.git("commit", "-q", "-m", "pin")
    up.git("format-patch", "-q", "-o", str(out), f"{base}..pin")
    up.git("checkout", "-q", "master")
    up.git("branch", "-q", "-D", "pin")


def sim(tmp_path, up, *pins):
    entries = "".join(f"  - id: {pin_id}\n    patches: {folder}\n" for pin_id, folder in pins)
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1]\npins:\n{entries}")
    out = tmp_path / "sim.json"
    code = main(["sim", "-c", str(cfg), "--json", str(out)])
    return code, {p["id"]: p for p in run_doc(out.read_text())["builds"][0]["pins"]}


def add_submodule(up):
    up.git("update-index", "--add", "--cacheinfo", f"160000,{up.head()},third_party/sub")
    up.write("src/a.c", "int a(void) { return 1; }\nint b(void) { return 2; }\n")
    up.git("add", "src/a.c")


def test_a_pin_that_adds_a_submodule_is_an_error_naming_it(upstream, tmp_path):
    up, base = upstream
    export(up, base, tmp_path / "sub", add_submodule)
    export(up, base, tmp_path / "ok", lambda r: (r.write("README", "upstream\nnote\n"), r.git("add", "README")))
    patch = next((tmp_path / "sub").iterdir()).read_text()
    assert "new file mode 160000" in patch and "+Subproject commit " in patch   # what git writes
    code, pins = sim(tmp_path, up, ("sub", tmp_path / "sub"), ("ok", tmp_path / "ok"))
    assert code == 1
    sub = pins["sub"]
    assert sub["status"] == "error" and sub["conflict_with"] is None, sub
    assert "submodule at third_party/sub (gitlink, mode 160000)" in sub["detail"]
    assert sub["detail"].startswith("0001-pin.patch: ")
    assert pins["ok"]["status"] == "applied"     # the other pins go on


@pytest.mark.parametrize("path", [".git/config", "sub/.git", "src/.GIT/hooks/post-checkout"])
def test_a_pin_that_touches_a_dot_git_path_is_an_error_naming_it(upstream, tmp_path, path):
    """git refuses to put such a path in an index, so the patch is a real one with its name changed."""
    up, base = upstream
    export(up, base, tmp_path / "real", lambda r: (r.write("hook.txt", "[core]\n\tfsmonitor = evil\n"),
                                                    r.git("add", "hook.txt")))
    real = next((tmp_path / "real").iterdir())
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / real.name).write_text(real.read_text().replace("hook.txt", path))
    code, pins = sim(tmp_path, up, ("dotgit", bad))
    pin = pins["dotgit"]
    assert code == 1 and pin["status"] == "error" and pin["conflict_with"] is None, pin
    assert f"touches {path}, a path inside a .git folder" in pin["detail"]


def test_gitmodules_is_an_ordinary_file(upstream, tmp_path):
    up, base = upstream
    export(up, base, tmp_path / "gm", lambda r: (r.write(".gitmodules", '[submodule "x"]\n\tpath = x\n\turl = ../x\n'),
                                                  r.git("add", ".gitmodules")))
    code, pins = sim(tmp_path, up, ("gm", tmp_path / "gm"))
    assert code == 0 and pins["gm"]["status"] == "applied" and pins["gm"]["touched"] == [".gitmodules"]
