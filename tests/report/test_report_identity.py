"""The PR comment's identity (its marker, the pin set digest) does not change when only the runner labels of
`gpus:` change: a pin set moved to other runners updates its comment instead of starting a second one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.report.markdown import marker
from tests.testing import FIXTURES

FIX = FIXTURES / "report" / "pins"
BASE = (FIX / "pins.yaml").read_text()


def pins(tmp_path, name: str, gpus: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(FIX / "patches", folder / "patches")
    (folder / "pins.yaml").write_text(BASE + gpus)
    return folder / "pins.yaml"


FLOW = 'gpus:\n  h200: {runs-on: [self-hosted, h200], architectures: "90"}\n'
RELABELLED = [
    'gpus:\n  h200: {runs-on: [self-hosted, gpu-h200, big], architectures: "90"}\n',
    'gpus:\n  h200: {runs-on: h200-pool, architectures: "90"}\n',
    'gpus:\n  h200:\n    runs-on:\n      - self-hosted\n      - linux\n      - h200\n    architectures: "90"\n',
]


@pytest.mark.parametrize("other", RELABELLED)
def test_runner_labels_do_not_change_the_identity(tmp_path, other):
    first = load_pinset(pins(tmp_path, "a", FLOW))
    if other.startswith("gpus:\n  h200:\n"):  # block style: compare with the same layout
        first = load_pinset(pins(tmp_path, "a2", 'gpus:\n  h200:\n    runs-on:\n      - x\n    architectures: "90"\n'))
    second = load_pinset(pins(tmp_path, "b", other))
    assert first.gpus[0].runs_on != second.gpus[0].runs_on
    assert first.digest == second.digest and marker(first.digest) == marker(second.digest)


@pytest.mark.parametrize("changed", [
    'gpus:\n  h200: {runs-on: [self-hosted, h200], architectures: "90a"}\n',   # what is built
    'gpus:\n  h100: {runs-on: [self-hosted, h200], architectures: "90"}\n',    # which class
])
def test_what_is_verified_still_changes_it(tmp_path, changed):
    assert load_pinset(pins(tmp_path, "a", FLOW)).digest != load_pinset(pins(tmp_path, "b", changed)).digest


def test_a_pin_set_without_gpus_keeps_its_digest(tmp_path):
    """Result files written before keep matching: the fixture's results were made with this pins.yaml."""
    import json
    recorded = json.loads((FIX.parent / "green" / "sim.json").read_text())["pinset"]
    assert load_pinset(FIX / "pins.yaml").digest == recorded


def test_the_dry_run_marker_is_the_same_after_relabelling(tmp_path, capsys, monkeypatch):
    """Results made before the relabelling are still this pin set's, and the comment to update is the same."""
    import json
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    digest = load_pinset(pins(tmp_path, "first", FLOW)).digest
    results = []
    for src in sorted((FIX.parent / "green").glob("*.json")):
        doc = json.loads(src.read_text())
        doc["pinset"] = digest
        (tmp_path / src.name).write_text(json.dumps(doc))
        results.append(str(tmp_path / src.name))
    marks = []
    for name, gpus in (("a", FLOW), ("b", RELABELLED[0])):
        code = main(["report", *results, "-c", str(pins(tmp_path, name, gpus)), "--post", "o/r#1", "--dry-run"])
        out, err = capsys.readouterr()
        assert code in (0, 1), err
        marks.append(next(line for line in out.splitlines() if "<!-- pinset:" in line))
    assert marks[0] == marks[1] and digest in marks[0]
