"""`pinset bump --json` (issue 43): outcome, old and new build, branch, commit and pull request URL, as a
workflow step reads them; kind "bump" in the registry (pinset/results.py), each document made by the real
verb, valid against its JSON Schema (pinset/bump/model.py) and read back through its model."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pinset.bump import BumpResult
from pinset.bump.model import JSON_SCHEMA
from pinset.results import read_document
from tests.bump.test_bump import bump, git, project, push, remote_branch, sleeps  # noqa: F401
from tests.testing import without_start


def read(path) -> dict:
    data = json.loads(path.read_text())
    jsonschema.Draft202012Validator({"$schema": "https://json-schema.org/draft/2020-12/schema", **JSON_SCHEMA}) \
        .validate(data)
    doc, kind, schema, _ = read_document(path)
    assert (kind, schema) == ("bump", 1)
    assert BumpResult.from_json(doc).to_json() == without_start(data)
    return data


def test_pushed_with_its_pull_request(project, github, tmp_path, capsys):
    _, dist, origin = project
    out = tmp_path / "bump.json"
    assert push(dist, "--json", str(out)) == 0
    capsys.readouterr()
    data = read(out)
    assert data["outcome"] == "pushed" and data["ok"] is True
    assert (data["old"], data["new"], data["branch"]) == ("b1", "b3", "pinset/bump")
    assert data["commit"] == remote_branch(origin) and data["pushed"] and data["branch_moved"]
    assert data["pull_request"] == {"action": "created", "url": github.pulls[0]["html_url"]}
    assert [r["pin"] for r in data["refreshed"]] == ["p"] and data["held"] is None


def test_json_dash_is_stdout_alone(project, capsys):
    _, dist, _ = project
    assert bump(dist, "--json", "-") == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert data["outcome"] == "committed" and "pinset/bump at" in out.err


@pytest.mark.parametrize("case", ["blocked", "current", "held"])
def test_the_outcomes_that_move_nothing(project, github, tmp_path, capsys, case):
    _, dist, origin = project
    out = tmp_path / "bump.json"
    if case == "blocked":
        assert push(dist, "--onto", "b4", "--json", str(out)) == 1
    elif case == "current":
        assert bump(dist, "--onto", "b1", "--json", str(out)) == 0
    else:
        assert push(dist) == 0
        clone = tmp_path / "clone"
        git(tmp_path, "clone", "-q", "-b", "pinset/bump", str(origin), str(clone))
        git(clone, "commit", "-q", "--allow-empty", "-m", "a person's commit")
        git(clone, "push", "-q", "origin", "pinset/bump")
        assert push(dist, "--json", str(out)) == 1
    capsys.readouterr()
    data = read(out)
    assert data["outcome"] == case and data["ok"] is (case == "current")
    if case == "blocked":
        assert data["new"] == "b4" and data["failing"][0]["pin"] == "p" and data["commit"] is None
    if case == "held":
        assert data["held"]["branch"] == "origin's pinset/bump"
        assert data["held"]["commits"][0]["subject"] == "a person's commit"
        assert "--overwrite-branch" in data["held"]["hand_back"] and not data["pushed"]
