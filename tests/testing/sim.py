"""`pinset sim` run in-process, and its JSON read the way the sim tests compare it."""

from __future__ import annotations

import json

from pinset.cli import main


def run_sim(tmp_path, pins_yaml, *extra):
    out = tmp_path / "sim.json"
    code = main(["sim", "-c", str(pins_yaml), "--json", str(out), *extra])
    return code, json.loads(out.read_text())


def by_id(build):
    return {p["id"]: p for p in build["pins"]}
