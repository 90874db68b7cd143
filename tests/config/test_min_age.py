"""Aged builds (issue 43): a build selector's minimum age (`tags:b*:3:48h`, `min-age: 48h`), measured from the
tag's commit time (a real history with dated tags) or the sdist's upload time (a PyPI JSON API on 127.0.0.1),
so that pick and bump never ship a build younger than that; the newer builds passed over are named."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.config.selectors import PypiSelector, TagSelector, age_seconds, parse_selector
from pinset.errors import ConfigError, PinsetError
from pinset.upstream.mirror import Mirror
from pinset.upstream.select import PYPI_URL_ENV, newest_tags, pypi_versions
from tests.testing import GitRepo, write_pins
from tests.testing.history import FastHistory

HOURS_OLD = {"b1": 100, "b2": 80, "b3": 50, "b4": 30, "b5": 10, "b6": 1}   # tag -> its commit's age


@pytest.fixture
def dated(tmp_path):
    """upstream: one commit per tag b1..b6, each committed HOURS_OLD hours ago (a file f the pin changes
    stays the same, so the pin applies everywhere)."""
    up = GitRepo(tmp_path / "upstream")
    h = FastHistory()
    now = int(time.time())
    for i, (tag, hours) in enumerate(HOURS_OLD.items()):
        mark = h.commit(f"c{i}", {"f": "keep\n", "g": f"{i}\n"}, at=now - hours * 3600)
        h.tag(tag, mark)
    h.write(up.path)
    return up


def test_parse_and_normalise():
    assert str(parse_selector("tags:b*:3:48h")) == "tags:b*:3:48h"
    assert parse_selector("tags:b*:3:48h") == TagSelector("b*", 3, "48h")
    assert parse_selector("pypi:llama-cpp-python>=0.3.33:2d") == PypiSelector("llama-cpp-python", ">=0.3.33", None, "2d")
    assert str(parse_selector("pypi:llama-cpp-python>=0.3.33:2:90m")) == "pypi:llama-cpp-python>=0.3.33:2:90m"
    assert (age_seconds("48h"), age_seconds("2d"), age_seconds("90m"), age_seconds("1w")) == (172800, 172800, 5400, 604800)
    for bad in ("48", "0h", "h", "2 d", "-1h", "1y"):
        with pytest.raises(ValueError, match="not a duration"):
            age_seconds(bad)


def test_tags_younger_than_the_min_age_are_passed_over_and_named(dated, tmp_path, capsys):
    with Mirror(tmp_path / "mirror.git") as mirror:
        assert newest_tags(TagSelector("b*", 2, "48h"), str(dated.path), mirror) == ["b2", "b3"]
        err = capsys.readouterr().err
        assert "passed over for age (younger than 48h): b6 (1 h old), b5 (10 h old), b4 (30 h old)" in err
        assert newest_tags(TagSelector("b*", 2), str(dated.path), mirror) == ["b5", "b6"]   # no age: the newest
        with pytest.raises(PinsetError, match=r"no tag is at least 2w old \(6 match; the oldest is 4 d old\)"):
            newest_tags(TagSelector("b*", 2, "2w"), str(dated.path), mirror)


def _pins(tmp_path, up, builds: str):
    work = GitRepo(tmp_path / "work")
    work.commit("base", {"f": "keep\n"})
    work.commit("pin", {"f": "keep\npinned\n"})
    work.format_patch("HEAD~1..HEAD", tmp_path / "patches" / "p")
    return write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: {builds}
        pins:
          - id: p
            patches: patches/p
    """)


def test_pins_yaml_mapping_and_sim(dated, tmp_path, capsys):
    cfg = _pins(tmp_path, dated, '[{tags: {match: "b*", newest: 2, min-age: 48h}}]')
    assert load_pinset(cfg).builds == ("tags:b*:2:48h",)
    out = tmp_path / "sim.json"
    assert main(["sim", "-c", str(cfg), "--json", str(out)]) == 0
    assert [b["build"] for b in json.loads(out.read_text())["builds"]] == ["b2", "b3"]
    assert "passed over for age" in capsys.readouterr().err


def test_pick_never_picks_a_build_younger_than_the_min_age(dated, tmp_path, capsys):
    cfg = _pins(tmp_path, dated, '["tags:b*:3:48h"]')
    out = tmp_path / "pick.json"
    assert main(["pick", "-c", str(cfg), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["picked"] == "b3"   # b4..b6 are green too, but younger than 48 h
    assert "b6 (1 h old), b5 (10 h old), b4 (30 h old)" in capsys.readouterr().err


@pytest.mark.parametrize("entry, message", [
    ('{tags: {match: "b*", newest: 2, min-age: 48}}', r"builds\[\].tags.min-age: must be a duration"),
    ('{tags: {match: "b*", newest: 2, min-age: "2 days"}}', r"builds\[\].tags.min-age: must be a duration"),
    ('"tags:b*:2:soon"', r"builds\[\]: min-age: 'soon' is not a duration"),
])
def test_a_malformed_min_age_is_one_line(dated, tmp_path, entry, message):
    with pytest.raises(ConfigError, match=message):
        load_pinset(_pins(tmp_path, dated, f"[{entry}]"))


def _iso(hours_ago: float) -> str:
    return datetime.fromtimestamp(time.time() - hours_ago * 3600, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def index(monkeypatch):
    releases = {v: [{"packagetype": "sdist", "yanked": False, "filename": f"x-{v}.tar.gz",
                     "upload_time_iso_8601": _iso(hours)}]
                for v, hours in (("0.3.33", 200), ("0.3.34", 60), ("0.3.35", 20), ("0.3.36", 2))}
    releases["0.3.37"] = [{"packagetype": "sdist", "yanked": False, "filename": "x.tar.gz"}]   # no upload time
    body = json.dumps({"info": {}, "releases": releases}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(PYPI_URL_ENV, f"http://127.0.0.1:{server.server_port}")
    yield
    server.shutdown()


def test_pypi_versions_are_aged_by_the_sdists_upload_time(index, capsys):
    assert pypi_versions(PypiSelector("llama-cpp-python", ">=0.3.33", 2, "48h")) == [
        "pypi:llama-cpp-python==0.3.33", "pypi:llama-cpp-python==0.3.34"]
    err = capsys.readouterr().err
    assert "passed over for age (younger than 48h): 0.3.37 (age unknown), 0.3.36 (2 h old), 0.3.35 (20 h old)" in err
    assert pypi_versions(PypiSelector("llama-cpp-python", ">=0.3.33", 1)) == ["pypi:llama-cpp-python==0.3.37"]
