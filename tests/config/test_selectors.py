"""Build selectors: parsing and pins.yaml validation, tags ordered by history, pypi ranges from a local index."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given, strategies as st

from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.config.selectors import PypiSelector, TagSelector, parse_selector, split_builds
from pinset.errors import ConfigError, PinsetError
from pinset.upstream.mirror import Mirror
from pinset.upstream.select import PYPI_URL_ENV, expand_builds, newest_tags, pypi_versions
from tests.testing import GitRepo, write_pins
from tests.testing.history import FastHistory


def sdist(yanked=False):
    return {"packagetype": "sdist", "yanked": yanked, "filename": "x.tar.gz"}


RELEASES = {
    "0.3.9": [sdist()], "0.3.10": [sdist()], "0.3.33": [sdist()], "0.3.34": [sdist()],
    "0.3.35": [sdist(yanked=True)],                          # yanked: never chosen
    "0.3.36": [{"packagetype": "bdist_wheel", "yanked": False}],  # wheels only: nothing to import
    "0.3.37": [sdist()], "0.4.0rc1": [sdist()], "not-a-version": [sdist()],
}


@pytest.fixture
def index(monkeypatch):
    """A PyPI JSON API on 127.0.0.1: /pypi/<name>/json; `answers` maps a package to a body or status."""
    answers = {"llama-cpp-python": json.dumps({"info": {}, "releases": RELEASES})}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            name = self.path.split("/")[2]
            body = answers.get(name)
            if isinstance(body, int) or body is None:
                self.send_response(body or 404)
                self.end_headers()
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(PYPI_URL_ENV, f"http://127.0.0.1:{server.server_port}")
    yield answers
    server.shutdown()


def test_pypi_range_by_version_with_an_sdist(index):
    names = pypi_versions(parse_selector("pypi:llama-cpp-python>=0.3.10"))
    assert names == [f"pypi:llama-cpp-python=={v}" for v in ("0.3.10", "0.3.33", "0.3.34", "0.3.37")]
    assert pypi_versions(PypiSelector("llama-cpp-python", ">=0.3.9,<0.3.34", 2)) == [
        "pypi:llama-cpp-python==0.3.10", "pypi:llama-cpp-python==0.3.33"]
    assert pypi_versions(PypiSelector("llama-cpp-python", ">=0.4.0rc1")) == ["pypi:llama-cpp-python==0.4.0rc1"]


@pytest.mark.parametrize("answer, message", [
    (404, "no package"), (500, "gave no release list"), ("<html>hi</html>", "gave no release list"),
    (json.dumps({"releases": []}), "gave no release list"), (json.dumps({"releases": {"1.0": [sdist()]}}), "no sdist version"),
])
def test_pypi_index_faults_are_one_line(index, answer, message):
    index["llama-cpp-python"] = answer
    with pytest.raises(PinsetError, match=message):
        pypi_versions(PypiSelector("llama-cpp-python", ">=2"))


def test_pypi_selector_on_the_command_line_is_expanded_before_anything_is_downloaded(index, tmp_path, capsys):
    """The range resolves through the local index; the package has no match -> one line, exit 2."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "0001.patch").write_text("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n")
    cfg = write_pins(tmp_path / "pins.yaml", "builds: [pypi:llama-cpp-python==0.3.36]\npins: [{id: p, patches: p}]\n")
    code = main(["sim", "-c", str(cfg), "--builds", "pypi:llama-cpp-python>=0.5,<1"])
    err = capsys.readouterr().err
    assert code == 2 and "no sdist version of llama-cpp-python matches '<1,>=0.5'" in err
    assert len(err.strip().splitlines()) == 1


def test_expand_keeps_plain_names_and_drops_duplicates(index):
    names = expand_builds(["pypi:llama-cpp-python==0.3.34", "pypi:llama-cpp-python>=0.3.33:2"], None, mirror=None)
    assert names == ["pypi:llama-cpp-python==0.3.34", "pypi:llama-cpp-python==0.3.37"]


@pytest.fixture
def branching(tmp_path):
    """Tags whose names sort differently from their history, plus a tag on a side branch."""
    up = GitRepo(tmp_path / "upstream")
    h = FastHistory()
    prev = h.commit("c0", {"f": "0\n"})
    order = ["b9", "b10", "b100", "b11"]           # history order; by name: b10 < b100 < b11 < b9
    for i, tag in enumerate(order):
        prev = h.commit(f"c{i + 1}", {"f": f"{i + 1}\n"})
        h.tag(tag, prev)
    side = h.commit("side", {"g": "side\n"}, branch="side", parent=prev - 2)
    h.tag("x1", side)                                 # does not match b*
    h.write(up.path)
    return up


def test_newest_tags_follow_history_not_names(branching, tmp_path):
    with Mirror(tmp_path / "mirror.git") as mirror:
        assert newest_tags(TagSelector("b*", 2), str(branching.path), mirror) == ["b100", "b11"]
        assert newest_tags(TagSelector("b1?", 9), str(branching.path), mirror) == ["b10", "b11"]
        assert newest_tags(TagSelector("b*", 10), str(branching.path), mirror) == ["b9", "b10", "b100", "b11"]
        with pytest.raises(PinsetError, match="no tag at"):
            newest_tags(TagSelector("v*", 1), str(branching.path), mirror)


def test_selectors_in_pins_yaml_normalise_to_strings(tmp_path, make_repo):
    make_repo("up")  # a local upstream must be a git repository
    cfg = write_pins(tmp_path / "pins.yaml", """
        upstream: up
        builds:
          - b1
          - tags: {match: "b*", newest: 3}
          - pypi: {package: llama-cpp-python, versions: ">=0.3.33", newest: 2}
          - pypi:llama-cpp-python>=0.3.30,<0.4
          - tags:b*:3
        pins: []
        """)
    with pytest.raises(ConfigError, match=r"pins.yaml:7: builds\[\]: duplicate build 'tags:b\*:3'"):
        load_pinset(cfg, require_pins=False)
    cfg.write_text(cfg.read_text().replace("  - tags:b*:3\n", ""))
    assert load_pinset(cfg, require_pins=False).builds == (
        "b1", "tags:b*:3", "pypi:llama-cpp-python>=0.3.33:2", "pypi:llama-cpp-python<0.4,>=0.3.30")


@pytest.mark.parametrize("entry, message", [
    ('tags: {match: "b*"}', r":3: builds\[\].tags.newest: missing"),
    ('tags: {match: "b*", newest: 0}', r":3: builds\[\].tags.newest: must be a count from 1 to 1000, got '0'"),
    ('tags: {match: "b*", newest: "3"}', r"builds\[\].tags.newest: must be a count"),
    ('tags: {match: "b*", newest: 3, sort: name}', r"builds\[\].tags.sort: unknown key"),
    ('pypi: {package: x, versions: "0.3"}', r"builds\[\].pypi.versions: malformed version specifier '0.3'"),
    ('pypi: {package: "x y", versions: ">=1"}', r"builds\[\].pypi.package: malformed package name"),
    ('{tags: {match: "b*", newest: 2}, pypi: {}}', r"builds\[\]: a selector mapping has one key"),
    ("tags:b*", r":3: builds\[\]: a tag selector needs how many"),
    ("tags:b*:x", r"builds\[\]: newest: 'x' is not a count"),
    ("pypi:x>=1:0", r"builds\[\]: newest: '0' is not a count"),
    ("pypi:x>=abc", r"malformed version specifier '>=abc'"),
    ('"tags:b..*:2"', r"malformed tag pattern"),
])
def test_malformed_selectors_are_one_line_errors(tmp_path, make_repo, entry, message):
    make_repo("up")  # a local upstream must be a git repository
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: up\nbuilds:\n  - {entry}\npins: []\n")
    with pytest.raises(ConfigError, match=message) as info:
        load_pinset(cfg, require_pins=False)
    assert "\n" not in str(info.value)


def test_tag_selector_needs_an_upstream(tmp_path):
    cfg = write_pins(tmp_path / "pins.yaml", "builds:\n  - tags:b*:2\npins: []\n")
    with pytest.raises(ConfigError, match=r"tag selector 'tags:b\*:2' needs an `upstream:`"):
        load_pinset(cfg, require_pins=False)


def test_split_builds_keeps_pypi_ranges_whole():
    assert split_builds("b1, pypi:a>=1,<2 ,tags:b*:3,pypi:a==1,") == ["b1", "pypi:a>=1,<2", "tags:b*:3", "pypi:a==1"]


@given(st.text(max_size=40))
def test_parse_selector_raises_only_value_error(text):
    try:
        selector = parse_selector(text)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    assert parse_selector(str(selector)) == selector  # canonical strings parse back to the same selector


def test_sim_expands_a_tag_selector_of_pins_yaml(branching, tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "0001.patch").write_text("diff --git a/g2 b/g2\nnew file mode 100644\n--- /dev/null\n+++ b/g2\n"
                                               "@@ -0,0 +1 @@\n+int pinned_feature = 1;\n")
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {branching.path}
        builds:
          - tags: {{match: "b*", newest: 2}}
          - b9
        pins:
          - id: p
            patches: p
        """)
    out = tmp_path / "sim.json"
    assert main(["sim", "-c", str(cfg), "--json", str(out)]) == 0
    assert [b["build"] for b in json.loads(out.read_text())["builds"]] == ["b100", "b11", "b9"]
