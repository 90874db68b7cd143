"""Every result JSON says when its run began (pinset.results.STARTED), and sim's a digest per pin that changes
when the series is refreshed or replaced, not when upstream moves under it."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from pinset.cli import main
from pinset.errors import PinsetError
from pinset.results import Doc, parse_utc, stamped, started_of
from tests.testing import first_build, series, write_pins

A_C = "".join(f"int a_{i}(void) {{ return {i}; }}\n" for i in range(1, 41))


def test_a_run_stamps_its_start_time_in_utc(tmp_path, make_repo):
    up, b1 = first_build(make_repo, {"a.c": A_C})
    series(up, b1, [("pin", {"a.c": A_C.replace("return 5;", "return 50;")})], tmp_path / "p")
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1]\npins:\n  - id: p\n    patches: p\n")
    before = datetime.now(timezone.utc).replace(microsecond=0)
    assert main(["sim", "-c", str(cfg), "--json", str(tmp_path / "sim.json")]) == 0
    after = datetime.now(timezone.utc)
    doc = json.loads((tmp_path / "sim.json").read_text())
    assert list(doc)[:3] == ["schema", "kind", "started"]
    assert doc["started"].endswith("Z")
    assert before <= parse_utc(doc["started"]) <= after
    first = doc["builds"][0]["pins"][0]["digest"]
    assert len(first) == 16
    # upstream moves under the pin: the same digest
    up.commit("upstream moves", {"a.c": "int z(void);\n" * 3 + A_C})
    up.tag("b2")
    cfg.write_text(cfg.read_text().replace("[b1]", "[b2]"))
    assert main(["sim", "-c", str(cfg), "--json", str(tmp_path / "sim2.json")]) == 0
    moved = json.loads((tmp_path / "sim2.json").read_text())["builds"][0]["pins"][0]
    assert moved["apply_mode"] == "offset" and moved["digest"] == first
    # the series refreshed: a new digest (and a memo answer for the same build does not keep the old one)
    assert main(["refresh", "-c", str(cfg), "--onto", "b2", "--write"]) == 0
    assert main(["sim", "-c", str(cfg), "--json", str(tmp_path / "sim3.json")]) == 0
    refreshed = json.loads((tmp_path / "sim3.json").read_text())["builds"][0]["pins"][0]
    assert refreshed["apply_mode"] == "exact" and refreshed["digest"] != first


def test_a_result_that_already_says_when_keeps_it_and_others_are_left_alone():
    doc = {"schema": 2, "kind": "bench", "started": "2026-01-02T03:04:05Z", "ok": True}
    assert stamped(doc) is doc
    assert stamped({"schema": 1, "cells": []}) == {"schema": 1, "cells": []}


def test_started_reads_old_files_and_refuses_a_damaged_value(tmp_path):
    assert started_of(Doc({"kind": "sim"}, tmp_path / "old.json", "sim")) is None
    assert started_of(Doc({"started": "2026-11-04T02:13:07+01:00"}, "x", "sim")) == \
        datetime(2026, 11, 4, 1, 13, 7, tzinfo=timezone.utc)
    for bad in ("yesterday", "2026-11-04T02:13:07"):   # no zone: not a UTC time
        with pytest.raises(PinsetError, match=r"bad.json: sim.started: expected a UTC time"):
            started_of(Doc({"started": bad}, tmp_path / "bad.json", "sim"))
