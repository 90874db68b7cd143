"""`pinset sim` run in-process, and its JSON read the way the sim tests compare it."""

from __future__ import annotations

import json

from pinset.cli import main


def run_sim(tmp_path, pins_yaml, *extra):
    out = tmp_path / "sim.json"
    code = main(["sim", "-c", str(pins_yaml), "--json", str(out), *extra])
    return code, without_start(json.loads(out.read_text()))


def without_start(doc: dict) -> dict:
    """A result document without its run's UTC start time (pinset.results.STARTED), which it must have: what
    two runs of the same inputs compare equal on."""
    assert isinstance(doc.get("started"), str), "a result file says when its run started"
    return {k: v for k, v in doc.items() if k != "started"}


def by_id(build):
    return {p["id"]: p for p in build["pins"]}
