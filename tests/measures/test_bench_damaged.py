"""`pinset bench --reanalyse` and `--noise-from` on damaged, forged or mismatched result files: each is one line
and exit 2 (bad input), or the damaged part is left out of the statistics; never a traceback, never a
verdict sharper than the recorded rounds support."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pinset.cli import main
from tests.testing import FIXTURES, ROOT, run_doc

FIX = FIXTURES / "llama-bench"
RECORDED = json.loads((FIX / "h200-48l-adaptive-head-vs-base.json").read_text())


def reanalyse(tmp_path: Path, doc, capsys) -> tuple[int, dict | None, str]:
    src, out = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    capsys.readouterr()
    rc = main(["bench", "--reanalyse", str(src), "--json", str(out)])
    err = capsys.readouterr().err
    return rc, run_doc(out.read_text()) if out.is_file() else None, err


def damaged(change) -> dict:
    doc = copy.deepcopy(RECORDED)
    change(doc)
    return doc


def _set(path: list, value):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return change


BAD_INPUT = {
    "a round recorded twice": lambda d: d["round_log"].append(copy.deepcopy(d["round_log"][3])),
    "two rounds with one number": _set(["round_log", 2, "round"], 3),
    "decision not an object": _set(["decision"], "adaptive"),
    "looks not a number": _set(["decision", "looks"], "x"),
    "zero looks": _set(["decision", "looks"], 0),
    "max_rounds a string": _set(["decision", "max_rounds"], "40"),
    "noise without params": _set(["decision", "noise"], [{"test": "pp512", "sd": 0.01}]),
    "noise sd infinite": _set(["decision", "noise"], [{"test": "pp512", "params": {}, "sd": 1e999}]),
    "noise sd huge": _set(["decision", "noise"], [{"test": "pp512", "params": {}, "sd": 1e9}]),
    "noise sd negative": _set(["decision", "noise"], [{"test": "pp512", "params": {}, "sd": -0.01}]),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUT))
def test_a_damaged_recorded_bench_is_bad_input_in_one_line(tmp_path, capsys, name):
    rc, out, err = reanalyse(tmp_path, damaged(BAD_INPUT[name]), capsys)
    assert rc == 2 and out is None, (name, rc, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "in.json" in err


@pytest.mark.parametrize("name, change", [
    ("no speed at all", lambda d: [d["round_log"][2]["runs"]["base"]["tests"][0].pop(k) for k in ("samples_ts", "avg_ts")]),
    ("a round without runs", lambda d: d["round_log"][2].pop("runs")),
    ("no samples, no avg_ts", lambda d: (d["round_log"][2]["runs"]["base"]["tests"][0].update(samples_ts=[]),
                                         d["round_log"][2]["runs"]["base"]["tests"][0].pop("avg_ts"))),
])
def test_a_recorded_test_without_a_speed_leaves_its_round_out(tmp_path, capsys, name, change):
    doc = damaged(change)
    rc, out, err = reanalyse(tmp_path, doc, capsys)
    assert "Traceback" not in err and out is not None, err
    test = RECORDED["round_log"][2]["runs"]["base"]["tests"][0]["test"]
    row = next(r for r in out["rows"] if r["test"] == test)
    assert 2 not in row["rounds"] and any(e.startswith("round 2: base has no result") for e in row["excluded"])
    assert rc == 1 and out["ok"] is False


@pytest.mark.parametrize("change", [
    _set(["decision", "alpha"], 0.9),
    _set(["decision", "looks"], 1),
    _set(["decision", "alpha_per_look"], 0.5),
], ids=["alpha 0.9", "one look for an adaptive bench", "alpha per look 0.5"])
def test_reanalysis_uses_the_method_not_the_recorded_error_rate(tmp_path, capsys, change):
    """An adaptive bench is reanalysed with the looks its budget allowed and pinset's alpha: an edited
    `decision` cannot narrow the intervals."""
    rc0, honest, _ = reanalyse(tmp_path, RECORDED, capsys)
    rc, forged, err = reanalyse(tmp_path, damaged(change), capsys)
    assert "Traceback" not in err
    assert forged["rows"] == honest["rows"] and forged["decision"]["looks"] == honest["decision"]["looks"] == 35
    assert forged["decision"]["alpha"] == 0.05


def test_the_recorded_file_reanalyses_to_its_own_rows(tmp_path, capsys):
    rc, out, err = reanalyse(tmp_path, RECORDED, capsys)
    # every number but the p column: the file was recorded when `p` was the informational Wilcoxon p; re-analysed,
    # it is the p of the test that decided (docs/bench.md, "p"), named by p_test
    without_p = lambda rows: [{k: v for k, v in r.items() if k not in ("p_value", "p_test")} for r in rows]  # noqa: E731
    assert rc == 0 and without_p(out["rows"]) == without_p(RECORDED["rows"])
    assert all("p_test" not in r for r in RECORDED["rows"]) and all(r["p_test"] in ("t", "tost") for r in out["rows"])


# --- --noise-from: the A/A file must be of this machine, this model and this measurement -----------------------
from tests.testing.fake_llama import FIXTURE_TESTS, bench, fake_bin  # noqa: E402  (fake llama-bench programs with controlled speeds)


@pytest.fixture
def aa_bench(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.02, 21)
    head = fake_bin(tmp_path / "head", {"pp": 1000.0, "tg": 100.0}, 0.02, 22)
    aa_dir = tmp_path / "aa"
    aa_dir.mkdir()
    rc, aa = bench(aa_dir, base, head, "--aa", "--rounds", "6")
    assert aa["aa_check"] and aa["aa_noise"]
    return base, head, aa_dir / "bench.json", aa


def noise_bench(tmp_path, base, head, aa_json, *extra, model_name="m.gguf", model_bytes=b"GGUF"):
    model = tmp_path / model_name
    model.write_bytes(model_bytes)
    return main(["bench", "--base-bin", str(base), "--head-bin", str(head), "--cpu", "-m", str(model),
                 "--noise-from", str(aa_json), "--rounds", "4", "--json", str(tmp_path / "b.json"), *extra,
                 "--", *FIXTURE_TESTS])


def test_noise_from_another_model_is_refused(tmp_path, capsys, aa_bench):
    base, head, aa_json, _ = aa_bench
    capsys.readouterr()
    assert noise_bench(tmp_path, base, head, aa_json, "-r", "1", model_name="other.gguf") == 2
    err = capsys.readouterr().err
    assert "other.gguf" in err and "m.gguf" in err and len(err.strip().splitlines()) == 1


def test_noise_from_other_repetitions_is_refused(tmp_path, capsys, aa_bench):
    """-r changes what one run's speed is (the median of more samples scatters less): another noise."""
    base, head, aa_json, _ = aa_bench
    capsys.readouterr()
    assert noise_bench(tmp_path, base, head, aa_json, "-r", "3") == 2
    assert "-r 1" in capsys.readouterr().err


def test_noise_from_a_forged_noise_entry_is_refused(tmp_path, capsys, aa_bench):
    """The noise a later bench uses is the A/A file's own rounds: a summary edited to a wider noise (any change
    would then be "no change") does not match them."""
    base, head, aa_json, aa = aa_bench
    forged = {**aa, "aa_noise": [{**e, "sd": 0.5} for e in aa["aa_noise"]]}
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    capsys.readouterr()
    assert noise_bench(tmp_path, base, head, tmp_path / "forged.json", "-r", "1") == 2
    assert "aa_noise" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"", b"safetensors", b"GGU", "a text\n".encode()], ids=["empty", "other", "cut", "text"])
@pytest.mark.parametrize("verb", ["bench -m", "bench --vs-model", "kld -m"])
def test_a_model_that_is_not_gguf_is_bad_input_before_anything_runs(tmp_path, capsys, verb, content):
    bin_dir = tmp_path / "bin"
    for name in ("llama-bench", "llama-perplexity"):   # programs that would leave a trace if they ran
        (bin_dir / name).parent.mkdir(exist_ok=True)
        (bin_dir / name).write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\n")
        (bin_dir / name).chmod(0o755)
    good, bad = tmp_path / "good.gguf", tmp_path / "bad.gguf"
    good.write_bytes(b"GGUF" + bytes(8))
    bad.write_bytes(content)
    command, flag = verb.split()
    models = ["-m", str(bad)] if flag == "-m" else ["-m", str(good), "--vs-model", str(bad)]
    sides = ["--head-bin", str(bin_dir)] if flag == "--vs-model" else ["--base-bin", str(bin_dir), "--head-bin", str(bin_dir)]
    capsys.readouterr()
    rc = main([command, *sides, "--cpu", *models, "--cache", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    shown = {"-m": "--model"}.get(flag, flag)
    assert rc == 2 and f"{shown} {bad}: not a GGUF file" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "ran").exists()


# --- interruption: Ctrl-C during the rounds -------------------------------------------------------------------
INTERRUPTING = """#!{python}
# a fake llama-bench whose third run presses Ctrl-C on pinset (SIGINT to the test's own process)
import os, signal, sys, time
from pathlib import Path
count = Path(__file__).with_name("count")
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
if n == 2:
    os.kill({pid}, signal.SIGINT)
    time.sleep(5)
sys.stdout.write({line!r})
"""


def test_an_interrupted_bench_exits_130_and_leaves_no_result_not_even_an_older_one(tmp_path, capsys):
    import os
    import sys

    line = json.loads((FIX / "cpu-tiny-moe-iq1m.jsonl").read_text().splitlines()[0])
    line = json.dumps({**line, "samples_ts": [100.0], "avg_ts": 100.0, "stddev_ts": 0.0}) + "\n"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "llama-bench").write_text(INTERRUPTING.format(python=sys.executable, pid=os.getpid(), line=line))
    (bin_dir / "llama-bench").chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    outputs = {flag: tmp_path / name for flag, name in (("--json", "b.json"), ("--markdown", "b.md"), ("--csv", "b.csv"))}
    for path in outputs.values():   # a green result of an earlier run, under the names this run will write
        path.write_text(json.dumps({**RECORDED, "ok": True}))
    rc = main(["bench", "--base-bin", str(bin_dir), "--head-bin", str(bin_dir), "--cpu", "-m", str(model), "-r", "1",
               *[x for flag, path in outputs.items() for x in (flag, str(path))], "--", "-p", "64", "-n", "0"])
    assert rc == 130
    assert not any(path.exists() for path in outputs.values())


@pytest.mark.parametrize("verb", ["bench", "kld"])
def test_bad_input_leaves_an_earlier_result_in_place(tmp_path, capsys, verb):
    """Bad input is exit 2 with nothing changed: the earlier result files are removed only once the command
    line has passed every check (here --head-bin without --base-bin, found by the sides)."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    earlier = tmp_path / "earlier.json"
    earlier.write_text('{"ok": true}\n')
    capsys.readouterr()
    rc = main([verb, "--head-bin", str(tmp_path), "--cpu", "-m", str(model), "--json", str(earlier)])
    assert rc == 2 and "--base-bin and --head-bin go together" in capsys.readouterr().err
    assert earlier.read_text() == '{"ok": true}\n'


def test_the_same_programs_on_both_sides_are_an_aa_check_not_evidence_for_the_pins(tmp_path):
    """--base-bin B --head-bin B measures the machine's noise, like --aa: the JSON says so, and pinset report
    does not take it as head's speed."""
    bins = fake_bin(tmp_path / "bin", {"pp": 1000.0, "tg": 100.0}, 0.002, 31)
    rc, doc = bench(tmp_path, bins, bins, "--rounds", "4")
    assert doc["aa_check"] is True and doc["aa_noise"]


def test_vs_model_of_the_same_file_is_refused(tmp_path, capsys):
    bins = fake_bin(tmp_path / "bin", {"pp": 1000.0, "tg": 100.0}, 0.002, 32)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    capsys.readouterr()
    rc = main(["bench", "--head-bin", str(bins), "--cpu", "-m", str(model), "--vs-model", str(tmp_path / "." / "m.gguf")])
    err = capsys.readouterr().err
    assert rc == 2 and "the same file as -m" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("verdict", ["faster", "slower", "no change"])
def test_a_row_whose_verdict_contradicts_its_own_ci_is_refused(tmp_path, capsys, verdict):
    """pinset report reads rows as recorded: a verdict edited against its CI is damage, not a result."""
    from pinset.report.load import load_result

    doc = copy.deepcopy(RECORDED)
    row = doc["rows"][0]
    row["verdict"], row["ci95"], row["ratio"], row["threshold"] = verdict, [0.98, 1.05], 1.01, 0.01
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(Exception) as exc:
        load_result(path)
    assert f'"{verdict}" but the CI' in str(exc.value) and "rows[0].verdict" in str(exc.value)


def test_every_recorded_bench_reads_with_its_verdicts():
    from pinset.report.load import load_result

    for path in [*FIX.glob("*.json"), *(FIX.parent / "report").rglob("bench*.json"),
                 *ROOT.joinpath("reports").rglob("bench*.json")]:
        assert load_result(path).kind == "bench", path
