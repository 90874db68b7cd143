"""`pinset sim` run in-process, and its JSON read the way the sim tests compare it."""

from __future__ import annotations

import json

from pinset.cli import main
from tests.testing import without_start


def run_sim(tmp_path, pins_yaml, *extra):
    out = tmp_path / "sim.json"
    code = main(["sim", "-c", str(pins_yaml), "--json", str(out), *extra])
    return code, without_start(json.loads(out.read_text()))



def by_id(build):
    return {p["id"]: p for p in build["pins"]}
