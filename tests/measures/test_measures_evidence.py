"""The bench and kld evidence rules of issue #20 §2 and #23 §4, end to end with fake programs (their output
captured from real llama.cpp programs): an A/A bench recognised by content; kld and bench of the same folders
recording one build identity (so the report merges them); the `p` column being the p-value of the test that
decided; the producer's verdict rule re-derivable from a file's numbers; typed exclusions; A/A labels."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pinset.cli import main
from pinset.results import Doc
from tests.testing import FIXTURES, GOLDEN, read_bench, round_log
from tests.testing.fake_llama import FIXTURE_TESTS, bench, fake_bin, fake_perplexity, visible_gpu, write_script  # noqa: F401  (autouse fixture)

FIX = FIXTURES
COMMIT = "0c1e570"


# --- A/A by content ---------------------------------------------------------------------------------------
def test_two_copies_of_one_program_in_two_folders_are_an_aa_check(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.002, 7)
    (base / "libllama.so").write_bytes(b"\x7fELF lib")
    head = tmp_path / "copy" / "bin"
    shutil.copytree(base, head)
    rc, doc = bench(tmp_path, base, head, "--rounds", "6")
    assert doc["aa_check"] is True and doc["aa_noise"], "byte-identical programs are the base build against itself"
    # the A/A says so wherever it is shown
    from pinset.measures.bench_render import bench_markdown

    md = bench_markdown(read_bench(doc))
    assert md.startswith("### llama-bench A/A check") and "head vs base" not in md
    assert "| A t/s | A′ t/s | A/A difference |" in md and "not head's speed" in md
    from pinset.commands.bench import bench_table
    from pinset.measures.plot import test_name

    table = bench_table(read_bench(doc))
    assert "(A/A check)" in str(table.title) and [c.header for c in table.columns][3:6] == ["A t/s", "A′ t/s",
                                                                                          "A/A difference"]
    assert test_name("pp512") == "prompt 512" and test_name("pp512 @ d4096") == "prompt 512 at depth 4096"


def test_a_library_that_differs_makes_it_a_real_comparison(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.002, 7)
    (base / "libggml-cpu.so").write_bytes(b"\x7fELF one")
    head = tmp_path / "head"
    shutil.copytree(base, head)
    (head / "libggml-cpu.so").write_bytes(b"\x7fELF two")   # same size, other bytes
    rc, doc = bench(tmp_path, base, head, "--rounds", "4")
    assert doc["aa_check"] is False and "aa_noise" not in doc


def test_same_programs_compares_names_sizes_and_bytes(tmp_path):
    from pinset.measures.sides import same_programs

    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "llama-bench").write_bytes(b"prog")
    assert same_programs(a, b, "llama-bench") and same_programs(a, a, "llama-bench")
    (b / "libextra.so.1").write_bytes(b"x")
    assert not same_programs(a, b, "llama-bench")
    (a / "libextra.so.1").write_bytes(b"y")
    assert not same_programs(a, b, "llama-bench")
    (a / "libextra.so.1").write_bytes(b"x")
    assert same_programs(a, b, "llama-bench")
    assert not same_programs(a, tmp_path / "missing", "llama-bench")


# --- one build identity for kld and bench of the same folders ---------------------------------------------
VERSION = (f'if "--version" in sys.argv:\n    sys.stderr.write("version: b7216-{COMMIT} (build 7216, commit {COMMIT})\\n'
           'built with cc for x86_64\\n")\n    sys.exit(0)\n')


def _with_version(program: Path) -> None:
    body = program.read_text().split("\n", 2)   # "#!python", "import sys", the rest
    program.write_text(f"{body[0]}\n{body[1]}\n{VERSION}{body[2]}")


def test_kld_and_bench_of_the_same_folders_record_one_build_identity_and_merge(tmp_path):
    from pinset.report.load import load_results
    from pinset.report.merge import check_consistent

    folders = {}
    for label in ("base", "head"):
        folder = tmp_path / label
        fake_perplexity(folder)
        _with_version(folder / "llama-perplexity")
        line = json.loads((FIX / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl").read_text().splitlines()[0])
        write_script(folder / "llama-bench", "import json\nfor l in %r:\n    print(l)\n"
                     % [json.dumps({**json.loads(raw), "build_commit": COMMIT, "samples_ts": [s] * 1, "avg_ts": s})
                        for raw, s in zip((FIX / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl").read_text().splitlines(),
                                          (100.0, 200.0, 50.0, 150.0, 250.0, 60.0))])
        assert line
        folders[label] = folder
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    rc = main(["kld", "--base-bin", str(folders["base"]), "--head-bin", str(folders["head"]), "-m", str(model),
               "--ctx", "256", "--chunks", "3", "--cache", str(tmp_path / "cache"), "--json", str(tmp_path / "kld.json")])
    kld = json.loads((tmp_path / "kld.json").read_text())
    assert rc == 0 and {r["commit"] for r in kld["runs"]} == {COMMIT} and kld["reference"]["commit"] == COMMIT
    rc, doc = bench(tmp_path, folders["base"], folders["head"], "--rounds", "4")
    assert doc["base"]["commit"] == doc["head"]["commit"] == COMMIT
    _, commits = check_consistent(load_results([tmp_path / "kld.json", tmp_path / "bench.json"]))
    assert commits == {str(folders["base"].resolve()): COMMIT, str(folders["head"].resolve()): COMMIT}


def test_version_commit_reads_both_forms_and_refuses_unknown():
    from pinset.measures.sides import version_commit

    assert version_commit("version: b7216-0c1e570 (build 7216, commit 0c1e570)\nbuilt with") == "0c1e570"
    assert version_commit("load...\nversion: 4500 (a1b2c3d4)\n") == "a1b2c3d4"
    assert version_commit("version: b1-unknown (build 1, commit unknown)") is None
    assert version_commit("error: unknown argument: --version") is None


# --- the p column is the p-value of the test that decided -------------------------------------------------
def _tost_p(d: np.ndarray, margin: float) -> float:
    n, se = len(d), d.std(ddof=1) / math.sqrt(len(d))
    lo = stats.t.sf((d.mean() + margin) / se, n - 1)
    hi = stats.t.cdf((d.mean() - margin) / se, n - 1)
    return min(1.0, 2 * max(lo, hi))


def test_a_faster_row_shows_the_t_test_p_and_a_no_change_row_the_equivalence_p(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.003, 1)
    head = fake_bin(tmp_path / "head", {"pp": 1040.0, "tg": 100.0}, 0.003, 2)
    rc, doc = bench(tmp_path, base, head, "--rounds", "8")
    per_look = doc["decision"]["alpha_per_look"]
    verdicts = {r["verdict"] for r in doc["rows"]}
    assert verdicts == {"faster", "no change"}, verdicts
    for row in doc["rows"]:
        n = row["decided_after"]
        d = np.log(np.asarray(row["head_tps"][:n]) / np.asarray(row["base_tps"][:n]))
        if row["verdict"] == "faster":
            assert row["p_test"] == "t"
            assert row["p_value"] == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue, rel=1e-9)
            # a 7-pair signed-rank test cannot go below 0.0156: the t p of a 4 % effect at 0.3 % noise does
            assert row["p_value"] < 1e-6 < 2 / 2 ** n
        else:
            assert row["p_test"] == "tost"
            assert row["p_value"] == pytest.approx(_tost_p(d, math.log1p(row["threshold"])), rel=1e-9)
        assert row["p_value"] < per_look   # the test that decided rejected at the per-look level


def test_a_too_noisy_row_shows_the_t_test_p_at_its_last_look():
    from pinset.measures.rule import Plan
    from pinset.measures.stats import compare

    rng = np.random.default_rng(5)
    base = list(1000 * np.exp(rng.normal(0, 0.05, 6)))
    head = list(1000 * np.exp(rng.normal(0, 0.05, 6)))
    st = compare(base, head, Plan())
    d = np.log(np.asarray(head) / np.asarray(base))
    assert st.verdict == "too noisy" and st.p_test == "t"
    assert st.p_value == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue, rel=1e-9)


# --- the producer's rule, re-derived from a file's numbers ------------------------------------------------
def _row(**changes):
    from pinset.measures.bench_model import BenchRow

    doc = json.loads((FIX / "llama-bench" / "h200-48l-adaptive-head-vs-base.json").read_text())
    row = {**doc["rows"][0], **changes}
    return BenchRow.from_json(Doc(row, "<t>", "rows"), doc["schema"]), doc["decision"]


def test_recorded_rows_rederive_to_themselves():
    from pinset.measures.bench_model import BenchResult

    written = sorted((GOLDEN / "measures" / "bench").glob("*.json"))  # fresh, re-analysed
    schema2 = 0
    for path in [FIX / "llama-bench" / "h200-48l-adaptive-head-vs-base.json", *written]:
        result = BenchResult.from_json(Doc(json.loads(path.read_text()), path, ""))
        schema2 += result.schema >= 2
        assert result.contradictions() == [], path.name
    assert schema2 >= 10


def test_an_edited_row_contradicts_its_own_speeds():
    row, decision = _row()
    assert row.contradiction(decision) is None
    slower = [x * 0.9 for x in row.base_tps]       # speeds edited to 10 % below base's, verdict left
    edited, _ = _row(head_tps=slower)
    assert "give \"slower\"" in edited.contradiction(decision)
    few, _ = _row(base_tps=row.base_tps[:2], head_tps=row.head_tps[:2], rounds=row.rounds[:2])
    assert "give \"insufficient data\"" in few.contradiction(decision)
    unequal, _ = _row(head_tps=row.head_tps[:-1])
    assert "one of each per kept round" in unequal.contradiction(decision)
    moved, _ = _row(ratio=row.ratio * 1.5, ci95=[row.ci95[0] * 1.5, row.ci95[1] * 1.5])
    assert "recorded ratio" in moved.contradiction(decision)
    assert row.rederived(decision).verdict == row.verdict


def test_a_kld_verdict_is_rederived_from_its_runs():
    from pinset.measures.kld_model import KldResult, verdict_from_klds

    path = FIX / "report" / "green" / "kld-h200.json"
    raw = json.loads(path.read_text())
    assert KldResult.from_json(Doc(raw, path, "")).verdict_contradiction() is None
    head = next(r for r in raw["runs"] if r["label"] == "head")
    head["kld"]["mean"] += 10 * max(head["kld"]["err"], 1e-3)   # the runs now say "further"; the verdict does not
    edited = KldResult.from_json(Doc(raw, path, ""))
    assert edited.rederived_verdict().text == "further from the CPU result than base"
    assert "but the runs' mean KLDs give \"further" in edited.verdict_contradiction()
    assert verdict_from_klds(0.1, 0.01, 0.1, 0.01).text == "as close to the CPU result as base"


# --- typed exclusions -------------------------------------------------------------------------------------
def test_exclusions_are_typed_when_made_and_when_read():
    from pinset.measures.bench_analysis import analyse_rows
    from pinset.measures.bench_model import Exclusion, ExclusionKind, exclusion_kind

    doc = json.loads((FIX / "llama-bench" / "aa-cpu-recorded.json").read_text())
    rounds = doc["round_log"]
    rounds[2]["other_gpu_processes"] = True
    rounds[3]["runs"]["head"]["ok"], rounds[3]["runs"]["head"]["detail"] = False, "llama-bench exit 1: boom"
    row = analyse_rows(round_log(rounds))[0]
    kinds = [(e.round, e.kind) for e in row.excluded]
    assert kinds == [(0, ExclusionKind.WARMUP), (2, ExclusionKind.NOISE), (3, ExclusionKind.FAILED)]
    assert list(map(str, row.excluded)) == ["round 0: warm-up", "round 2: another process used the GPU",
                                            "round 3: head has no result (llama-bench exit 1: boom)"]
    for e in row.excluded:
        again = Exclusion.from_text(str(e))
        assert (again.kind, again.round) == (e.kind, e.round) and exclusion_kind(str(e)) == e.kind.value
    assert exclusion_kind("round 4: the clocks dropped") == "noise"
    import copy
    import pickle

    for again in (copy.deepcopy(row.excluded[2]), pickle.loads(pickle.dumps(row.excluded[2]))):
        assert (again, again.kind, again.round) == (row.excluded[2], ExclusionKind.FAILED, 3)
    assert json.dumps(row.to_json()["excluded"]) == json.dumps(list(map(str, row.excluded)))


# --- the plot shows what the verdict rests on -------------------------------------------------------------
def _texts(fig) -> list[str]:
    out = [fig._suptitle.get_text()]
    for ax in fig.axes:
        out.append(ax.get_title())
        out.append(ax.get_ylabel())
        legend = ax.get_legend()
        out += [t.get_text() for t in legend.get_texts()] if legend else []
    return out


def test_the_plot_labels_builds_gpu_aa_and_draws_the_ci_and_the_band():
    import matplotlib.pyplot as plt

    from pinset.measures.bench_analysis import reanalysed
    from pinset.measures.plot import bench_figure

    result = reanalysed(read_bench(json.loads((FIX / "llama-bench" / "h200-48l-adaptive-head-vs-base.json").read_text())))
    doc = result.to_json()
    fig = bench_figure(result)
    texts = "\n".join(_texts(fig))
    plt.close(fig)
    assert "NVIDIA H200" in texts and f"({doc['base']['commit'][:12]})" in texts and "A/A" not in texts
    assert "prompt 512" in texts and "generate 128" in texts and "pp512" not in texts
    row = doc["rows"][0]
    lo, hi = (100 * (x - 1) for x in row["ci95"])
    assert f"CI {lo:+.1f} … {hi:+.1f} %" in texts and f"no-change band ±{100 * row['threshold']:.1f} %" in texts
    aa = bench_figure(read_bench({**doc, "aa_check": True}))
    texts = "\n".join(_texts(aa))
    plt.close(aa)
    assert "(A/A check)" in texts and "A′ (base again)" in texts and "head +" not in texts and "A/A +" in texts
