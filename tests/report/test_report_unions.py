"""A union is verified, not trusted (issue 44): `report` never says "ready" on a pin applied by add/add unions
pinset made itself without a verify of that build whose CPU build passed (and, where the pin's files ask for a
CUDA device, whose GPU gates passed), and it shows every unioned hunk to the reviewer."""

from __future__ import annotations

import json
from pathlib import Path

from tests.report.test_evidence_rules import GREEN, report

UNION = {"file": "common/arg.cpp", "line": 120, "upstream": ["    case ARG_UP:"], "pin": ["    case ARG_MINE:"]}


def _files(tmp_path: Path, touched: list[str], cpu_build: str = "passed", gpu: bool = True) -> list[Path]:
    """The green scenario, its pin argsort-block-size applied on 0.3.35 by a union, touching `touched`."""
    doc = json.loads((GREEN / "sim.json").read_text())
    for b in doc["builds"]:
        for p in b["pins"]:
            p["touched"] = touched
            if p["id"] == "argsort-block-size" and b["build"].endswith("0.3.35"):
                p["apply_mode"], p["unions"] = "union", [UNION]
    (tmp_path / "sim.json").write_text(json.dumps(doc))
    files = [tmp_path / "sim.json"]
    for name in ("verify-cpu.json", *(["verify-h200.json"] if gpu else [])):
        verify = json.loads((GREEN / name).read_text())
        for b in verify["builds"]:
            for g in b["gates"]:
                if g["name"] == "cpu-build" and b["build"].endswith("0.3.35") and cpu_build != "passed":
                    g["status"], g["detail"] = cpu_build, "not run: stopped before it"
        (tmp_path / name).write_text(json.dumps(verify))
        files.append(tmp_path / name)
    return files


def test_a_verified_union_is_ready_and_every_hunk_is_shown(tmp_path):
    rc, doc, md = report(tmp_path, _files(tmp_path, ["common/arg.cpp"]))
    assert (rc, doc["outcome"]) == (0, "ready"), doc["verdict"]
    assert ("- **pypi:llama-cpp-python==0.3.35** `argsort-block-size`: `common/arg.cpp`:120: upstream added "
            "`case ARG_UP:`, the pin `case ARG_MINE:`") in md
    assert "applied (union at common/arg.cpp:120)" in md


def test_a_union_whose_build_no_cpu_gate_built_is_never_ready(tmp_path):
    rc, doc, _ = report(tmp_path, _files(tmp_path, ["common/arg.cpp"], cpu_build="not-run"))
    assert rc == 1 and doc["outcome"] != "ready"
    assert any("`argsort-block-size` applies by unions no person wrote (common/arg.cpp:120) but no verify built it"
               in line for line in doc["verdict"]["missing"]), doc["verdict"]


def test_a_union_in_cuda_code_needs_the_gpu_gates(tmp_path):
    rc, doc, _ = report(tmp_path, _files(tmp_path, ["ggml/src/ggml-cuda/argsort.cu"], gpu=False))
    assert rc == 1 and doc["outcome"] != "ready"
    assert any("in code for a CUDA device but no verify passed its GPU gates" in line
               for line in doc["verdict"]["missing"]), doc["verdict"]
