"""The typed sub-objects of the result models (pinset/result_parts.py, the kld and bench parts): what a file held
comes back key for key, what the models refused they still refuse, and readers get attributes."""

from __future__ import annotations

import json

import pytest

from pinset.errors import PinsetError
from pinset.measures.bench_model import BenchResult, BenchSide
from pinset.measures.kld_model import KldResult, KldVerdict, verdict_from_klds
from pinset.nightly.markdown import pick_markdown, why_text
from pinset.nightly.model import NOT_GREEN, PICKED, BuildPick, PickResult, Reason
from pinset.result_parts import GpuRecord, MachineRecord
from pinset.results import Doc
from pinset.verify.model import VerifyResult
from tests.testing import FIXTURES

GPU = {"name": "NVIDIA H200", "driver": "580.95.05", "compute_capability": "9.0", "memory_mib": 143771}


def _doc(value: dict, where: str = "verify.machine") -> Doc:
    return Doc(value, "f.json", where)


def test_an_older_machine_comes_back_with_its_own_keys_in_their_order():
    older = {"hostname": "h", "gpu": dict(GPU), "cuda_version": "12.4", "compiler": "c++ 12", "cmake": "3.25"}
    machine = MachineRecord.from_json(_doc(older))
    assert json.dumps(machine.to_json()) == json.dumps(older)
    assert machine.gpu_uuids is None and machine.ninja is None and machine.gpu.memory_mib == 143771


def test_keys_the_machine_does_not_name_are_kept_where_they_were():
    newer = {"hostname": "h", "gpu": {**GPU, "uuid": "GPU-1"}, "gpus": 2, "site": "lab", "cuda_version": None,
             "compiler": None, "cmake": None, "ninja": "1.11", "ccache": None, "gpu_uuids": ["GPU-1", "GPU-2"],
             "runner": {"name": "r1"}}
    machine = MachineRecord.from_json(_doc(newer))
    assert json.dumps(machine.to_json()) == json.dumps(newer)
    assert machine.gpus == 2 and machine.gpu_uuids == ("GPU-1", "GPU-2") and machine.rest == {"site": "lab"}
    assert machine.gpu.rest == {"uuid": "GPU-1"}


@pytest.mark.parametrize(("edit", "message"), [
    (lambda m: m.pop("hostname"), "verify.machine.hostname: missing"),
    (lambda m: m["gpu"].update(memory_mib="lots"), "verify.machine.gpu.memory_mib: expected an integer"),
    (lambda m: m["gpu"].pop("driver"), "verify.machine.gpu.driver: missing"),
    (lambda m: m.pop("cmake"), "verify.machine.cmake: missing"),
    (lambda m: m.update(gpu_uuids=[1]), "verify.machine.gpu_uuids[0]: expected a string"),
])
def test_a_damaged_machine_is_refused_naming_the_key(edit, message):
    machine = {"hostname": "h", "gpu": dict(GPU), "cuda_version": None, "compiler": None, "cmake": None}
    edit(machine)
    with pytest.raises(PinsetError, match=r"f\.json: " + message.replace("[", r"\[").replace("]", r"\]")):
        MachineRecord.from_json(_doc(machine))


def test_a_producer_machine_dict_becomes_the_typed_machine():
    result = VerifyResult("d", {"hostname": "h", "gpu": None}, [], False)
    assert isinstance(result.machine, MachineRecord) and result.machine_key == ("h", None, ())
    assert result.to_json()["machine"] == {"hostname": "h", "gpu": None}


def test_bench_gpu_and_sides_keep_what_the_model_always_kept():
    gpu = GpuRecord.name_driver(_doc({"name": "NVIDIA H200", "driver": "580", "uuid": "GPU-1"}, "bench.gpu"))
    assert gpu.to_json() == {"name": "NVIDIA H200", "driver": "580"}   # bench never kept the rest
    side = BenchSide.from_json(_doc({"model": "m.gguf", "build": "b", "commit": "c", "bin": "/x"}, "bench.base"))
    assert list(side.to_json()) == ["model", "build", "commit", "bin"] and side.model == "m.gguf"
    with pytest.raises(PinsetError, match="bench.base.commit: missing"):
        BenchSide.from_json(_doc({"build": "b"}, "bench.base"))


def test_the_recorded_bench_reads_as_parts():
    raw = json.loads((FIXTURES / "report" / "green" / "bench-h200.json").read_text())
    result = BenchResult.from_json(Doc(raw, "bench.json", "bench"))
    assert (result.base.build, result.head.build) == (raw["base"]["build"], raw["head"]["build"])
    assert result.gpu is not None and result.gpu.name == raw["gpu"]["name"]
    assert result.round_orders == [r["order"] for r in raw["round_log"]]
    if raw.get("decision"):
        assert result.decision is not None and result.decision.rule == raw["decision"]["rule"]


def test_kld_verdicts_write_the_keys_their_producer_wrote():
    assert KldVerdict.no_verdict("a KLD run failed").to_json() == {
        "text": "no verdict: a KLD run failed", "head_minus_base_kld": None, "sigma": None}
    v = verdict_from_klds(0.1, 0.01, 0.2, 0.01)
    assert v.text.startswith("further") and list(v.to_json()) == ["text", "head_minus_base_kld", "sigma", "sigmas"]


def test_the_recorded_kld_reads_as_parts():
    raw = json.loads((FIXTURES / "report" / "green" / "kld-h200.json").read_text())
    result = KldResult.from_json(Doc(raw, "kld.json", "kld"))
    assert result.reference.build == raw["reference"]["build"] and result.model.name == raw["model"]["name"]
    head, head_raw = result.run("head"), next(r for r in raw["runs"] if r["label"] == "head")
    assert head is not None and head.kld is not None and head.kld.mean == head_raw["kld"]["mean"]
    assert result.verdict.text == raw["verdict"]["text"]


def test_pick_renderers_read_the_model():
    row = BuildPick("b2", "c" * 40, PICKED, dropped=[Reason("opt", "conflict", required=False)],
                    resolved={"feat": ["r1", "r2"]})
    assert why_text(row) == ("dropped: pin opt (optional) conflicts with upstream; "
                             "pin feat applied by recorded resolution r1, r2")
    result = PickResult("d", "b2", [BuildPick("b3", "d" * 40, NOT_GREEN, [Reason("feat", "contract",
                                                                                  problems=["gone"])]), row])
    page = pick_markdown(result).splitlines()
    assert page[0] == "Base: picked **b2**. It ships without the optional pins `opt`."
    assert page[-2] == "| b3 | `dddddddddddd` | not green | pin feat broke its contract: gone |"
