"""Console tables stay readable on an 80-column terminal: cells wrap, none is cut to "…"."""

import copy
import io
import json

from rich.console import Console

from pinset.commands.sim import sim_table
from pinset.commands.verify import _table as verify_table
from pinset.results import Doc
from pinset.sim.model import SimResult
from pinset.verify.model import VerifyResult
from tests.testing import FIXTURES

REPORT = FIXTURES / "report"


def rendered(table) -> str:
    screen = io.StringIO()
    Console(file=screen, width=80, force_terminal=False).print(table)
    return screen.getvalue()


def widened(doc: dict, n: int) -> dict:
    """The document with n builds (copies of the first under long, distinct names)."""
    doc = copy.deepcopy(doc)
    first = doc["builds"][0]
    doc["builds"] = [dict(copy.deepcopy(first), build=f"b{6000 + i}-a-rather-long-upstream-tag-name") for i in range(n)]
    return doc


def test_sim_table_at_80_columns_cuts_no_cell():
    doc = widened(json.loads((REPORT / "blocked" / "sim.json").read_text()), 5)
    for b in doc["builds"]:
        b["pins"][0]["id"] = "a-pin-with-an-unusually-long-identifier-for-its-pr"
    text = rendered(sim_table(SimResult.from_json(Doc(doc, "sim.json", ""))))
    assert "…" not in text
    first_column = "".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))
    assert "a-pin-with-an-unusually-long-identifier-for-its-pr" in first_column  # wrapped, whole


def test_verify_table_at_80_columns_cuts_no_cell():
    doc = widened(json.loads((REPORT / "blocked" / "verify-h200.json").read_text()), 4)
    text = rendered(verify_table(VerifyResult.from_json(Doc(doc, "verify.json", ""))))
    assert "…" not in text
    first_column = "".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))
    assert all(g["name"] in first_column for g in doc["builds"][0]["gates"])
