"""The forecast's rules on their own: the effect of a PR on a pin from sim's two results, the ranking, and the
JSON read back through its model."""

from __future__ import annotations

import pytest

from pinset.forecast.model import ForecastPR, ForecastResult, PinEffect, effect, rank_key
from pinset.results import SCHEMAS, Doc
from pinset.sim.model import Contract, PinResult


def pin(status: str, mode: str | None = None, contract: bool = True) -> PinResult:
    return PinResult("p", status, True, apply_mode=mode, contract=Contract(contract, [] if contract else ["gone"]))


@pytest.mark.parametrize(("before", "after", "expected"), [
    (pin("applied", "exact"), pin("conflict"), "breaks"),
    (pin("applied", "exact"), pin("applied", "exact", contract=False), "breaks"),
    (pin("upstream"), pin("conflict"), "breaks"),
    (pin("conflict"), pin("applied", "exact"), "fixes"),
    (pin("applied", "exact"), pin("upstream"), "carries"),
    (pin("conflict"), pin("upstream"), "carries"),
    (pin("applied", "exact"), pin("applied", "offset"), "moves"),
    (pin("applied", "offset"), pin("applied", "3-way"), "moves"),
    (pin("applied", "3-way"), pin("applied", "exact"), "none"),
    (pin("applied", "exact"), pin("applied", "exact"), "none"),
    (pin("upstream"), pin("upstream"), "none"),
    (pin("conflict"), pin("conflict"), "none"),
])
def test_effect_rule(before, after, expected):
    assert effect(before, after) == expected


def pr(number: int, state: str, updated: str) -> ForecastPR:
    return ForecastPR(number, f"PR {number}", f"https://github.test/o/r/pull/{number}", "a" * 40, state, updated)


def test_ranking_rule():
    prs = [pr(1, "draft", "2026-01-09"), pr(2, "open", "2026-01-01"), pr(3, "open", "2026-01-05"),
           pr(4, "reviewed", "2025-01-01"), pr(5, "approved", "2024-01-01"), pr(6, "open", "2026-01-05")]
    assert [p.number for p in sorted(prs, key=rank_key)] == [5, 4, 6, 3, 2, 1]


def test_json_reads_back_through_the_model(tmp_path):
    breaking = pr(1, "open", "2026-01-01")
    breaking.touches, breaking.merges, breaking.onto = ["src/a.c"], True, "b" * 40
    breaking.pins = [PinEffect("a", "breaks", True, "applied", "conflict", "exact", None, "does not apply",
                               ["@@ -1 +1 @@", "-x", "+y"], ["src/a.c"], ["src/a.c:", "1 | z"])]
    result = ForecastResult("o/r", "b2", "c" * 40, [breaking, pr(2, "draft", "2026-01-02")], "d" * 16, ["a"], 3)
    data = result.to_json()
    assert data["kind"] == "forecast" and data["schema"] == SCHEMAS["forecast"] == 1 and data["ok"] is False
    again = ForecastResult.from_json(Doc(data, tmp_path / "f.json", "forecast"))
    assert again.to_json() == data
