"""The matrix kind's model (pinset/matrix/model.py): the verb writes `MatrixResult.to_json()`, and
`from_json` reads it back whole, refusing a cell without a known kind in one line naming the key."""

from __future__ import annotations

import json

import pytest

from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.errors import PinsetError
from pinset.matrix.model import MatrixResult
from pinset.results import Doc
from pinset.sim.model import BuildResult, PinResult, SimResult
from tests.testing import write_pins

B36 = "pypi:llama-cpp-python==0.3.36"
PATCH = ("From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\ndiff --git a/a.txt b/a.txt\n--- a/a.txt\n"
         "+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n")


def written_matrix(tmp_path, capsys) -> dict:
    (tmp_path / "patches" / "s").mkdir(parents=True)
    (tmp_path / "patches" / "s" / "0001-x.patch").write_text(PATCH)
    cfg = write_pins(tmp_path / "pins.yaml", f"builds: [{B36}]\ngpus:\n  h200: {{runs-on: [self-hosted, h200], "
                     "architectures: \"90\"}\n  a100: {runs-on: gpu-a100, architectures: \"80\"}\n"
                     "pins:\n  - id: p\n    patches: patches/s\n")
    sim = tmp_path / "sim.json"
    sim.write_text(json.dumps(SimResult([BuildResult(B36, "0c1e57098", [PinResult("p", "applied", True)])],
                                        load_pinset(cfg).digest).to_json()))
    assert main(["matrix", "-c", str(cfg), "--sim", str(sim), "--kld-model", "/m/a b.gguf"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_written_matrix_reads_back_to_the_same_bytes(tmp_path, capsys):
    doc = written_matrix(tmp_path, capsys)
    result = MatrixResult.from_json(Doc(doc, "matrix.json", "matrix"))
    assert [c.cell for c in result.cells] == [f"{B36} on h200", f"{B36} on a100"]
    assert [c.kinds for c in result.cells] == [["verify", "kld"]] * 2
    assert result.cells[0].runs_on == ["self-hosted", "h200"] and result.cells[0].architectures == "90"
    assert result.to_json() == doc and list(doc) == ["include"]


@pytest.mark.parametrize("kinds, says", [([], "none"), (["verify", "lint"], "lint")])
def test_a_cell_without_a_known_kind_is_refused_naming_the_key(tmp_path, capsys, kinds, says):
    doc = written_matrix(tmp_path, capsys)
    doc["include"][1]["kinds"] = kinds
    with pytest.raises(PinsetError) as exc:
        MatrixResult.from_json(Doc(doc, "m.json", "matrix"))
    assert str(exc.value) == (f"m.json: matrix.include[1].kinds: expected a non-empty list of verify, kld, bench "
                              f"(got {says})")
