"""`pinset report` reads every result file pinset writes, failure paths included, and its verdict never claims
more than was measured: ready / blocked / not enough evidence, CUDA code needs evidence from a CUDA device.

Failure files are made by the real producers: `pinset verify` and `pinset sim` on real git repositories (a fake
`cmake` injects the failed build), `kld_document` from captured llama-perplexity output of a failed KLD step,
`run_rounds`/`bench_result` with a fake `llama-bench` (failing, or replaying captured output).
"""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.measures.bench_analysis import bench_result
from pinset.measures.bench_render import bench_markdown, row_speeds
from pinset.measures.bench_run import run_rounds
from pinset.measures.kld import DeviceRun, Reference, kld_document
from pinset.measures.perplexity import kld_problem, parse_perplexity
from pinset.measures.sides import Side
from pinset.output import write_json
from pinset.report.load import MODELS, load_result
from pinset.report.model import ReportResult
from pinset.results import read_document
from pinset.sim.model import BuildResult, PinResult, SimResult
from pinset.verify.model import GATES, GPU_GATES, BuildVerification, GateResult, VerifyResult
from tests.testing import FIXTURES, ROOT, one_patch, one_pin_yaml, without_start, write_pins
from tests.testing.report import dump, load, report

FIX = FIXTURES
REPORT = FIX / "report"
GREEN = REPORT / "green"
BUILD, COMMIT = "pypi:llama-cpp-python==0.3.36", "0c1e57098"


def green(tmp_path, **swap: Path) -> list[Path]:
    """The green scenario's files with some replaced, by stem (kld-h200=..., sim=...)."""
    files = {p.stem: p for p in sorted(GREEN.glob("*.json"))}
    files.update(swap)
    return [p for p in files.values() if p is not None]


def first_line(text: str) -> str:
    return text.splitlines()[3]


# --- kld: a failed run, numbers that could not be measured -----------------------------------------
def _device_run(label: str, fixture: str, backend: str, pinset: str | None = None) -> DeviceRun:
    out = parse_perplexity((FIX / "perplexity" / f"{fixture}.stdout").read_text(),
                           (FIX / "perplexity" / f"{fixture}.stderr").read_text())
    side = Side(label, BUILD, COMMIT, Path("/nonexistent"), None, pinset)
    return DeviceRun(label, side, backend, out, 0, kld_problem(out, 0), 2.0)


def _kld_file(tmp_path, base: DeviceRun, head: DeviceRun, name="kld.json") -> Path:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    text = tmp_path / "t.txt"
    text.write_text("x")
    ref = Reference(tmp_path / "logits.bin", parse_perplexity("", ""), True, "k", BUILD, COMMIT)
    path = tmp_path / name
    write_json(path, kld_document(model, text, 256, 3, ref, [base, head]))
    return path


def test_failed_kld_step_is_a_blocker_not_a_refusal(tmp_path):
    """llama-perplexity exits 0 but gave up on the KLD: the producer writes nulls; the report names the run."""
    path = _kld_file(tmp_path, _device_run("base", "kld-iq1m-vs-f16", "CUDA0"),
                     _device_run("head", "kld-bad-base-file", "CUDA0"))
    doc = load(path)
    assert doc["runs"][1]["kld"] is None and doc["verdict"]["sigma"] is None  # what the producer really writes
    rc, text = report(green(tmp_path, **{"kld-h200": path}), tmp_path)
    assert rc == 1
    assert first_line(text).startswith("**❌ blocked:** KLD run head (pypi:llama-cpp-python==0.3.36, CUDA0) on m.gguf "
                                       "failed: ")
    assert "| head | pypi:llama-cpp-python==0.3.36 (`0c1e57098`) | CUDA0 | — | — | — |" in text
    assert "Verdict: no verdict: a KLD run failed." in text


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None])
def test_kld_numbers_that_are_not_measurements_fail_the_run(tmp_path, bad):
    data = load(GREEN / "kld-h200.json")
    data["runs"][1]["kld"]["mean"] = bad
    path = tmp_path / "kld.json"
    path.write_text(json.dumps(data))  # json writes NaN / Infinity as pinset's write_json would
    rc, text = report(green(tmp_path, **{"kld-h200": path}), tmp_path)
    assert rc == 1 and "ready to ship" not in text
    assert first_line(text) == "**❌ blocked:** KLD run head (pypi:llama-cpp-python==0.3.36, CUDA0) on " \
                               "Llama-3.2-1B-Instruct-IQ1_M.gguf failed: no mean KLD in the result"


def test_bench_row_without_its_numbers_claims_nothing(tmp_path):
    """A "faster" row whose ratio or CI is NaN/null is read as "insufficient data", not as faster."""
    data = load(GREEN / "bench-h200.json")
    data["rows"][0]["ci95"] = [float("nan"), 1.7]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    rc, text = report(green(tmp_path, **{"bench-h200": path}), tmp_path)
    assert rc == 1 and "speed of pp512 on NVIDIA H200 (Llama-3.2-1B-Instruct-IQ1_M.gguf): insufficient data" in text
    assert "pp512 1.630× (insufficient data)" in text


def test_kld_verdict_without_its_numbers_is_not_ok(tmp_path):
    data = load(GREEN / "kld-h200.json")
    data["verdict"]["head_minus_base_kld"] = float("nan")
    path = tmp_path / "kld.json"
    path.write_text(json.dumps(data))
    rc, text = report(green(tmp_path, **{"kld-h200": path}), tmp_path)
    assert rc == 1 and "**❌ blocked:** kld reported not ok (kld.json)" in text


# --- bench: failed llama-bench runs, insufficient data ------------------------------------------------
def _fake_llama_bench(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "llama-bench"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return folder


# the command line cpu-tiny-moe-iq1m.jsonl was captured with (tests/fixtures/README-llama-bench.md)
CAPTURED_ARGS = ["-t", "2", "-p", "64,128", "-n", "16", "-ub", "64,128", "-b", "128", "-ngl", "0"]


def _bench_file(tmp_path, bin_dir: Path, rounds: int, pinset: str | None = None) -> Path:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    base = Side("base", BUILD, COMMIT, bin_dir, None, pinset)
    head = Side("head", BUILD, COMMIT, bin_dir, None, pinset)
    recorded = run_rounds(base, head, {"base": model, "head": model}, CAPTURED_ARGS, rounds=rounds, repetitions=2,
                          cpu=True)
    path = tmp_path / "bench.json"
    write_json(path, bench_result({"base": model, "head": model}, CAPTURED_ARGS, [r.record() for r in recorded], 2,
                                  base, head).to_json())
    return path



def test_kld_and_bench_of_another_pin_set_are_refused(tmp_path, capsys):
    """kld and bench record the digest of the pin set their head tree was built from; evidence measured on
    another pin set (an older pins.yaml, other patches) is refused like a sim or verify of one (exit 2)."""
    ours = load(GREEN / "sim.json")["pinset"]
    capture = FIX / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl"
    for digest, refused in ((ours, False), ("0123456789abcdef", True)):
        kld = _kld_file(tmp_path, _device_run("base", "kld-iq1m-vs-f16", "CUDA0", digest),
                        _device_run("head", "kld-iq1m-vs-f16", "CUDA0", digest))
        bench = _bench_file(tmp_path, _fake_llama_bench(tmp_path / "bin", f"cat '{capture}'\n"), 3, digest)
        assert load(kld)["pinset"] == digest and load(bench)["pinset"] == digest
        for name, path in (("kld-h200", kld), ("bench-h200", bench)):
            rc, _ = report(green(tmp_path, **{name: path}), tmp_path)
            err = capsys.readouterr().err
            assert (rc == 2) == refused, err
            if refused:
                assert "are results of different pin sets" in err and path.name in err
    # explicit --base-bin/--head-bin folders: no pin set to name, nothing recorded
    assert "pinset" not in load(_kld_file(tmp_path, _device_run("base", "kld-iq1m-vs-f16", "CUDA0"),
                                          _device_run("head", "kld-iq1m-vs-f16", "CUDA0")))

def test_failed_llama_bench_runs_block(tmp_path):
    bin_dir = _fake_llama_bench(tmp_path / "bin", "echo 'main: error: failed to load model' >&2\nexit 1\n")
    path = _bench_file(tmp_path, bin_dir, rounds=3)
    doc = load(path)
    assert doc["ok"] is False and doc["rows"] == []
    rc, text = report(green(tmp_path, **{"bench-h200": path}), tmp_path)
    assert rc == 1
    assert "llama-bench failed on CPU (m.gguf): round 0 base: llama-bench exit 1: main: error: failed to load model" \
        in first_line(text)
    assert "(and 5 more failed runs)" in first_line(text)
    assert "**Speed (m.gguf; device: CPU — no evidence for a CUDA path):** head/base no result (every run failed)." in text


def test_bench_with_insufficient_data_is_not_enough_evidence(tmp_path):
    """Two rounds: one warm-up, one kept: every row says "insufficient data" with null ratio and CI."""
    capture = FIX / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl"
    path = _bench_file(tmp_path, _fake_llama_bench(tmp_path / "bin", f"cat '{capture}'\n"), rounds=2)
    doc = load(path)
    assert {r["verdict"] for r in doc["rows"]} == {"insufficient data"} and doc["rows"][0]["ratio"] is None
    rc, text = report(green(tmp_path, **{"bench-h200": path}), tmp_path)
    assert rc == 1 and "blocked" not in first_line(text)
    assert first_line(text).startswith("**⏳ not enough evidence:** ")
    assert "`argsort-block-size`; speed of pp64 ub 64, " in first_line(text)
    assert "tg16 ub 128 on CPU (m.gguf): insufficient data" in first_line(text)
    assert "| pp64 ub 64 | **" in text and "| — | — | — | — | ❔ insufficient data |" in text


# --- verify: a failed build, a stopped verify (the real producer) -------------------------------------
@pytest.fixture
def small_pins(tmp_path, make_repo):
    up = make_repo("upstream")
    up.commit("v1", {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.14)\nproject(x C)\n",
                     "ggml/src/ggml.c": "/* no types */\n", "src/a.c": "int a;\n"})
    up.tag("v1")
    one_patch(make_repo("work"), tmp_path / "patches" / "p",
              {"src/a.c": "int a;\n"}, {"src/a.c": "int a = 1;\n"}, "pin")
    other = make_repo("other")
    other.commit("base", {"src/a.c": "something else\n"})
    other.commit("pin", {"src/a.c": "something else, changed\n"})
    other.format_patch("HEAD~1..HEAD", tmp_path / "patches" / "q")
    return write_pins(tmp_path / "pins.yaml", """
        upstream: upstream
        builds: [v1]
        pins:
          - id: p
            patches: patches/p
            unchecked: test
        """)


def test_verify_with_a_failed_build_is_a_blocker(small_pins, tmp_path, monkeypatch, capsys):
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "cmake").write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "cmake version 3.28.3"; exit 0; fi\n'
                                'echo "CMake Error: injected configure failure" >&2\nexit 1\n')
    (fake / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    out = tmp_path / "verify.json"
    assert main(["verify", "-c", str(small_pins), "--json", str(out), "--no-progress"]) == 1
    assert "not ok: a gate is red: cpu-build on v1" in capsys.readouterr().out
    doc = load(out)
    gates = {g["name"]: g for g in doc["builds"][0]["gates"]}
    assert gates["cpu-build"]["status"] == "failed" and doc["builds"][0]["not_run"] == [n for n in GATES if n != "cpu-build"]
    assert main(["sim", "-c", str(small_pins), "--json", str(tmp_path / "sim.json")]) == 0
    rc, text = report([tmp_path / "sim.json", out], tmp_path)
    assert rc == 1
    assert first_line(text).startswith("**❌ blocked:** cpu-build failed on v1 on CPU only: cmake configure failed")


def test_stopped_verify_and_conflicting_sim_are_blockers(small_pins, tmp_path, capsys):
    write_pins(small_pins, small_pins.read_text() + "  - id: q\n    patches: patches/q\n    unchecked: test\n")
    out = tmp_path / "verify.json"
    assert main(["verify", "-c", str(small_pins), "--json", str(out), "--no-progress"]) == 1
    assert "not ok: verify stopped before its gates ran on v1" in capsys.readouterr().out
    assert main(["sim", "-c", str(small_pins), "--json", str(tmp_path / "sim.json")]) == 1
    sim = load(tmp_path / "sim.json")
    assert [p.get("touched") for p in sim["builds"][0]["pins"]] == [["src/a.c"], ["src/a.c"]]
    rc, text = report([tmp_path / "sim.json", out], tmp_path)
    assert rc == 1
    assert first_line(text).startswith("**❌ blocked:** `q` does not apply to this build (conflicts with upstream) on v1; "
                                       "verify stopped on CPU only (")


def test_sim_with_an_error_pin_is_a_blocker(tmp_path):
    sim = SimResult([BuildResult("b1", "c0ffee", [PinResult("p", "error", True, detail="commit not found")])], "d1")
    rc, text = report([dump(tmp_path / "sim.json", sim.to_json())], tmp_path)
    assert rc == 1 and first_line(text) == "**❌ blocked:** `p` could not be applied (commit not found) on b1"


# --- verify's own summary line ---------------------------------------------------------------------
def _verification(cuda: bool, status=None) -> VerifyResult:
    gates = []
    for name in GATES:
        gate = GateResult(name, "passed", 1.0)
        if name in GPU_GATES and not cuda:
            gate.status, gate.extra["not_requested"] = "not-run", True
        if status and name in status:
            gate.status = status[name]
        gates.append(gate)
    return VerifyResult("d", {"hostname": "h", "gpu": None}, [BuildVerification("b1", "c", [], gates)], cuda)


def test_verify_summary_never_says_all_green_when_gates_did_not_run():
    cpu = _verification(cuda=False)
    assert cpu.ok
    assert cpu.summary() == "CPU gates green, feature checks green on CPU; GPU gates not run (no --cuda)"
    assert cpu.to_json()["builds"][0]["not_run"] == list(GPU_GATES)
    assert _verification(cuda=True).summary() == "all gates green"
    nothing = _verification(cuda=False, status={"feature-checks": "not-run"})
    nothing.builds[0].gate("feature-checks").extra["not_requested"] = True
    assert nothing.summary() == "CPU gates green; GPU gates not run (no --cuda); no feature check run"
    red = _verification(cuda=True, status={"backend-ops": "failed", "feature-checks": "not-run"})
    assert red.summary() == "a gate is red: backend-ops on b1"
    from pinset.verify.markdown import verify_markdown

    assert verify_markdown(cpu).startswith("# pinset verify: ok: CPU gates green, feature checks green on "
                                                      "CPU; GPU gates not run (no --cuda)\n")


# --- three outcomes: what a pin's changes need ------------------------------------------------------
def _cpu_evidence(tmp_path, touched: list[str] | None) -> list[Path]:
    """The green pin set measured on a CPU only: CPU verify, KLD CPU against CPU, bench on the CPU."""
    sim = load(GREEN / "sim.json")
    if touched is not None:  # None: a file from before `touched`; "null": touched unknown
        for b in sim["builds"]:
            for p in b["pins"]:
                p["touched"] = None if touched == "null" else touched
    kld = load(GREEN / "kld-h200.json")
    for r in kld["runs"]:
        r["backend"], r["devices"] = "CPU", []
    bench = load(GREEN / "bench-h200.json")
    bench["gpu"] = None
    for r in bench["round_log"]:
        r.update(gpu_clock_mhz=None, other_gpu_processes=None)
    return [dump(tmp_path / "sim.json", sim), GREEN / "verify-cpu.json", dump(tmp_path / "kld.json", kld),
            dump(tmp_path / "bench.json", bench)]


def test_cpu_evidence_is_enough_for_pins_without_cuda_code(tmp_path):
    rc, text = report(_cpu_evidence(tmp_path, ["src/llama.cpp", "tests/test-backend-ops.cpp"]), tmp_path)
    assert rc == 0 and first_line(text).startswith("**✅ ready to ship:**")
    assert "**KLD vs CPU (Llama-3.2-1B-Instruct-IQ1_M.gguf; device: CPU):**" in text
    assert "**Speed (Llama-3.2-1B-Instruct-IQ1_M.gguf; device: CPU):**" in text


def test_cpu_evidence_is_not_enough_for_cuda_code(tmp_path):
    """A newcomer's CPU-only run of a CUDA pin set: nothing failed, and it is not "ready"."""
    for touched in (None, ["ggml/src/ggml-cuda/mmq.cu"], ["ggml/src/ggml-cpu/x.c", "kernels/k.cuh"], "null"):
        rc, text = report(_cpu_evidence(tmp_path, touched), tmp_path)
        line = first_line(text)
        assert rc == 1 and line.startswith("**⏳ not enough evidence:** "), line
        assert "but no verify passed its GPU gates on a CUDA device (pypi:llama-cpp-python==0.3.36" in line
        assert "KLD ran on the CPU only (device: CPU): no evidence for the CUDA code of `cuda-mmq-iq1m`" in line
        assert "bench ran on the CPU only (device: CPU)" in line
        assert "device: CPU — CPU against CPU: no evidence for a CUDA path" in text
        assert "(device: CPU, GPU gates not run)" in text


def test_gpu_host_without_gpu_gates_is_not_cuda_evidence(tmp_path):
    """verify without --cuda on a machine that has a GPU: the machine is there, its GPU gates are not."""
    data = load(GREEN / "verify-h200.json")
    for b in data["builds"]:
        for g in b["gates"]:
            if g["name"] in GPU_GATES:
                g.update(status="not-run", detail="--cuda not given", seconds=0.0, not_requested=True)
                g.pop("ops", None)
    rc, text = report(green(tmp_path, **{"verify-h200": dump(tmp_path / "verify-h200.json", data)}), tmp_path)
    assert rc == 1 and "**⏳ not enough evidence:** `cuda-mmq-iq1m` changes CUDA code" in text


def test_an_aa_bench_or_a_kld_without_head_is_no_evidence(tmp_path):
    bench = load(GREEN / "bench-h200.json")
    bench["aa_check"] = True
    kld = load(GREEN / "kld-h200.json")
    kld["runs"] = kld["runs"][:1]
    rc, text = report(green(tmp_path, **{"bench-h200": dump(tmp_path / "b.json", bench),
                                         "kld-h200": dump(tmp_path / "k.json", kld)}), tmp_path)
    assert rc == 1 and "**❌ blocked:** kld reported not ok (k.json)" in text
    assert "- Not enough evidence: every bench is an A/A check (the base build against itself)" in text
    assert "; A/A check: base against itself):**" in text


@pytest.mark.parametrize("damage", ["zero ops", "no ops", "check without cases"])
def test_a_pass_that_ran_nothing_blocks(tmp_path, damage):
    """Counts are judged under a gate that says "passed": 0/0, no op at all, a check of 0 cases ran nothing."""
    data = load(GREEN / "verify-h200.json")
    gates = {g["name"]: g for g in data["builds"][0]["gates"]}
    if damage == "zero ops":
        gates["backend-ops"]["ops"][0].update(passed=0, total=0)
    elif damage == "no ops":
        gates["backend-ops"]["ops"] = []
    else:
        gates["feature-checks"]["checks"][0]["cases"] = 0
    rc, text = report(green(tmp_path, **{"verify-h200": dump(tmp_path / "v.json", data)}), tmp_path)
    line = first_line(text)
    assert rc == 1 and line.startswith("**❌ blocked:** ")
    assert {"zero ops": "backend-ops failed on pypi:llama-cpp-python==0.3.36 on NVIDIA H200: MUL_MAT 0/0",
            "no ops": "backend-ops failed on pypi:llama-cpp-python==0.3.36 on NVIDIA H200: no op counted",
            "check without cases": "feature check `cuda-mmq-iq1m` backend-op MUL_MAT /type_a=iq1_m/ ran no case on "
                                   "pypi:llama-cpp-python==0.3.36 on NVIDIA H200"}[damage] in line


def test_unverified_build_is_not_enough_evidence(tmp_path):
    data = load(GREEN / "verify-h200.json")
    data["builds"] = data["builds"][:1]
    cpu = load(GREEN / "verify-cpu.json")
    cpu["builds"] = cpu["builds"][:1]
    rc, text = report(green(tmp_path, **{"verify-h200": dump(tmp_path / "v.json", data),
                                         "verify-cpu": dump(tmp_path / "c.json", cpu)}), tmp_path)
    assert rc == 1 and "pypi:llama-cpp-python==0.3.35 simulated only (no verify result)" in first_line(text)



@pytest.mark.parametrize("empty", ["verify", "sim", "sim and verify"])
def test_a_result_that_holds_no_build_is_no_evidence(tmp_path, empty):
    """A verify or sim that ran on no build at all is a run that ran nothing, never the missing kind's evidence."""
    swap = {}
    for kind, stem in (("sim", "sim"), ("verify", "verify-h200")):
        if kind in empty:
            data = load(GREEN / f"{stem}.json")
            data["builds"] = []
            swap[stem] = dump(tmp_path / f"{stem}.json", data)
    if "verify" in empty:
        swap["verify-cpu"] = None
    rc, text = report(green(tmp_path, **swap), tmp_path)
    line = first_line(text)
    assert rc == 1 and line.startswith("**⏳ not enough evidence:**"), line
    for kind in ("sim", "verify"):
        assert (f"the {kind} result holds no build" in line) == (kind in empty)

# --- the speed table is bench's own statistic ---------------------------------------------------------
@pytest.mark.parametrize("name", ["bench-synth-llama-1b-4l-IQ1_M.json", "bench-synth-qwen3moe-a3b-4l-IQ1_M.json"])
def test_report_speed_table_shows_what_bench_md_shows(tmp_path, name):
    rc, text = report([REPORT / "h200" / name], tmp_path)
    md = bench_markdown(load_result(REPORT / "h200" / name).model)
    assert "mean over kept rounds" not in text
    for row in load_result(REPORT / "h200" / name).model.rows:
        base, head = row_speeds(row)
        assert f"**{base:.2f}**" in text and f"**{head:.2f}**" in text
        assert f"| {base:,.1f} | {head:,.1f} |" in md
    assert "llama-bench's avg_ts, the mean of its `-r` samples" in text and "avg_ts" in md  # recorded before the median


def test_the_band_column_is_named_as_bench_names_it(tmp_path):
    """Schema 1 recorded an A/A spread, schema 2 the rule's no-change band: the report's column says which, as
    bench.md does."""
    old = REPORT / "h200" / "bench-synth-llama-1b-4l-IQ1_M.json"
    new = FIXTURES / "llama-bench" / "h200-48l-adaptive-head-vs-base.json"
    for path, band in ((old, "A/A spread"), (new, "no-change band")):
        result = load_result(path).model
        rc, text = report([path], tmp_path)
        assert f"| {band} | verdict |" in text and (band == "A/A spread") == (result.schema == 1)
        assert f"| {band} |" in bench_markdown(result) or band == "A/A spread"


def test_excluded_as_noisy_lists_only_noise(tmp_path):
    data = load(GREEN / "bench-h200.json")
    row = data["rows"][0]
    row["excluded"] = ["round 0: warm-up", "round 2: another process used the GPU",
                       "round 4: head has no result (llama-bench exited 1)"]
    rc, text = report(green(tmp_path, **{"bench-h200": dump(tmp_path / "b.json", data)}), tmp_path)
    speed = text.split("### Speed")[1].split("### Pin set")[0]
    noisy = speed.split("Excluded as noisy:")[1].split("Rounds without a result")[0]
    assert "round 2: another process used the GPU" in noisy
    assert "warm-up" not in noisy and "has no result" not in noisy
    assert "- pp512: round 4: head has no result (llama-bench exited 1)" in speed.split("Rounds without a result")[1]



H200 = REPORT / "h200"
H200_RUN = [H200 / "sim.json", H200 / "verify-h200.json", H200 / "kld-synth-llama-1b-4l-IQ1_M.json"]


def test_a_recorded_speed_beyond_any_physical_rate_blocks(tmp_path):
    """A recorded (older or edited) bench whose run says ok but holds an impossible speed is what bench itself
    counts as a failed run: it blocks, and is not excused by the file's rows being too noisy."""
    bench = load(H200 / "bench-synth-llama-1b-4l-IQ1_M.json")
    assert {r["verdict"] for r in bench["rows"]} == {"too noisy"} and bench["ok"] is False
    rc, text = report([*H200_RUN, H200 / "bench-synth-llama-1b-4l-IQ1_M.json"], tmp_path)
    assert "llama-bench failed" not in first_line(text)  # as recorded: noisy, no failed run
    test = bench["round_log"][2]["runs"]["base"]["tests"][0]
    test["samples_ts"] = [1e15] * len(test["samples_ts"])
    rc, text = report([*H200_RUN, dump(tmp_path / "bench.json", bench)], tmp_path)
    assert rc == 1 and first_line(text).startswith("**❌ blocked:** llama-bench failed on NVIDIA H200 "
                                                   "(synth-llama-1b-4l-IQ1_M.gguf): round 2 base: pp512: 1e+15 t/s "
                                                   "is beyond any physical rate"), first_line(text)


def test_one_benchs_noisy_rows_never_excuse_anothers_not_ok(tmp_path):
    noisy = H200 / "bench-synth-qwen3moe-a3b-4l-IQ1_M.json"
    odd = load(H200 / "bench-synth-llama-1b-4l-IQ1_M.json")  # not ok without a row or run that says why
    for r in odd["rows"]:
        r["verdict"] = "no change"
    odd["ok"] = False
    rc, text = report([*H200_RUN, noisy, dump(tmp_path / "odd.json", odd)], tmp_path)
    assert rc == 1 and "bench reported not ok (odd.json)" in first_line(text), first_line(text)


def test_a_failed_bench_run_is_named_once_on_its_own_gpu(tmp_path):
    """In CI every cell's bench is called bench.json: a failure is the study's of the file that recorded it."""
    good, bad = load(GREEN / "bench-h200.json"), load(H200 / "bench-synth-llama-1b-4l-IQ1_M.json")
    bad.update(model=good["model"], base=good["base"], head=good["head"])
    bad["round_log"][2]["runs"]["head"].update(ok=False, detail="llama-bench exit 1: CUDA error", tests=[])
    for d, uuid in ((good, "GPU-aaaa"), (bad, "GPU-bbbb")):
        d["host"] = {"hostname": "h", "gpu_uuids": [uuid], "runner": None, "gpu_class": None}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = green(tmp_path, **{"bench-h200": dump(tmp_path / "a" / "bench.json", good)}) + [
        dump(tmp_path / "b" / "bench.json", bad)]
    rc, text = report(files, tmp_path)
    line = first_line(text)
    assert rc == 1 and line.count("llama-bench failed on") == 1 and "round 2 head: llama-bench exit 1" in line, line

# --- the models: every file pinset writes reads back, older versions too ------------------------------
ALL_RESULTS = [p for p in sorted(REPORT.glob("*/*.json")) + sorted(ROOT.glob("reports/**/*.json"))
               if json.loads(p.read_text()).get("kind") in MODELS]


@pytest.mark.parametrize("path", ALL_RESULTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_models_round_trip(path, tmp_path):
    """from_json(to_json(from_json(file))) gives the same document: the model is the contract."""
    if load(path).get("compare") == "models":
        pytest.skip("a model comparison: read by pinset bench --reanalyse, refused by pinset report")
    once = load_result(path)
    again = load_result(dump(tmp_path / path.name, once.data))
    assert again.data == once.data and again.kind == once.kind
    assert once.data["schema"] == load(path)["schema"]   # a file keeps its schema (bench: 1 or 2)


def test_report_json_reads_schema_1_and_2(tmp_path):
    out = tmp_path / "r.json"
    main(["report", *map(str, sorted(GREEN.glob("*.json"))), "--markdown", str(tmp_path / "r.md"), "--json", str(out)])
    doc, kind, schema, _ = read_document(out)
    assert (kind, schema) == ("report", 2)
    now = ReportResult.from_json(doc)
    assert now.outcome == "ready" and now.ok and now.to_json() == without_start(load(out))
    old = load(out)
    old.update(schema=1)
    del old["outcome"], old["verdict"]["missing"]
    old["verdict"]["line"] = "**⏳ no blockers so far, not ready:** no kld result yet"
    doc, _, _, _ = read_document(dump(tmp_path / "old.json", old))
    assert ReportResult.from_json(doc).outcome == "not enough evidence"


def test_refusals_name_the_file_and_the_key(tmp_path, capsys):
    data = load(GREEN / "bench-h200.json")
    data["rows"][0]["ci95"] = [1.0]
    rc, _ = report([dump(tmp_path / "b.json", data)], tmp_path)
    assert rc == 2 and "b.json: bench.rows[0].ci95: expected [low, high], got [1.0]" in capsys.readouterr().err
    data = load(GREEN / "verify-h200.json")
    data["builds"][0]["gates"][5]["ops"][0]["passed"] = "1304"
    rc, _ = report([dump(tmp_path / "v.json", data)], tmp_path)
    assert rc == 2
    assert 'v.json: verify.builds[0].gates[5].ops[0].passed: expected an integer, got "1304"' in capsys.readouterr().err
    rc, _ = report([dump(tmp_path / "r.json", {"schema": 2, "kind": "report"})], tmp_path)
    assert rc == 2 and "r.json: a report document; pinset report reads the results of" in capsys.readouterr().err
    rc, _ = report([REPORT.parent.parent.parent / "reports/h200/results/model-synth-llama-1b-4l-IQ1_M.json"], tmp_path)
    assert rc == 2 and "model-synth-llama-1b-4l-IQ1_M.json: a model document (pinset model synth)" in capsys.readouterr().err


# --- property: a damaged result is read, or refused in one line; never a traceback, never more "ready" ----------
def _leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path


def test_damaged_results_are_read_or_refused_in_one_line(tmp_path_factory):
    from hypothesis import HealthCheck, given, settings, strategies as st

    from pinset.errors import PinsetError
    from pinset.report import build_report

    docs = {p.name: load(p) for p in sorted(GREEN.glob("*.json"))}
    leaves = [(name, path) for name, doc in docs.items() for path in _leaves(doc)]
    junk = st.one_of(st.none(), st.booleans(), st.integers(-2, 10 ** 6), st.floats(allow_nan=True, allow_infinity=True),
                     st.text(max_size=8), st.just([]), st.just({}), st.lists(st.floats(allow_nan=True), max_size=3))
    folder = tmp_path_factory.mktemp("damaged")

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.tuples(st.sampled_from(leaves), junk), min_size=1, max_size=3))
    def check(damage):
        damaged = copy.deepcopy(docs)
        for (name, path), value in damage:
            target = damaged[name]
            try:
                for key in path[:-1]:
                    target = target[key]
                target[path[-1]] = value
            except (KeyError, IndexError, TypeError):
                continue
        paths = []
        for name, doc in damaged.items():
            (folder / name).write_text(json.dumps(doc))
            paths.append(folder / name)
        try:
            result = build_report(paths)
        except PinsetError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(folder))
            return
        assert result.markdown
        if result.verdict.ok:  # still ready: then every number the verdict used is a measurement
            for f in result.merged.files:
                if f.kind == "kld":
                    assert all(r["kld"] and math.isfinite(r["kld"]["mean"]) for r in f.data["runs"])

    check()


def test_mixed_or_cpu_layer_runs_are_not_device_evidence(tmp_path):
    """A head KLD run on the CPU next to a base on CUDA0, and a bench at -ngl 0 on a GPU host: CPU evidence."""
    kld = load(GREEN / "kld-h200.json")
    kld["runs"][1]["backend"] = "CPU"
    bench = load(GREEN / "bench-h200.json")
    for row in bench["rows"]:
        row["params"]["n_gpu_layers"] = 0
    rc, text = report(green(tmp_path, **{"kld-h200": dump(tmp_path / "k.json", kld),
                                         "bench-h200": dump(tmp_path / "b.json", bench)}), tmp_path)
    line = first_line(text)
    assert rc == 1 and "KLD ran on the CPU only (device: CPU)" in line and "bench ran on the CPU only" in line
    assert "device: CPU, CUDA0 — CPU against CPU: no evidence for a CUDA path" in text


def test_unreadable_inputs_are_one_line(tmp_path, capsys):
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    for path, message in ((tmp_path / "deep.json", "not a pinset result (nested too deeply)"),
                          (folder, "is a folder, not a result file")):
        rc, _ = report([path], tmp_path)
        err = capsys.readouterr().err
        assert rc == 2 and f"{path}: {message}" in err and len(err.strip().splitlines()) == 1


def test_verify_without_cuda_says_the_cuda_code_was_not_compiled(tmp_path, make_repo, capsys):
    """A pin changing a .cu file, verified without --cuda: verify's own JSON lists that CUDA code as not tested
    (the stand-in tree has no test targets, so its build fails: only what verify records is under test)."""
    up = make_repo("upstream")
    up.commit("v1", {"CMakeLists.txt": "project(x C)\n", "ggml/src/ggml-cuda/k.cu": "int k;\n"})
    up.tag("v1")
    one_patch(make_repo("work"), tmp_path / "patches" / "k",
              {"ggml/src/ggml-cuda/k.cu": "int k;\n"}, {"ggml/src/ggml-cuda/k.cu": "int k = 1;\n"}, "pin")
    pins = one_pin_yaml(tmp_path / "pins.yaml", "upstream", "kernel", "v1", patches="patches/k", unchecked="test")
    out = tmp_path / "verify.json"
    main(["verify", "-c", str(pins), "--json", str(out), "--no-progress"])
    assert {"what": "CUDA code of pin kernel (ggml/src/ggml-cuda/k.cu)",
            "why": "not compiled or run: --cuda not given"} in load(out)["builds"][0]["not_tested"]
