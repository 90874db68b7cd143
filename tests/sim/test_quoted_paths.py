"""Patches whose file names git writes C-style quoted (issue #20 §2): made by real git, read like any other.

Before, a `diff --git "a/..." "b/..."` header was not recognised: the pin had `touched: []` (a CUDA pin
"ready" on CPU-only evidence) and the quoted file's lines were counted against the file before it
(a false "contract broken").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.sim.apply_errors import find_hunk
from pinset.sim.changes import parse_patch, touched_paths
from pinset.sim.diffs import DiffError, header_name, read_diffs, unquote_c
from tests.testing import FIXTURES, run_doc, write_pins

CUDA = "ggml/src/ggml-cuda/kä.cu"
NAMES = [CUDA, "src/a b.c", "src/tab\tname.c", 'src/q"uote.c', "src/back\\slash.c", "src/plain.c",
         "src/new\nline.c", "src/ünï cödé.c"]


def body(tag: str, extra: str = "") -> str:
    return "".join(f"int {tag}_filler_{i}(void) {{ return {i}; }}\n" for i in range(8)) + extra


def added(tag: str) -> str:
    return f"int {tag}_added_by_pin(void) {{ return 42; }}\n"


def tag_of(name: str) -> str:
    return "f" + str(NAMES.index(name))


@pytest.fixture
def upstream(make_repo):
    up = make_repo("upstream")
    base = up.commit("base", {name: body(tag_of(name)) for name in NAMES})
    up.tag("b1")
    return up, base


def make_patch(up, base: str, out: Path, quote_path: bool, files: dict[str, str | None] | None = None) -> Path:
    """Commit a change of every file on a side branch and export it with format-patch."""
    up.git("checkout", "-q", "-b", "pin", base)
    up.commit("touch every file", files or {name: body(tag_of(name), added(tag_of(name))) for name in NAMES})
    up.git("-c", f"core.quotePath={'true' if quote_path else 'false'}", "format-patch", "-M", "-q", "-o", str(out), f"{base}..pin")
    up.git("checkout", "-q", "master")
    up.git("branch", "-q", "-D", "pin")
    return next(out.iterdir())


@pytest.mark.parametrize("quote_path", [True, False], ids=["quotePath=true", "quotePath=false"])
def test_real_quoted_patch_is_read_per_file(upstream, tmp_path, quote_path):
    up, base = upstream
    patch = make_patch(up, base, tmp_path / "p", quote_path)
    text = patch.read_text(encoding="utf-8")
    assert '"a/src/tab\\tname.c"' in text and ('"a/ggml/src/ggml-cuda/k\\303\\244.cu"' in text) == quote_path
    files = parse_patch(text)
    assert sorted(files) == sorted(NAMES)
    for name in NAMES:   # each file's own line, none counted against its neighbour
        assert files[name].added == [added(tag_of(name)).strip()], name
    assert touched_paths([text]) == frozenset(NAMES)
    # the failed-hunk reader names the quoted file the way git's error line does (unquoted)
    assert find_hunk(text, CUDA, 6)[0].startswith("@@ -6,")


def test_rename_between_quoted_names(upstream, tmp_path):
    up, base = upstream
    renamed = {"src/a b.c": None, "src/ä b\t.c": body(tag_of("src/a b.c"))}
    text = make_patch(up, base, tmp_path / "p", True, renamed).read_text(encoding="utf-8")
    assert "rename from src/a b.c" in text and 'rename to "src/\\303\\244 b\\t.c"' in text
    diffs = read_diffs(text)
    assert [(d.old, d.new) for d in diffs] == [("src/a b.c", "src/ä b\t.c")]
    assert touched_paths([text]) == {"src/a b.c", "src/ä b\t.c"}


@pytest.mark.parametrize("quoted, value", [
    (r'"a/k\303\244.cu"', "a/kä.cu"), (r'"tab\there"', "tab\there"), (r'"q\"x\\y"', 'q"x\\y'),
    ('"raw ä"', "raw ä"), (r'"\a\b\f\n\r\v"', "\a\b\f\n\r\v")])
def test_unquote_follows_git(quoted, value):
    assert unquote_c(quoted) == (value, len(quoted))


@pytest.mark.parametrize("bad", ['"no end', r'"bad \q"', r'"\400"', r'"\12"'])
def test_unquote_refuses_what_git_refuses(bad):
    with pytest.raises(DiffError):
        unquote_c(bad)


@pytest.mark.parametrize("rest, name", [
    ('"a/x y" "b/x y"', "x y"), ('a/x y b/x y', "x y"), ('a/p "b/p"', "p"), ('"a/p" b/p', "p"),
    ('a/old b/new', None)])
def test_header_names(rest, name):
    assert header_name(rest) == name


def test_unreadable_names_are_unknown_not_nothing():
    text = 'diff --git "a/bad\\q.c" "b/bad\\q.c"\n--- "a/bad\\q.c"\n+++ "b/bad\\q.c"\n@@ -1 +1 @@\n-a\n+b\n'
    with pytest.raises(DiffError, match="line 1"):
        parse_patch(text)
    assert touched_paths([text]) is None


def test_a_removed_line_that_reads_like_a_header_stays_in_its_file():
    """Hunk lengths decide: `--- x` and `-- ` inside a hunk are lines of the file."""
    text = ("diff --git a/x.sql b/x.sql\n--- a/x.sql\n+++ b/x.sql\n@@ -1,3 +1,1 @@\n"
            "--- a comment line of SQL\n-- \n+select something_else from t;\n")
    files = parse_patch(text)
    assert files["x.sql"].removed == ["-- a comment line of SQL"] and files["x.sql"].added == ["select something_else from t;"]


def sim(tmp_path, up, patches: Path):
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1]\npins:\n"
                                             f"  - id: quoted\n    patches: {patches}\n")
    out = tmp_path / "sim.json"
    code = main(["sim", "-c", str(cfg), "--json", str(out)])
    return code, run_doc(out.read_text())


@pytest.mark.parametrize("quote_path", [True, False], ids=["quotePath=true", "quotePath=false"])
def test_sim_of_a_quoted_pin_names_its_files_and_keeps_its_contract(upstream, tmp_path, quote_path):
    up, base = upstream
    patches = tmp_path / "patches"
    make_patch(up, base, patches, quote_path)
    code, data = sim(tmp_path, up, patches)
    pin = data["builds"][0]["pins"][0]
    assert code == 0 and pin["status"] == "applied", pin
    assert pin["touched"] == sorted(NAMES) and pin["files"] == sorted(NAMES)
    assert pin["contract"] == {"ok": True, "problems": []}


def cpu_report(tmp_path, **pin):
    """`pinset report` of green's sim on one build, its first pin changed by `pin`, with verify, kld and bench
    run on the CPU only: (exit code, markdown)."""
    fix = FIXTURES / "report" / "green"

    def load(name):
        return json.loads((fix / name).read_text())

    build = "pypi:llama-cpp-python==0.3.36"
    verify, kld, bench, doc = load("verify-cpu.json"), load("kld-h200.json"), load("bench-h200.json"), load("sim.json")
    verify["builds"] = [b for b in verify["builds"] if b["build"] == build]
    for run in kld["runs"]:
        run["backend"], run["devices"] = "CPU", []
    bench["gpu"] = None
    doc["builds"] = [b for b in doc["builds"] if b["build"] == build]
    for p in doc["builds"][0]["pins"]:
        p["touched"] = ["ggml/src/ggml-cpu/ops.cpp"]
    doc["builds"][0]["pins"][0].update(pin)
    files = []
    for name, d in (("s", doc), ("v", verify), ("k", kld), ("b", bench)):
        files.append(tmp_path / f"r-{name}.json")
        files[-1].write_text(json.dumps(d))
    out = tmp_path / "r.md"
    rc = main(["report", *map(str, files), "--markdown", str(out)])
    return rc, out.read_text(encoding="utf-8")


def test_report_is_not_ready_for_a_quoted_cuda_pin_on_cpu_evidence(upstream, tmp_path):
    """The touched list a real sim writes for the quoted pin makes the report ask for CUDA evidence;
    the same files with a CPU-only touched list are ready (so the test can fail)."""
    up, base = upstream
    patches = tmp_path / "patches"
    make_patch(up, base, patches, True)
    touched = sim(tmp_path, up, patches)[1]["builds"][0]["pins"][0]["touched"]
    assert CUDA in touched
    rc, text = cpu_report(tmp_path, touched=["ggml/src/ggml-cpu/ops.cpp"])
    assert rc == 0 and "ready to ship" in text.splitlines()[3]
    rc, text = cpu_report(tmp_path, touched=touched)
    assert rc == 1 and "ready to ship" not in text.splitlines()[3]
    assert f"changes CUDA code ({CUDA}" in text


def test_report_treats_unknown_touched_as_cuda_code(tmp_path):
    """Unknown never reads as "touches nothing": an applied pin whose touched files are unknown (null) needs
    CUDA evidence; a pin whose names could not be read is an error of the pin, which blocks."""
    rc, text = cpu_report(tmp_path, touched=None)
    assert rc == 1 and "ready to ship" not in text.splitlines()[3]
    assert "may change CUDA code (the files it touches are unknown)" in text
    rc, text = cpu_report(tmp_path, status="error", touched=None, files=[], contract={"ok": False, "problems": ["x"]},
                          detail="0001-x.patch: cannot read the files it changes: line 1: bad escape")
    assert rc == 1 and "blocked" in text.splitlines()[3]


@pytest.mark.parametrize("quote_path", [True, False], ids=["quotePath=true", "quotePath=false"])
def test_pr_pin_with_quoted_names(make_repo, tmp_path, monkeypatch, quote_path):
    """A PR pin's diff comes from `git diff` in the mirror: the same reader, whatever the mirror's quotePath."""
    up = make_repo("upstream")
    up.commit("base", {name: body(tag_of(name)) for name in NAMES})
    up.git("checkout", "-q", "-b", "pr")
    pr_head = up.commit("pr", {name: body(tag_of(name), added(tag_of(name))) for name in NAMES})
    up.git("update-ref", "refs/pull/5/head", pr_head)
    up.git("checkout", "-q", "master")
    up.commit("later", {"README": "upstream\n"})
    up.tag("b2")
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b2]\npins:\n"
                                             f"  - id: pr5\n    pr: https://github.com/ggml-org/llama.cpp/pull/5\n"
                                             f"    commit: {pr_head}\n")
    out = tmp_path / "sim.json"
    for key, value in (("GIT_CONFIG_COUNT", "1"), ("GIT_CONFIG_KEY_0", "core.quotePath"),
                       ("GIT_CONFIG_VALUE_0", "true" if quote_path else "false")):
        monkeypatch.setenv(key, value)
    code = main(["sim", "-c", str(cfg), "--json", str(out)])
    pin = json.loads(out.read_text())["builds"][0]["pins"][0]
    assert code == 0 and pin["status"] == "applied", pin
    assert pin["touched"] == sorted(NAMES) and pin["contract"]["ok"] is True
