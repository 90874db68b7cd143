"""`pinset report`: golden PR comments from recorded results, merging across machines, refusals (exit 2)."""

from __future__ import annotations

import copy
import shutil

import pytest

from pinset.cli import main
from tests import regen_report_goldens as goldens
from tests.testing.report import dump, load, report

FIX = goldens.FIXTURES
GREEN = sorted((FIX / "green").glob("*.json"))


# --- golden files -------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", goldens.scenarios())
def test_golden_markdown(scenario, tmp_path):
    """Regenerate with `python -m tests.regen_report_goldens` after an intended format change."""
    rc, text = goldens.render(scenario, tmp_path)
    golden = goldens.GOLDEN / f"{scenario}.md"
    assert golden.is_file(), f"no golden for {scenario}: run python -m tests.regen_report_goldens"
    assert text == golden.read_text(encoding="utf-8")
    assert rc == (0 if "**✅ ready to ship:**" in text else 1)  # blocked and not enough evidence: exit 1


def test_scenarios_cover_green_blocked_and_partial():
    assert {"green", "blocked", "sim-only"} <= set(goldens.scenarios())


def test_blocked_verdict_names_every_blocker(tmp_path):
    rc, text = goldens.render("blocked", tmp_path)
    line = text.splitlines()[3]
    assert rc == 1
    assert line.startswith("**❌ blocked:** `iq1-moe-tiles` conflicts with `cuda-mmq-iq1m` on "
                           "pypi:llama-cpp-python==0.3.36, pypi:llama-cpp-python==0.3.35; ")
    assert "feature check `cuda-mmq-iq1m` backend-op MUL_MAT_ID /type_a=iq1_m/ failed on " \
           "pypi:llama-cpp-python==0.3.36 on NVIDIA H200" in line
    assert "tg128 slower on NVIDIA H200: 0.972× (95% CI 0.970–0.975)" in line
    assert "pp512" not in line  # faster is not a blocker


def test_green_has_every_section_and_real_counts(tmp_path):
    rc, text = goldens.render("green", tmp_path)
    assert rc == 0
    headings = [l for l in text.splitlines() if l.startswith("### ")]
    assert headings == ["### Summary", "### Correctness", "### Speed", "### Pin set", "### Not tested"]
    assert text.startswith("<!-- pinset:")
    assert "| `MUL_MAT` | CUDA0 | ✅ 1304/1304 (385 not supported) |" in text
    assert "✅ 931/931" in text and "✅ 34/34" in text and "✅ 216/216" in text
    assert "feature checks 2/2 on GPU" in text
    assert "- AMD/ROCm: no result" in text
    assert "- CUDA architectures other than 9.0: no result (built for CMAKE_CUDA_ARCHITECTURES=90)" in text
    assert "Excluded as noisy:" in text and "pp512: round 3" in text
    assert "`argsort-block-size`: already upstream on pypi:llama-cpp-python==0.3.36; still needed on " \
           "pypi:llama-cpp-python==0.3.35" in text
    assert "<details><summary>Provenance</summary>" in text and "580.159.04" in text
    # the CPU-only runner's gates are shown; its not-run GPU gates are not "not tested" (the H200 ran them)
    assert "gate `cuda-build` not run" not in text


def test_partial_results_are_not_called_ready(tmp_path):
    rc, text = goldens.render("sim-only", tmp_path)
    assert rc == 1
    assert "ready to ship" not in text
    assert "**⏳ not enough evidence:** no verify, kld, bench result" in text
    for line in ("- Correctness: not tested (no verify result)", "- KLD vs CPU reference: not measured (no kld result)",
                 "- Speed: not measured (no bench result)"):
        assert line in text


def test_same_inputs_same_bytes_in_any_order(tmp_path):
    rc1, a = report([*GREEN, "-c", FIX / "pins/pins.yaml"], tmp_path, "a.md")
    rc2, b = report([*reversed(GREEN), "-c", FIX / "pins/pins.yaml"], tmp_path, "b.md")
    assert (rc1, a) == (rc2, b)


def test_json_verdict(tmp_path):
    out = tmp_path / "r.json"
    rc = main(["report", *map(str, sorted((FIX / "blocked").glob("*.json"))), "--markdown", str(tmp_path / "r.md"),
               "--json", str(out)])
    data = load(out)
    assert rc == 1
    assert (data["schema"], data["kind"], data["ok"], data["outcome"]) == (2, "report", False, "blocked")
    assert len(data["verdict"]["blockers"]) == 3
    assert data["pinset"] == load(FIX / "blocked/sim.json")["pinset"]
    assert [i["kind"] for i in data["inputs"]] == ["sim", "verify", "kld", "bench"]


def test_prints_markdown_without_markdown_flag(capsys):
    rc = main(["report", str(FIX / "sim-only/sim.json")])
    assert rc == 1
    assert capsys.readouterr().out == (goldens.GOLDEN / "sim-only.md").read_text(encoding="utf-8")


# --- merging many machines ----------------------------------------------------------------
def test_identical_duplicate_is_merged(tmp_path):
    dup = tmp_path / "zz-copy-of-verify.json"
    shutil.copy(FIX / "green/verify-h200.json", dup)
    _, plain = report(GREEN, tmp_path, "a.md")
    rc, merged = report([*GREEN, dup], tmp_path, "b.md")
    assert rc == 0 and merged == plain


def test_disagreeing_cells_exit_2_naming_both_files(tmp_path, capsys):
    other = load(FIX / "green/verify-h200.json")
    gate = next(g for g in other["builds"][0]["gates"] if g["name"] == "backend-ops")
    gate["ops"][0]["passed"] -= 1
    bad = dump(tmp_path / "rerun-verify.json", other)
    rc, _ = report([*GREEN, bad], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{bad} and {FIX / 'green/verify-h200.json'} disagree on verify / pypi:llama-cpp-python==0.3.36 / " \
           "NVIDIA H200 on h200-runner-1 / backend-ops / MUL_MAT / CUDA0: " \
           '{"not_supported": 385, "passed": 1303, "total": 1304} vs ' \
           '{"not_supported": 385, "passed": 1304, "total": 1304}' in err
    assert not (tmp_path / "out.md").exists()


def test_gate_run_on_one_file_and_not_run_on_another_merges(tmp_path):
    """One CI job ran the CUDA gates, another (same host) only built: the run gate wins, no conflict."""
    full = load(FIX / "green/verify-h200.json")
    partial = copy.deepcopy(full)
    for b in partial["builds"]:
        for g in b["gates"]:
            if g["name"] != "cuda-build":
                g.update(status="not-run", detail="job only builds", seconds=0.0)
                g.pop("ops", None)
                g.pop("checks", None)
    a = dump(tmp_path / "a-build-only.json", partial)
    b = dump(tmp_path / "b-full.json", full)
    rc, text = report([FIX / "green/sim.json", a, b], tmp_path)
    assert rc == 1 and "**⏳ not enough evidence:** no kld, bench result (see" in text  # nothing blocks
    assert "| `backend-ops` | ✅ passed (143 s) | ✅ passed (143 s) |" in text
    assert "job only builds" not in text


def test_two_gpus_get_their_own_columns(tmp_path):
    other = load(FIX / "green/verify-h200.json")
    other["machine"] = {**other["machine"], "hostname": "l40s-runner",
                        "gpu": {"name": "NVIDIA L40S", "driver": "580.159.04", "compute_capability": "8.9",
                                "memory_mib": 46068}}
    other["builds"] = other["builds"][:1]
    l40s = dump(tmp_path / "verify-l40s.json", other)
    rc, text = report([*GREEN, l40s], tmp_path)
    assert rc == 0
    assert "pypi:llama-cpp-python==0.3.36 on NVIDIA L40S" in text
    assert "- CUDA architectures other than 8.9, 9.0: no result" in text


def test_failing_op_blocks_with_counts(tmp_path):
    data = load(FIX / "green/verify-h200.json")
    b = data["builds"][1]
    gate = next(g for g in b["gates"] if g["name"] == "backend-ops")
    gate["status"] = "failed"
    gate["ops"][0].update(passed=1302, failures=["MUL_MAT(type_a=iq1_m,type_b=f32,m=16,n=1,k=256)",
                                                  "MUL_MAT(type_a=iq1_m,type_b=f32,m=16,n=2,k=256)"])
    data["ok"] = b["ok"] = False
    files = [p for p in GREEN if p.name != "verify-h200.json"] + [dump(tmp_path / "verify-h200.json", data)]
    rc, text = report(files, tmp_path)
    assert rc == 1
    assert "**❌ blocked:** backend-ops failed on pypi:llama-cpp-python==0.3.35 on NVIDIA H200: MUL_MAT 1302/1304" in text
    assert "| `MUL_MAT` | CUDA0 | ✅ 1304/1304 (385 not supported) | ❌ 1302/1304 (385 not supported) |" in text
    assert "- MUL_MAT on pypi:llama-cpp-python==0.3.35 on NVIDIA H200: `MUL_MAT(type_a=iq1_m,type_b=f32,m=16,n=1,k=256)`" in text


def test_kld_further_from_cpu_blocks(tmp_path):
    data = load(FIX / "green/kld-h200.json")
    data["ok"] = False
    data["verdict"] = {"text": "further from the CPU result than base", "head_minus_base_kld": 0.00091, "sigma": 0.00014}
    files = [p for p in GREEN if p.name != "kld-h200.json"] + [dump(tmp_path / "kld.json", data)]
    rc, text = report(files, tmp_path)
    assert rc == 1
    assert "**❌ blocked:** KLD on Llama-3.2-1B-Instruct-IQ1_M.gguf: head further from the CPU result than base " \
           "(head − base mean KLD +0.000910 ± 0.000140, +6.5σ)" in text


def test_not_ok_without_a_known_cause_still_blocks(tmp_path):
    data = load(FIX / "green/bench-h200.json")
    data["ok"] = False
    files = [p for p in GREEN if p.name != "bench-h200.json"] + [dump(tmp_path / "bench-x.json", data)]
    rc, text = report(files, tmp_path)
    assert rc == 1
    assert "**❌ blocked:** bench reported not ok (bench-x.json)" in text


def test_optional_pin_conflict_warns_but_does_not_block(tmp_path):
    sim = load(FIX / "blocked/sim.json")
    for b in sim["builds"]:
        b["pins"][2]["required"] = False
        b["ok"] = True
    sim["ok"] = True
    rc, text = report([dump(tmp_path / "sim.json", sim)], tmp_path)
    assert rc == 1 and "blocked" not in text and "not enough evidence" in text
    assert "- ⚠️ optional pin `iq1-moe-tiles` conflicts with `cuda-mmq-iq1m` on" in text
    assert "`iq1-moe-tiles` (optional)" in text


# --- refusals: exit 2 ---------------------------------------------------------------------
def test_missing_file(tmp_path, capsys):
    rc, _ = report([FIX / "green/sim.json", tmp_path / "nope.json"], tmp_path)
    assert rc == 2
    assert "nope.json: no such result file" in capsys.readouterr().err


def test_other_schema_version(tmp_path, capsys):
    data = load(FIX / "green/verify-h200.json")
    data["schema"] = 2
    rc, _ = report([dump(tmp_path / "v2.json", data)], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2
    assert "v2.json: schema 2, this pinset reads verify schema 1 only" in err


def test_missing_key_names_the_key(tmp_path, capsys):
    data = load(FIX / "green/bench-h200.json")
    del data["rows"][1]["ci95"]
    rc, _ = report([dump(tmp_path / "b.json", data)], tmp_path)
    assert rc == 2
    assert "b.json: bench.rows[1].ci95: missing" in capsys.readouterr().err


def test_wrong_type_and_unknown_status(tmp_path, capsys):
    data = load(FIX / "green/verify-h200.json")
    data["builds"][0]["gates"][3]["status"] = "green"
    rc, _ = report([dump(tmp_path / "v.json", data)], tmp_path)
    assert rc == 2
    assert "v.json: verify.builds[0].gates[3].status: unknown value 'green'" in capsys.readouterr().err
    data = load(FIX / "green/kld-h200.json")
    data["ctx"] = "512"
    rc, _ = report([dump(tmp_path / "k.json", data)], tmp_path)
    assert rc == 2
    assert "k.json: kld.ctx: expected an integer, got \"512\"" in capsys.readouterr().err


def test_not_json_and_unknown_kind(tmp_path, capsys):
    (tmp_path / "x.json").write_text("{not json")
    assert report([tmp_path / "x.json"], tmp_path)[0] == 2
    assert "x.json: not a JSON result file" in capsys.readouterr().err
    rc, _ = report([dump(tmp_path / "y.json", {"schema": 1, "kind": "lint"})], tmp_path)
    assert rc == 2
    assert "unknown kind 'lint'" in capsys.readouterr().err


def test_results_of_two_pin_sets(tmp_path, capsys):
    rc, _ = report([FIX / "green/sim.json", FIX / "blocked/verify-h200.json"], tmp_path)
    assert rc == 2
    assert "are results of different pin sets" in capsys.readouterr().err


def test_config_of_another_pin_set(tmp_path, capsys):
    rc, _ = report([FIX / "green/sim.json", "-c", FIX / "pins/pins-blocked.yaml"], tmp_path)
    assert rc == 2
    assert "pins-blocked.yaml is pin set" in capsys.readouterr().err


def test_same_build_two_commits(tmp_path, capsys):
    data = load(FIX / "green/bench-h200.json")
    data["base"]["commit"] = "deadbeef0"
    rc, _ = report([FIX / "green/sim.json", dump(tmp_path / "bench.json", data)], tmp_path)
    assert rc == 2
    assert "disagree on build pypi:llama-cpp-python==0.3.36: commit 0c1e57098 vs deadbeef0" in capsys.readouterr().err


def test_no_results(tmp_path, capsys):
    assert main(["report"]) == 2
    assert "no result files given" in capsys.readouterr().err


def test_verify_pin_conflict_blocks_without_sim(tmp_path):
    rc, text = report([FIX / "blocked/verify-h200.json"], tmp_path)
    assert rc == 1
    assert "**❌ blocked:** `iq1-moe-tiles` did not apply (conflict in verify) on pypi:llama-cpp-python==0.3.36, " \
           "pypi:llama-cpp-python==0.3.35; feature check `cuda-mmq-iq1m`" in text
    assert "- Pin set: not simulated (no sim result)" in text


def test_stopped_verify_blocks_with_its_reason(tmp_path):
    """Required pins missing from the tree: verify runs no gate and says not ok; the report says why."""
    data = load(FIX / "blocked/verify-h200.json")
    why = "required pins not in the tree: iq1-moe-tiles"
    for b in data["builds"]:
        b["ok"] = False
        for g in b["gates"]:
            g.update(status="not-run", detail=why, seconds=0.0)
            g.pop("ops", None)
            g.pop("checks", None)
        b["not_tested"] = [{"what": "all gates", "why": why}]
    data["ok"] = False
    rc, text = report([dump(tmp_path / "v.json", data)], tmp_path)
    assert rc == 1
    assert "verify stopped on NVIDIA H200 (cpu-build, cpu-backend-ops, cpu-test-chat, cuda-build, test-chat, " \
           f"backend-ops, feature-checks): {why} on pypi:llama-cpp-python==0.3.36, pypi:llama-cpp-python==0.3.35" in text
    assert f"- gate `backend-ops` not run: {why} (pypi:llama-cpp-python==0.3.36, pypi:llama-cpp-python==0.3.35)" in text


def test_cpu_only_verify_is_not_gpu_coverage(tmp_path):
    rc, text = report([FIX / "green/sim.json", FIX / "green/verify-cpu.json"], tmp_path)
    assert rc == 1
    assert "`cuda-mmq-iq1m` changes CUDA code (ggml/src/ggml-cuda/mmq.cu) but no verify passed its GPU gates on " \
           "a CUDA device (pypi:llama-cpp-python==0.3.36, pypi:llama-cpp-python==0.3.35)" in text.splitlines()[3]
    assert "(device: CPU, GPU gates not run)" in text
    assert "- pypi:llama-cpp-python==0.3.35: no GPU run (verified on CPU only)" in text
    assert "- GPU: no result (no verify ran its GPU gates)" in text
    assert "- gate `cuda-build` not run: --cuda not given (pypi:llama-cpp-python==0.3.36, " \
           "pypi:llama-cpp-python==0.3.35)" in text
    assert "feature checks 2/2 on CPU" in text
    assert "AMD/ROCm" not in text and "- CUDA architectures other than" not in text


def test_same_op_under_two_filters_is_two_cells(tmp_path):
    """The CPU gate runs MUL_MAT with the pins' types and again with a check's own filter."""
    data = load(FIX / "green/verify-cpu.json")
    gate = next(g for g in data["builds"][0]["gates"] if g["name"] == "cpu-backend-ops")
    gate["ops"].append({**gate["ops"][0], "params": "type_a=iq1_m", "passed": 13, "total": 14})
    rc, text = report([FIX / "green/sim.json", dump(tmp_path / "v.json", data)], tmp_path)
    assert rc == 1  # the gate says passed, but a red count is never shipped
    assert "**❌ blocked:** cpu-backend-ops failed on pypi:llama-cpp-python==0.3.36 on CPU only: " \
           "MUL_MAT /type_a=iq1_m/ 13/14" in text
    assert "| `MUL_MAT` `/type_a=(iq1_m),/` | CPU | ✅ 14/14 | ✅ 14/14 |" in text
    assert "| `MUL_MAT` `/type_a=iq1_m/` | CPU | ❌ 13/14 | — |" in text


def test_gates_after_a_failed_gate_say_not_run_once(tmp_path):
    """verify's detail of a gate after a failed one is 'not run: gate X failed'; the report's item already says
    'not run', so the detail's prefix goes (it read 'gate `backend-ops` not run: not run: gate cuda-build failed')."""
    data = load(FIX / "green/verify-h200.json")
    for b in data["builds"]:
        b["ok"] = False
        names = [g["name"] for g in b["gates"]]
        for g in b["gates"][names.index("cuda-build"):]:
            if g["name"] == "cuda-build":
                g.update(status="failed", detail="nvcc failed (log: x.log)")
            else:
                g.update(status="not-run", detail="not run: gate cuda-build failed", seconds=0.0)
            g.pop("ops", None)
            g.pop("checks", None)
    data["ok"] = False
    rc, text = report([dump(tmp_path / "v.json", data)], tmp_path)
    assert rc == 1
    assert "- gate `backend-ops` not run: gate cuda-build failed (" in text
    assert "not run: not run" not in text
