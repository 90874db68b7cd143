"""`--json` of import, apply and refresh (issue 43): documents a workflow step reads. Each is made by the real
verb on real repositories, validates against its JSON Schema (`pinset schema --kind KIND`) and round-trips
through its model (pinset/results.py's registry); `pinset report` refuses them as evidence in one line."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pinset.cli import main
from pinset.commands.schema import result_schema
from pinset.config.import_model import ImportResult
from pinset.heal.model import RefreshResult
from pinset.results import read_document
from pinset.sim.apply_model import ApplyResult
from tests.testing import first_build, series, without_start, write_pins

MODELS = {"import": ImportResult, "apply": ApplyResult, "refresh": RefreshResult}
LINES = "".join(f"line {i}\n" for i in range(1, 41))


def _round_trip(path, kind: str) -> dict:
    data = json.loads(path.read_text())
    jsonschema.Draft202012Validator(result_schema(kind)).validate(data)
    doc, read_kind, schema, _ = read_document(path)
    assert (read_kind, schema) == (kind, 1)
    assert MODELS[kind].from_json(doc).to_json() == without_start(data)
    return data


@pytest.fixture
def project(make_repo, tmp_path):
    """upstream b1; b2 with five lines on top (the pin applies with an offset there); b3 changes the pin's line."""
    up, b1 = first_build(make_repo, {"a.txt": LINES})
    series(up, b1, [("change line 20", {"a.txt": LINES.replace("line 20\n", "line 20 pinned\n")})],
           tmp_path / "patches" / "p", f"--base={b1}")
    top = "".join(f"top {i}\n" for i in range(5))
    up.commit("moved", {"a.txt": top + LINES})
    up.tag("b2")
    up.commit("clash", {"a.txt": top + LINES.replace("line 20\n", "line 20 upstream\n")})
    up.tag("b3")
    return write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1, b2]
        pins:
          - id: p
            patches: patches/p
    """)


def test_apply_json_written_and_refused(project, tmp_path):
    assert main(["apply", "-c", str(project), "--build", "b2", "--out", str(tmp_path / "tree"),
                 "--json", str(tmp_path / "a.json")]) == 0
    data = _round_trip(tmp_path / "a.json", "apply")
    assert (data["written"], data["applied"], data["build"]) == (True, ["p"], "b2")
    assert main(["apply", "-c", str(project), "--build", "b3", "--out", str(tmp_path / "tree3"),
                 "--json", str(tmp_path / "a3.json")]) == 1
    data = _round_trip(tmp_path / "a3.json", "apply")
    assert (data["ok"], data["written"], data["failed"]) == (False, False, ["p"])


def test_refresh_json_shown_then_written(project, tmp_path):
    assert main(["refresh", "-c", str(project), "--onto", "b2", "--json", str(tmp_path / "r.json")]) == 0
    data = _round_trip(tmp_path / "r.json", "refresh")
    assert data["outcome"] == "refreshed" and [r["pin"] for r in data["refreshed"]] == ["p"]
    assert data["refreshed"][0]["mode"] == "offset" and data["refreshed"][0]["patches"]
    assert main(["refresh", "-c", str(project), "--onto", "b2", "--write", "--json", str(tmp_path / "r.json")]) == 0
    assert _round_trip(tmp_path / "r.json", "refresh")["outcome"] == "written"
    assert main(["refresh", "-c", str(project), "--onto", "b3", "--json", str(tmp_path / "r3.json")]) == 1
    data = _round_trip(tmp_path / "r3.json", "refresh")
    assert (data["ok"], data["outcome"]) == (False, "blocked") and "p (required) on b3" in data["problems"][0]


def test_import_json(tmp_path):
    sha = "a" * 40
    source = tmp_path / "pr-set.json"
    source.write_text(json.dumps([f"https://github.com/ggml-org/llama.cpp/pull/7/commits/{sha}",
                                  {"url": f"https://github.com/ggml-org/llama.cpp/pull/8/commits/{'b' * 40}",
                                   "required": False}]))
    assert main(["import", str(source), "-o", str(tmp_path / "pins.yaml"), "--json", str(tmp_path / "i.json")]) == 0
    data = _round_trip(tmp_path / "i.json", "import")
    # Unsloth's "required": false is "skip once its PR is not open" (skip-unless-open), not pinset's "may fail"
    assert [(p["id"], p["kind"], p["required"], p["skip_unless_open"]) for p in data["pins"]] == [
        ("ggml-org#7", "pr", True, False), ("ggml-org#8", "pr", True, True)]
    assert data["out"] == str(tmp_path / "pins.yaml") and data["format"] == "pr-set"


def test_report_refuses_them_as_evidence(project, tmp_path, capsys):
    main(["apply", "-c", str(project), "--build", "b2", "--out", str(tmp_path / "tree"), "--json", str(tmp_path / "a.json")])
    assert main(["report", str(tmp_path / "a.json")]) == 2
    assert "an apply document; pinset report reads the results of sim" in capsys.readouterr().err


def test_schema_kind_prints_a_valid_schema(capsys):
    for kind in MODELS:
        assert main(["schema", "--kind", kind]) == 0
        jsonschema.Draft202012Validator.check_schema(json.loads(capsys.readouterr().out))
