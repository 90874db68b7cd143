"""Odd llama-perplexity and llama-bench output through `pinset kld` / `pinset bench` end to end.

The fake programs are small scripts written by the test (they print captured real output, altered);
everything else is pinset's own code: the CLI, the runner, the parsers and the verdicts.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pinset.cli import main
from tests.testing import FIXTURES, analyse, round_log, run_doc
from tests.testing.fake_llama import DEVICE_LINES, KLD_OUT, REF_ERR, fake_perplexity, visible_gpu, write_script  # noqa: F401  (visible_gpu: an autouse fixture)

FIX = FIXTURES


def run_kld(tmp_path: Path, *extra: str) -> tuple[int, dict | None]:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    out = tmp_path / "kld.json"
    code = main(["kld", "--base-bin", str(tmp_path / "bin"), "--head-bin", str(tmp_path / "bin"), "-m", str(model),
                 "--ctx", "256", "--chunks", "3", "--cache", str(tmp_path / "cache"), "--json", str(out), *extra])
    return code, run_doc(out.read_text()) if out.is_file() else None


def test_kld_with_the_device_line_passes(tmp_path):
    fake_perplexity(tmp_path / "bin")
    code, doc = run_kld(tmp_path)
    assert code == 0 and doc["ok"] and [r["backend"] for r in doc["runs"]] == ["CUDA0", "CUDA0"]
    assert doc["runs"][0]["devices"] == ["CUDA0 (NVIDIA H200)"]


def test_a_run_whose_output_was_cut_at_exit_is_made_again(tmp_path, capsys):
    """Run 2 (base's KLD run) ends after chunk 1 with exit 0: base runs again and the result is whole."""
    fake_perplexity(tmp_path / "bin", cut=(2,))
    code, doc = run_kld(tmp_path, "--log-dir", str(tmp_path / "logs"))
    assert code == 0 and doc["ok"] and all(r["ok"] for r in doc["runs"])
    assert (tmp_path / "bin" / "runs").read_text() == "4"          # reference, base twice, head
    assert doc["runs"][0]["runs"] == 2 and "runs" not in doc["runs"][1]   # the file says base ran twice
    said = capsys.readouterr().out
    assert "base: the output ended before its result (exit 0)" in said and "run 2 of 3" in said
    log = (tmp_path / "logs" / "kld-base.log").read_text().splitlines()
    assert sum(line.startswith("$ ") for line in log) == 2                    # both runs in its log


def test_a_run_cut_every_time_fails_after_three_runs(tmp_path):
    fake_perplexity(tmp_path / "bin", cut=(3, 4, 5))
    code, doc = run_kld(tmp_path)
    assert code == 1 and not doc["ok"] and doc["verdict"]["sigma"] is None
    base, head = doc["runs"]
    assert base["ok"] and not head["ok"]
    assert "the output ended early (1 of 2 chunk rows, no statistics)" in head["detail"]
    assert (tmp_path / "bin" / "runs").read_text() == "5" and head["runs"] == 3   # reference, base, head 3 times


# what ggml_cuda_init prints on a CUDA build when the GPUs are hidden (CUDA_VISIBLE_DEVICES=, as for every CPU run)
HIDDEN = "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected\n"


def test_a_cut_cpu_run_of_a_cuda_build_is_made_again_too(tmp_path, capsys):
    """CUDA's "failed to initialize" with the GPUs hidden on purpose is no error of the run: the cut reference
    and the cut base run are made again, as on a CPU build."""
    fake_perplexity(tmp_path / "bin", cut=(1, 3), device_lines="", stderr_first=HIDDEN)   # reference and base once
    code, doc = run_kld(tmp_path, "--cpu")
    assert code == 0 and doc["ok"] and doc["runs"][0]["runs"] == 2
    assert (tmp_path / "bin" / "runs").read_text() == "5"          # reference twice, base twice, head
    said = capsys.readouterr().out
    assert "reference: the output ended before its result" in said and "base: the output ended" in said


def test_a_cut_gpu_run_that_could_not_start_cuda_is_not_made_again(tmp_path):
    """A device run that printed CUDA's "failed to initialize" failed for that reason: it is not a cut run."""
    fake_perplexity(tmp_path / "bin", cut=(2,), stderr_first=HIDDEN)
    code, doc = run_kld(tmp_path)
    assert code == 1 and "runs" not in doc["runs"][0]
    assert "failed to initialize CUDA" in doc["runs"][0]["detail"]
    assert (tmp_path / "bin" / "runs").read_text() == "3"


def test_a_file_with_an_impossible_run_count_is_refused(tmp_path):
    from pinset.errors import PinsetError
    from pinset.measures.kld_model import KldResult
    from pinset.results import read_document

    fake_perplexity(tmp_path / "bin", cut=(2,))
    code, doc = run_kld(tmp_path)
    assert code == 0 and KldResult.from_json(read_document(tmp_path / "kld.json")[0]).runs[0].runs == 2
    for bad in (0, -1, True, 1.5):
        doc["runs"][0]["runs"] = bad
        (tmp_path / "bad.json").write_text(json.dumps(doc))
        with pytest.raises(PinsetError, match="runs"):
            KldResult.from_json(read_document(tmp_path / "bad.json")[0])


def test_a_reference_cut_at_exit_is_made_again_and_one_cut_every_time_is_refused(tmp_path, capsys):
    fake_perplexity(tmp_path / "bin", cut=(1,))
    code, doc = run_kld(tmp_path)
    assert code == 0 and doc["ok"] and "reference: the output ended before its result" in capsys.readouterr().out
    other = tmp_path / "other"
    fake_perplexity(other / "bin", cut=(1, 2, 3))
    code, doc = run_kld(other)
    assert code == 1 and doc is None
    assert "CPU reference run failed: no final perplexity estimate" in capsys.readouterr().err
    assert (other / "bin" / "runs").read_text() == "3"
    assert not list((other / "cache").rglob("logits.bin"))          # nothing cached from a run without a result


def _kld(value: str) -> str:
    return KLD_OUT.replace("Mean    KLD:   3.544505 ±   0.067744", f"Mean    KLD:   {value} ±   0.067744")


ODD_KLD = [
    ("kld nan", _kld("nan")), ("kld -nan", _kld("-nan")), ("kld negative", _kld("-0.500000")),
    ("kld inf", _kld("inf")), ("kld -inf", _kld("-inf")), ("kld err nan", KLD_OUT.replace("±   0.067744", "±   nan")),
    ("ppl nan", KLD_OUT.replace("Mean PPL(Q)                   : 2218312.743252", "Mean PPL(Q)                   : nan")),
    ("ppl inf", KLD_OUT.replace("Mean PPL(Q)                   : 2218312.743252", "Mean PPL(Q)                   : inf")),
    ("ppl zero", KLD_OUT.replace("Mean PPL(Q)                   : 2218312.743252", "Mean PPL(Q)                   : 0.0")),
    ("same top p > 100", KLD_OUT.replace("Same top p: 20.997", "Same top p: 120.997")),
    ("same top p < 0", KLD_OUT.replace("Same top p: 20.997", "Same top p: -20.997")),
    ("rms dp nan", KLD_OUT.replace("RMS Δp    :  3.875", "RMS Δp    :  nan")),
    ("99.9 % KLD inf", KLD_OUT.replace("99.9%   KLD:   8.729576", "99.9%   KLD:   inf")),
    ("median over 99.9 %", KLD_OUT.replace("Median  KLD:   3.375562", "Median  KLD:   9.375562")),
    ("value with trailing text", _kld("3.544505 ± 0.067744 (approx)")),
    ("block twice", KLD_OUT + KLD_OUT.replace("3.544505", "0.000001")),
    ("mean KLD twice", KLD_OUT.replace("Maximum KLD", "Mean    KLD:   0.000001 ±   0.000001\nMaximum KLD")),
    ("truncated", KLD_OUT[:KLD_OUT.index("Same top p")]),
]


@pytest.mark.parametrize("name,stdout", ODD_KLD, ids=[n for n, _ in ODD_KLD])
def test_impossible_kld_statistics_fail(tmp_path, name, stdout):
    fake_perplexity(tmp_path / "bin", kld_stdout=stdout)
    code, doc = run_kld(tmp_path)
    assert code == 1 and not doc["ok"] and not any(r["ok"] for r in doc["runs"]), name
    assert doc["verdict"]["text"] == "no verdict: a KLD run failed"


def test_a_device_run_without_the_device_line_fails(tmp_path):
    fake_perplexity(tmp_path / "bin", device_lines="")
    code, doc = run_kld(tmp_path)
    assert code == 1 and not doc["ok"] and [r["backend"] for r in doc["runs"]] == ["unknown", "unknown"]
    assert "no `using device" in doc["runs"][0]["detail"]


def test_a_device_run_that_offloaded_nothing_fails(tmp_path):
    fake_perplexity(tmp_path / "bin", device_lines=DEVICE_LINES.replace("offloaded 5/5", "offloaded 0/5"))
    code, doc = run_kld(tmp_path)
    assert code == 1 and "offloaded 0/5 layers" in doc["runs"][0]["detail"]


def test_a_cpu_run_that_used_a_gpu_fails(tmp_path):
    fake_perplexity(tmp_path / "bin")
    code, doc = run_kld(tmp_path, "--cpu")
    assert code == 1 and "a CPU run used device CUDA0 (NVIDIA H200)" in doc["runs"][0]["detail"]


def test_a_cpu_run_without_device_lines_passes(tmp_path):
    fake_perplexity(tmp_path / "bin", device_lines="")
    code, doc = run_kld(tmp_path, "--cpu")
    assert code == 0 and doc["ok"] and doc["runs"][0]["backend"] == "CPU"


@pytest.mark.parametrize("ppl", ["nan", "inf", "-inf", "0.0000"])
def test_a_reference_with_an_impossible_perplexity_is_refused(tmp_path, capsys, ppl):
    fake_perplexity(tmp_path / "bin", ref_stderr=REF_ERR.replace("PPL = 2735044.2682", f"PPL = {ppl}"))
    code, doc = run_kld(tmp_path)
    assert code != 0 and doc is None
    assert "impossible final perplexity" in capsys.readouterr().err


# --- llama-bench ------------------------------------------------------------------------------------

LINE = json.loads((FIX / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl").read_text().splitlines()[0])


def bench_line(**changes) -> str:
    line = {**LINE, "gpu_info": "NVIDIA H200", "backends": "CUDA", "samples_ts": [126.9, 127.0],
            "avg_ts": 126.95, **changes}
    return json.dumps(line)


def fake_bench(bin_dir: Path, stdout: str) -> None:
    write_script(bin_dir / "llama-bench", f"sys.stdout.write({stdout!r})\n")


def run_bench(tmp_path: Path, *llama_bench_args: str, cpu: bool = False) -> tuple[int, dict]:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    out = tmp_path / "bench.json"
    code = main(["bench", "--base-bin", str(tmp_path / "bin"), "--head-bin", str(tmp_path / "bin"), "-m", str(model),
                 "--rounds", "2", "-r", "2", "--json", str(out), *(["--cpu"] if cpu else []), "--", *llama_bench_args])
    return code, json.loads(out.read_text())


def runs(doc: dict) -> list[dict]:
    return [run for rnd in doc["round_log"] for run in rnd["runs"].values()]


def test_a_well_formed_bench_run_is_ok(tmp_path):
    fake_bench(tmp_path / "bin", bench_line() + "\n")
    code, doc = run_bench(tmp_path, "-p", "64", "-n", "0")
    assert all(r["ok"] for r in runs(doc)), [r["detail"] for r in runs(doc)]
    assert doc["rows"][0]["base_tps"] == [126.95]


ODD_BENCH = [
    ("avg inf", bench_line(avg_ts=float("inf"))),
    ("avg nan", bench_line(avg_ts=float("nan"))),
    ("sample -inf", bench_line(samples_ts=[126.9, float("-inf")])),
    ("sample negative", bench_line(samples_ts=[-126.9, 127.0], avg_ts=0.05)),
    ("sample zero", bench_line(samples_ts=[0, 0], avg_ts=0)),
    ("absurd", bench_line(samples_ts=[2e7, 2e7], avg_ts=2e7)),
    ("string speed", bench_line(avg_ts="fast")),
    ("numeric string", bench_line(samples_ts=["126.9", "127.0"])),
    ("boolean", bench_line(samples_ts=[True, True], avg_ts=True)),
    ("no samples", bench_line(samples_ts=[])),
    ("samples of another -r", bench_line(samples_ts=[126.9, 127.0, 127.1], avg_ts=127.0)),
    ("avg is not the samples' mean", bench_line(avg_ts=1000.0)),
    ("stddev nan", bench_line(stddev_ts=float("nan"))),
    ("n_prompt a string", bench_line(n_prompt="64")),
    ("the same test twice", bench_line() + "\n" + bench_line()),
    ("a GPU run that saw no GPU", bench_line(gpu_info="")),
    ("another test than asked for", bench_line(n_prompt=128)),
    ("no test", ""),
]


@pytest.mark.parametrize("name,stdout", ODD_BENCH, ids=[n for n, _ in ODD_BENCH])
def test_odd_llama_bench_output_is_a_failed_run(tmp_path, name, stdout):
    fake_bench(tmp_path / "bin", stdout + "\n")
    code, doc = run_bench(tmp_path, "-p", "64", "-n", "0")
    assert code == 1 and not doc["ok"] and not any(r["ok"] for r in runs(doc)), name
    assert all(r["verdict"] == "insufficient data" for r in doc["rows"])


def test_a_requested_test_missing_fails(tmp_path):
    fake_bench(tmp_path / "bin", bench_line() + "\n")
    code, doc = run_bench(tmp_path, "-p", "64,128", "-n", "16")
    assert code == 1 and "no result for tg16; pp128 although" in runs(doc)[0]["detail"]


def test_a_cpu_bench_that_saw_a_gpu_fails(tmp_path):
    fake_bench(tmp_path / "bin", bench_line() + "\n")
    code, doc = run_bench(tmp_path, "-p", "64", "-n", "0", cpu=True)
    assert code == 1 and "a CPU run saw GPU NVIDIA H200" in runs(doc)[0]["detail"]


def test_runs_with_different_tests_fail(tmp_path):
    # the first run prints pp64, every later one pp128: the later runs are not the same measurement
    marker = tmp_path / "ran-once"
    write_script(tmp_path / "bin" / "llama-bench", f"""
import os
first = not os.path.exists({str(marker)!r})
open({str(marker)!r}, "w").close()
sys.stdout.write({bench_line()!r} if first else {bench_line(n_prompt=128)!r})
""")
    code, doc = run_bench(tmp_path, "-p", "64-128*2", "-n", "0")   # a range: which tests, only the runs tell
    assert code == 1 and runs(doc)[0]["ok"] and not runs(doc)[1]["ok"]
    assert "differ from the other runs" in runs(doc)[1]["detail"]


def test_reanalysis_of_a_recorded_file_with_impossible_speeds_keeps_them_out(tmp_path):
    recorded = json.loads((FIX / "llama-bench" / "aa-cpu-recorded.json").read_text())["round_log"]
    for rnd in recorded[1:]:
        rnd["runs"]["head"]["tests"][0]["samples_ts"] = [2e7] * 3   # (a non-finite one is refused on reading)
    rows = analyse(recorded)
    assert rows[0]["verdict"] == "insufficient data" and "beyond any physical rate" in rows[0]["excluded"][1]


def test_a_recorded_bench_with_an_impossible_speed_is_not_ok():
    from pinset.measures.bench_analysis import analyse_rows, bench_ok

    recorded = json.loads((FIX / "llama-bench" / "aa-cpu-recorded.json").read_text())["round_log"]
    rows = [replace(row, verdict="no change") for row in analyse_rows(round_log(recorded))]
    assert bench_ok(rows, round_log(recorded))
    recorded[-1]["runs"]["head"]["tests"][0]["samples_ts"][1] = -1.0
    assert not bench_ok(rows, round_log(recorded))
