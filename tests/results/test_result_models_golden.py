"""Golden files of the result models (tests/regen_model_goldens.py): every recorded result file read through
its kind's model and written again, and each report scenario's JSON, are byte-identical to what was recorded
before the models were refactored; a file of the current schema comes back as it was written."""

from __future__ import annotations

import json

import pytest

from tests import regen_model_goldens as goldens

FILES = goldens.result_files()


def test_every_kind_has_a_recorded_file():
    kinds = {json.loads(p.read_text(encoding="utf-8"))["kind"] for p in FILES}
    assert kinds == set(goldens.KINDS)


@pytest.mark.parametrize("path", FILES, ids=goldens.golden_name)
def test_round_trip_golden(path):
    """Against tests/golden/models/<path>, or the file itself where reading and writing it gives its own bytes."""
    assert goldens.round_trip(path) == goldens.expected_round_trip(path)


@pytest.mark.parametrize("path", [p for p in FILES if p.parts[-3:-1] == ("report", "nightly")], ids=lambda p: p.name)
def test_current_schema_comes_back_as_written(path):
    assert goldens.round_trip(path) == path.read_text(encoding="utf-8")


def test_report_json_golden(tmp_path):
    for name, text in goldens.report_outputs(tmp_path).items():
        assert text == (goldens.REPORT_GOLDEN / f"{name}.json").read_text(encoding="utf-8"), name
