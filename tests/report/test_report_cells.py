"""Cells of a CI matrix from several GPUs and machines merged into one report: one column per build x GPU
(told apart by GPU UUID and host), contradictions of one cell still refused, and every expected cell that
delivered nothing listed as not tested (never silently missing)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pinset.build.settings import build_settings
from pinset.checks.machine import host_identity, probe_machine
from pinset.checks.nvidia_smi import visible_indices
from pinset.cli import main
from pinset.config.schema import GpuClass, PinSet
from pinset.errors import ConfigError, PinsetError, ToolchainError
from pinset.report.merge import VerifyRun
from tests import regen_report_goldens as goldens
from tests.testing import fake_program

FIX = goldens.FIXTURES / "green"
B36, B35 = "pypi:llama-cpp-python==0.3.36", "pypi:llama-cpp-python==0.3.35"
UUID0, UUID1 = "GPU-5e3c1b0a-0000-1111-2222-333344445555", "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"


def load(name: str) -> dict:
    return json.loads((FIX / name).read_text())


def dump(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=2))
    return path


def cell_verify(tmp_path, name, uuid, *, host="h200x2", gpu_class="h200", build=B36, change=None) -> Path:
    """verify-h200.json as one matrix cell: one build, on one GPU of `host`, made with --gpu-class."""
    d = load("verify-h200.json")
    d["machine"] = {**d["machine"], "hostname": host, "gpu_uuids": [uuid], "runner": {"name": f"{host}-{uuid[4:8]}"}}
    d["builds"] = [b for b in d["builds"] if b["build"] == build]
    d["options"] = {"gpu_class": gpu_class}
    if change:
        change(d)
    return dump(tmp_path / f"{name}.json", d)


def others(tmp_path) -> list[Path]:
    return [FIX / "sim.json", FIX / "kld-h200.json", FIX / "bench-h200.json"]


def report(tmp_path, files, *extra) -> tuple[int, str]:
    out = tmp_path / "out.md"
    rc = main(["report", *map(str, files), *map(str, extra), "--markdown", str(out)])
    return rc, out.read_text() if out.exists() else ""


def matrix_json(tmp_path, cells) -> Path:
    include = [{"cell": f"{b} on {g}", "build": b, "gpu": g, "kinds": kinds, "runs-on": ["self-hosted", g]}
               for b, g, kinds in cells]
    return dump(tmp_path / "matrix.json", {"include": include})


def one_op_fewer(d):
    gate = next(g for g in d["builds"][0]["gates"] if g["name"] == "backend-ops")
    gate["ops"][0]["passed"] -= 1
    gate["ops"][0]["failures"] = ["MUL_MAT(type_a=iq1_m)"]
    gate["status"] = "failed"


def test_two_gpus_of_one_host_are_two_columns(tmp_path):
    a = cell_verify(tmp_path, "a", UUID0)
    b = cell_verify(tmp_path, "b", UUID1, change=one_op_fewer)  # the same build, another GPU, another answer
    rc, text = report(tmp_path, [*others(tmp_path), a, b])
    header = next(line for line in text.splitlines() if line.startswith("| gate |"))
    assert f"{B36} [h200] on NVIDIA H200 @h200x2 {UUID0[:12]}" in header
    assert f"{B36} [h200] on NVIDIA H200 @h200x2 {UUID1[:12]}" in header
    assert rc == 1 and "blocked" in text.splitlines()[3]  # GPU 1's failure is not hidden behind GPU 0's pass


def test_two_hosts_are_two_columns(tmp_path):
    a = cell_verify(tmp_path, "a", UUID0, host="runner-a")
    b = cell_verify(tmp_path, "b", UUID0.replace("5e3c", "7777"), host="runner-b", build=B35)
    c = cell_verify(tmp_path, "c", UUID1, host="runner-b")
    _, text = report(tmp_path, [*others(tmp_path), a, b, c])
    header = next(line for line in text.splitlines() if line.startswith("| gate |"))
    assert header.count(" on NVIDIA H200 @runner-") == 3


def test_two_classes_on_one_gpu_are_two_columns_and_fill_two_cells(tmp_path):
    # one H200 runner serving the cells of two GPU classes (an sm_90 and an sm_90a build of one tree)
    a = cell_verify(tmp_path, "a", UUID0)
    b = cell_verify(tmp_path, "b", UUID0, gpu_class="h200-sm90a", change=one_op_fewer)
    rc, text = report(tmp_path, [*others(tmp_path), a, b], "--expect",
                      matrix_json(tmp_path, [(B36, "h200", ["verify"]), (B36, "h200-sm90a", ["verify"])]))
    header = next(line for line in text.splitlines() if line.startswith("| gate |"))
    assert f"{B36} [h200] on NVIDIA H200" in header and f"{B36} [h200-sm90a] on NVIDIA H200" in header
    assert "on h200: no verify" not in text and "on h200-sm90a: no verify" not in text and rc == 1 and "blocked" in text.splitlines()[3]


def test_one_cell_twice_with_different_answers_is_refused(tmp_path, capsys):
    a = cell_verify(tmp_path, "a", UUID0)
    again = cell_verify(tmp_path, "again", UUID0, change=one_op_fewer)
    assert main(["report", *map(str, [*others(tmp_path), a, again])]) == 2
    err = capsys.readouterr().err
    assert "/a.json" in err and "/again.json" in err and "disagree" in err and len(err.strip().splitlines()) == 1


def test_kld_of_two_gpus_is_two_studies_not_a_contradiction(tmp_path):
    k0, k1 = load("kld-h200.json"), load("kld-h200.json")
    k0["host"] = {"hostname": "h200x2", "gpu_uuids": [UUID0], "runner": None, "gpu_class": "h200"}
    k1["host"] = {"hostname": "h200x2", "gpu_uuids": [UUID1], "runner": None, "gpu_class": "h200"}
    k1["runs"][1]["kld"]["mean"] *= 1.01
    files = [FIX / "sim.json", FIX / "bench-h200.json", FIX / "verify-h200.json",
             dump(tmp_path / "k0.json", k0), dump(tmp_path / "k1.json", k1)]
    rc, text = report(tmp_path, files)
    assert text.count("**KLD vs CPU reference**") == 2
    assert f"h200x2, GPU {UUID1[:12]}" in text



@pytest.mark.parametrize("kind", ["kld", "bench"])
def test_kld_and_bench_of_two_classes_on_one_gpu_are_two_results(tmp_path, kind):
    """One H200 serving the cells of two GPU classes (an sm_90 and an sm_90a build): their numbers differ and
    are two results, each filling its own cell, not one result contradicting itself (exit 2)."""
    a, b = _host(load(f"{kind}-h200.json")), _host(load(f"{kind}-h200.json"), "h200-sm90a")
    if kind == "kld":
        b["runs"][1]["kld"]["mean"] *= 1.01
    else:
        b["rows"][0]["ratio"] *= 1.01
    files = [FIX / "sim.json", cell_verify(tmp_path, "v1", UUID0), cell_verify(tmp_path, "v2", UUID0, gpu_class="h200-sm90a"),
             FIX / ("bench-h200.json" if kind == "kld" else "kld-h200.json"),
             dump(tmp_path / "a.json", a), dump(tmp_path / "b.json", b)]
    expect = matrix_json(tmp_path, [(B36, "h200", ["verify", kind]), (B36, "h200-sm90a", ["verify", kind])])
    rc, text = report(tmp_path, files, "--expect", expect)
    assert rc in (0, 1) and "cell " not in text.splitlines()[3], text.splitlines()[3]
    assert "(cell of GPU class h200)" in text and "(cell of GPU class h200-sm90a)" in text
    # the same class twice with different numbers is still one cell contradicting itself
    b["host"]["gpu_class"] = "h200"
    assert main(["report", *map(str, files[:-1]), str(dump(tmp_path / "b.json", b))]) == 2

def test_expected_cell_without_result_is_not_tested_and_not_ready(tmp_path):
    a = cell_verify(tmp_path, "a", UUID0)
    full = [*others(tmp_path), FIX / "verify-h200.json", a]
    rc, _ = report(tmp_path, full, "--expect", matrix_json(tmp_path, [(B36, "h200", ["verify"])]))
    assert rc == 0  # every expected cell delivered
    expect = matrix_json(tmp_path, [(B36, "h200", ["verify"]), (B35, "h200", ["verify"]), (B36, "a100", ["verify", "kld"])])
    rc, text = report(tmp_path, full, "--expect", expect, "--json", tmp_path / "r.json")
    assert rc == 1
    verdict = json.loads((tmp_path / "r.json").read_text())
    assert verdict["outcome"] == "not enough evidence"
    assert f"cell {B35} on h200: no verify result" in text
    assert f"cell {B36} on a100: no verify, kld result" in text
    not_tested = text.split("### Not tested")[1]
    assert f"- cell {B35} on h200: no verify result" in not_tested


def test_a_verify_from_outside_the_matrix_fills_no_cell(tmp_path):
    # verify-h200.json has both builds on an H200 but was not made as a cell of GPU class h200
    rc, text = report(tmp_path, [*others(tmp_path), FIX / "verify-h200.json"],
                      "--expect", matrix_json(tmp_path, [(B36, "h200", ["verify"])]))
    assert rc == 1 and f"cell {B36} on h200: no verify result" in text



def _no_cuda_code(tmp_path) -> Path:
    """green's sim with pins that touch no CUDA code: CPU evidence is enough for the pins themselves."""
    sim = load("sim.json")
    for b in sim["builds"]:
        for p in b["pins"]:
            p["touched"] = ["ggml/src/ggml-cpu/ops.cpp"]
    sim["builds"] = [b for b in sim["builds"] if b["build"] == B36]
    return dump(tmp_path / "sim.json", sim)


def _cpu_gates(d):
    """B36 as `pinset verify` without --cuda writes it: the GPU gates not requested."""
    d["builds"] = [b for b in load("verify-cpu.json")["builds"] if b["build"] == B36]


def _on_cpu(d):
    _cpu_gates(d)
    d["machine"] = {**load("verify-cpu.json")["machine"], "gpu_uuids": []}


def _host(d, gpu_class="h200"):
    d["host"] = {"hostname": "h200x2", "gpu_uuids": [UUID0], "runner": None, "gpu_class": gpu_class}
    return d


@pytest.mark.parametrize("what", ["verify on a CPU machine", "verify without GPU gates", "verify on an A100",
                                  "kld on the CPU", "bench on the CPU"])
def test_a_result_that_did_not_run_on_the_cells_gpu_fills_no_cell(tmp_path, what):
    """A file made as cell `h200` (--gpu-class h200) that ran on the CPU or on a GPU outside the class's
    architectures is no evidence from that cell: with every other cell delivered, the report is not ready."""
    change = {"verify on a CPU machine": _on_cpu, "verify without GPU gates": _cpu_gates,
              "verify on an A100": lambda d: d["machine"]["gpu"].update(name="NVIDIA A100", compute_capability="8.0")}
    verify = cell_verify(tmp_path, "v", UUID0, change=change.get(what))
    kld, bench = _host(load("kld-h200.json")), _host(load("bench-h200.json"))
    if what == "kld on the CPU":
        for r in kld["runs"]:
            r["backend"], r["devices"] = "CPU", []
    if what == "bench on the CPU":
        bench["gpu"] = None
    expect = matrix_json(tmp_path, [(B36, "h200", ["verify", "kld", "bench"])])
    doc = json.loads(expect.read_text())
    doc["include"][0]["architectures"] = "90"
    dump(expect, doc)
    files = [_no_cuda_code(tmp_path), verify, dump(tmp_path / "k.json", kld), dump(tmp_path / "b.json", bench)]
    rc, text = report(tmp_path, files, "--expect", expect)
    line = text.splitlines()[3]
    assert rc == 1 and line.startswith("**⏳ not enough evidence:**"), line
    kind = what.split()[0]
    assert f"cell {B36} on h200: no result from a GPU of the class ({kind} " in line
    # the same files, each really from the cell's GPU, are ready: the test above can pass
    clean = [_no_cuda_code(tmp_path), cell_verify(tmp_path, "v", UUID0), dump(tmp_path / "k.json", _host(load("kld-h200.json"))),
             dump(tmp_path / "b.json", _host(load("bench-h200.json")))]
    rc, text = report(tmp_path, clean, "--expect", expect)
    assert rc == 0, text.splitlines()[3]


def test_a_matrix_nested_too_deeply_is_one_line_exit_2(tmp_path, capsys):
    deep = tmp_path / "m.json"
    deep.write_text('{"include": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert main(["report", str(FIX / "sim.json"), "--expect", str(deep)]) == 2
    err = capsys.readouterr().err
    assert "m.json: not a pinset matrix (nested too deeply)" in err and len(err.strip().splitlines()) == 1

def test_expected_cell_blocked_run_lists_it_once(tmp_path):
    a = cell_verify(tmp_path, "a", UUID0, change=one_op_fewer)
    rc, text = report(tmp_path, [*others(tmp_path), a], "--expect",
                      matrix_json(tmp_path, [(B36, "h200", ["verify"]), (B35, "h200", ["verify"])]))
    assert rc == 1 and text.count(f"cell {B35} on h200: no verify result") == 1


@pytest.mark.parametrize("doc, expected", [
    ("[]", "matrix: expected an object"),
    ('{"include": [{"cell": "x", "build": "b", "gpu": "g", "kinds": ["perf"]}]}', "matrix.include[0].kinds"),
    ('{"include": [{"cell": "x", "gpu": "g", "kinds": ["verify"]}]}', "matrix.include[0].build: missing"),
    ("not json", "not a JSON matrix file"),
])
def test_bad_expect_file_is_exit_2(tmp_path, capsys, doc, expected):
    bad = tmp_path / "m.json"
    bad.write_text(doc)
    assert main(["report", str(FIX / "sim.json"), "--expect", str(bad)]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1


def test_matrix_of_another_pin_set_is_refused(tmp_path, capsys):
    m = matrix_json(tmp_path, [(B36, "h200", ["verify"])])
    doc = json.loads(m.read_text())
    doc["include"][0]["pinset"] = "0123456789abcdef"
    dump(m, doc)
    assert main(["report", str(FIX / "sim.json"), "--expect", str(m)]) == 2
    assert "a matrix of another run" in capsys.readouterr().err



@pytest.mark.parametrize("key, value, expected", [
    ("gpu_class", ["h200"], "verify.options.gpu_class: expected a string or null"),
    ("gpu_class", {"a": 1}, "verify.options.gpu_class: expected a string or null"),
    ("gpu_uuids", [["GPU-1"]], "verify.machine.gpu_uuids[0]: expected a string"),
    ("gpu_uuids", "GPU-1", "verify.machine.gpu_uuids: expected a list"),
])
def test_cell_identity_of_the_wrong_type_is_one_line_exit_2(tmp_path, capsys, key, value, expected):
    """What tells cells apart (GPU class, GPU UUIDs) is checked like every key: a list where a name belongs was
    a traceback (unhashable) when the runs were merged."""
    def damage(d):
        (d["options"] if key == "gpu_class" else d["machine"])[key] = value
    bad = cell_verify(tmp_path, "bad", UUID0, change=damage)
    assert main(["report", str(FIX / "sim.json"), str(bad)]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1, err

def test_older_files_without_uuids_still_read(tmp_path):
    rc, text = report(tmp_path, sorted(FIX.glob("*.json")))
    assert rc == 0 and "NVIDIA H200" in text


# --- the GPU a result ran on --------------------------------------------------------------
SMI = f"""#!/bin/sh
# stands in for nvidia-smi on a machine with an A6000 (index 0) and an H200 (index 1); like the real one it
# lists every GPU whatever CUDA_VISIBLE_DEVICES says
case "$*" in
  *index,uuid*) echo "0, {UUID0}"; echo "1, {UUID1}";;
  *compute_cap,*) echo "NVIDIA RTX A6000, 580.1, 8.6, 49140"; echo "NVIDIA H200, 580.1, 9.0, 143771";;
  *compute_cap*) echo "8.6"; echo "9.0";;
  *) exit 1;;
esac
"""


@pytest.fixture
def two_gpus(tmp_path, monkeypatch):
    fake_program(tmp_path / "smi", "nvidia-smi", SMI)
    monkeypatch.setenv("PATH", f"{tmp_path / 'smi'}{os.pathsep}{os.environ['PATH']}")
    for var in ("CUDA_VISIBLE_DEVICES", "RUNNER_NAME", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_JOB",
                "GITHUB_REPOSITORY"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_verify_names_the_gpu_of_its_backend(two_gpus):
    """`verify --cuda --backend CUDA1` runs its GPU gates on the second visible GPU: the result names that GPU
    (its name is what the backend-ops gate's device must match), not the first."""
    from pinset.commands.verify import on_backend

    machine = probe_machine()
    assert on_backend(machine, "CUDA0").gpu.name == "NVIDIA RTX A6000"
    assert on_backend(machine, "CUDA1").gpu.name == "NVIDIA H200"
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert on_backend(probe_machine(), "CUDA1").gpu.name == "NVIDIA RTX A6000"
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "1")   # no CUDA1: the gate itself fails (backend not found)
    assert on_backend(probe_machine(), "CUDA1").gpu.name == "NVIDIA H200"


@pytest.mark.parametrize("visible, name, uuids", [
    (None, "NVIDIA RTX A6000", [UUID0, UUID1]),
    ("1", "NVIDIA H200", [UUID1]),
    ("1,0", "NVIDIA H200", [UUID1, UUID0]),
    (UUID1[:12], "NVIDIA H200", [UUID1]),
    ("0", "NVIDIA RTX A6000", [UUID0]),
    ("", None, []),
    ("2,0", None, []),  # as in CUDA: an entry that names no GPU hides it and every later one
])
def test_the_visible_gpu_is_recorded_by_uuid(two_gpus, visible, name, uuids):
    if visible is not None:
        two_gpus.setenv("CUDA_VISIBLE_DEVICES", visible)
    machine = probe_machine().to_json()
    assert (machine["gpu"] or {}).get("name") == name
    assert machine["gpu_uuids"] == uuids and machine["gpus"] == len(uuids)
    if name:
        assert machine["gpu"]["uuid"] == uuids[0]
    assert machine["runner"] is None


def test_runner_and_host_are_recorded(two_gpus):
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "1")
    two_gpus.setenv("RUNNER_NAME", "gpu-runner-7")
    two_gpus.setenv("GITHUB_RUN_ID", "123456")
    host = host_identity()
    assert host["gpu_uuids"] == [UUID1] and host["hostname"]
    assert host["runner"] == {"name": "gpu-runner-7", "run_id": "123456"}


def test_visible_indices_never_invent_a_gpu():
    ids = [(0, UUID0), (1, UUID1)]
    assert visible_indices(ids, "1,1") == [1]           # a duplicate stops the list
    assert visible_indices(ids, "GPU-") == []           # a prefix of both names neither
    assert visible_indices(ids, " 1 , 0") == [1, 0]


# --- a cell's GPU class sets its architectures and must match the GPU --------------------
def a_pinset(**kw) -> PinSet:
    return PinSet(Path("pins.yaml"), None, ("v1",), (), kw.get("arch"),
                  gpus=(GpuClass("h200", ("self-hosted", "h200"), "90"), GpuClass("a6000", ("a6000",), "86")))


def test_gpu_class_architectures_are_built(two_gpus):
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "1")
    settings = build_settings(a_pinset(arch="80;86;90"), cuda=True, gpu_hint="x", gpu_class="h200")
    assert settings.cuda_architectures == "90"


def test_gpu_class_on_the_wrong_gpu_is_refused(two_gpus):
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "0")  # the A6000: an h200 cell must not claim it
    with pytest.raises(ToolchainError, match="GPU class h200 builds for CUDA architectures 90, but this machine's "
                                             "visible GPU is 86"):
        build_settings(a_pinset(), cuda=True, gpu_hint="x", gpu_class="h200")
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert build_settings(a_pinset(), cuda=True, gpu_hint="x", gpu_class="a6000").cuda_architectures == "86"


def test_arch_specific_class_covers_its_gpu(two_gpus):
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "1")
    ps = PinSet(Path("pins.yaml"), None, ("v1",), (), None, gpus=(GpuClass("h200-sm90a", ("h200",), "90a"),))
    settings = build_settings(ps, cuda=True, gpu_hint="x", gpu_class="h200-sm90a")
    assert settings.cuda_architectures == "90a" and settings.coverage_warning() is None
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(ToolchainError, match="visible GPU is 86"):
        build_settings(ps, cuda=True, gpu_hint="x", gpu_class="h200-sm90a")


@pytest.mark.parametrize("arch", ["90-real", "90-virtual", "86-real;90-real", "native", "all", "all-major"])
def test_cmake_architecture_spellings_cover_their_gpu(two_gpus, arch):
    """pins.yaml takes CMake's spellings (-real, -virtual, native, all, all-major): a class written so is
    neither refused on its own GPU nor told its GPU's code was not built (verify's not-tested item), and
    a report does not file its verify as off the class's GPU."""
    from pinset.report.verdict import _verify_off_gpu

    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "1")   # the H200, 9.0
    ps = PinSet(Path("pins.yaml"), None, ("v1",), (), None, gpus=(GpuClass("h200", ("h200",), arch),))
    settings = build_settings(ps, cuda=True, gpu_hint="x", gpu_class="h200")
    assert settings.coverage_warning() is None
    from pinset.result_parts import GpuRecord, MachineRecord
    from pinset.verify.model import BuildVerification, GateResult

    assert _verify_off_gpu(VerifyRun(MachineRecord("h", GpuRecord("NVIDIA H200", "", "9.0")), (),
                                     BuildVerification("b", "c", [], [GateResult("backend-ops", "passed")]), []),
                           arch) is None


def test_real_architectures_still_tell_another_gpu(two_gpus):
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "0")   # the A6000, 8.6
    ps = PinSet(Path("pins.yaml"), None, ("v1",), (), None, gpus=(GpuClass("h200", ("h200",), "90-real"),))
    with pytest.raises(ToolchainError, match="visible GPU is 86"):
        build_settings(ps, cuda=True, gpu_hint="x", gpu_class="h200")


def test_gpu_class_unknown_or_without_cuda_is_bad_input(two_gpus):
    with pytest.raises(ConfigError, match="no GPU class 'b200' .known: h200, a6000."):
        build_settings(a_pinset(), cuda=True, gpu_hint="x", gpu_class="b200")
    with pytest.raises(PinsetError, match="needs a run on the GPU"):
        build_settings(a_pinset(), cuda=False, gpu_hint="x", gpu_class="h200")


# --- kld and bench record where they ran -----------------------------------------------------
@pytest.mark.parametrize("name", ["kld-h200.json", "bench-h200.json"])
def test_host_of_kld_and_bench_is_read_back_and_checked(tmp_path, capsys, name):
    from pinset.report.load import load_result

    d = load(name)
    host = {"hostname": "h200x2", "gpu_uuids": [UUID1], "runner": {"name": "r1", "run_id": "9"}, "gpu_class": "h200"}
    assert load_result(dump(tmp_path / "ok.json", {**d, "host": host})).data["host"] == host
    assert "host" not in load_result(FIX / name).data  # older files: no host, nothing invented
    bad = dump(tmp_path / "bad.json", {**d, "host": {**host, "gpu_uuids": "GPU-1"}})
    assert main(["report", str(bad)]) == 2
    assert f"{d['kind']}.host.gpu_uuids: expected a list" in capsys.readouterr().err


@pytest.mark.parametrize("verb", ["verify", "kld", "bench"])
def test_cell_on_the_wrong_gpu_is_one_line_exit_2_before_any_build(two_gpus, tmp_path, capsys, verb):
    from tests.testing import write_pins

    series = tmp_path / "patches" / "s"
    series.mkdir(parents=True)
    (series / "0001-x.patch").write_text("From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\ndiff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n")
    cfg = write_pins(tmp_path / "pins.yaml", """
        builds: [pypi:llama-cpp-python==0.3.36]
        gpus: {h200: {runs-on: [self-hosted, h200], architectures: "90"}}
        pins: [{id: p, patches: patches/s}]
    """)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    two_gpus.setenv("CUDA_VISIBLE_DEVICES", "0")  # the A6000
    argv = {"verify": ["verify", "-c", str(cfg), "--cuda"],
            "kld": ["kld", "-c", str(cfg), "-m", str(model)],
            "bench": ["bench", "-c", str(cfg), "-m", str(model)]}[verb]
    assert main([*argv, "--gpu-class", "h200"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"pinset {verb}: error: GPU class h200 builds for CUDA architectures 90, but this machine's "
                   "visible GPU is 86 (check the runner's labels or CUDA_VISIBLE_DEVICES)"]
    assert not (tmp_path / "cache" / "builds").exists()
    if verb == "verify":
        assert main(["verify", "-c", str(cfg), "--gpu-class", "h200"]) == 2
        assert "a GPU class needs a run on the GPU" in capsys.readouterr().err
    else:
        assert main([verb, "--head-bin", str(tmp_path), "--base-bin", str(tmp_path), "-m", str(model),
                     "--gpu-class", "h200"]) == 2
        assert "give -c/--build, not --base-bin/--head-bin" in capsys.readouterr().err


from hypothesis import given, strategies as st  # noqa: E402


@given(st.lists(st.sampled_from(["0", "1", "2", " 1", UUID0[:9], UUID1, "GPU-", "MIG-x", "-1", "", "x"]), max_size=5))
def test_visible_indices_are_real_distinct_gpus_in_the_order_named(entries):
    ids = [(0, UUID0), (1, UUID1)]
    chosen = visible_indices(ids, ",".join(entries))
    assert len(set(chosen)) == len(chosen) and set(chosen) <= {0, 1}
    assert len(chosen) <= len(entries)
