"""llama-perplexity parser on real output captured from the CPU build (tests/fixtures/README-perplexity.md)."""

from __future__ import annotations

import pytest

from pinset.measures.perplexity import base_problem, cut_short, kld_problem, parse_perplexity
from tests.testing import FIXTURES

FIX = FIXTURES / "perplexity"


def load(name: str):
    return parse_perplexity((FIX / f"{name}.stdout").read_text(), (FIX / f"{name}.stderr").read_text())


def test_reference_run_final_ppl_is_on_stderr_and_chunks_on_stdout():
    out = load("ref-cpu-f16")
    assert out.final_ppl.value == pytest.approx(2735044.2682)
    assert out.final_ppl.err == pytest.approx(465244.85013)
    assert out.chunk_ppls == [2161623.8111, 2361814.4616, 2735044.2682]
    assert (out.n_chunks, out.n_ctx) == (3, 256)
    assert out.kld is None and out.errors == []
    assert base_problem(out, 0) is None
    # where the lines are: the final estimate only on stderr, the per-chunk list only on stdout
    assert "Final estimate" not in (FIX / "ref-cpu-f16.stdout").read_text()
    assert parse_perplexity("", (FIX / "ref-cpu-f16.stderr").read_text()).chunk_ppls == []


def test_kld_run_blocks():
    out = load("kld-iq1m-vs-f16")
    k = out.kld
    assert k is not None and kld_problem(out, 0, gpu=False) is None
    assert (k.kld_mean.value, k.kld_mean.err) == (3.544505, 0.067744)
    assert k.kld_percentiles["99.9"] == 8.729576
    assert k.kld_percentiles["max"] == 9.076786 and k.kld_percentiles["min"] == 0.323141
    assert k.kld_median == 3.375562
    assert (k.same_top_p_pct.value, k.same_top_p_pct.err) == (20.997, 2.089)
    assert (k.rms_dp_pct.value, k.rms_dp_pct.err) == (3.875, 1.314)
    assert k.ppl_q.value == 2218312.743252 and k.ppl_base.value == 1965443.507937
    assert k.ln_ppl_ratio.value == 0.121029
    assert k.dp_percentiles_pct["0.1"] == -51.653
    assert out.final_ppl is None  # a --kl-divergence run prints no "Final estimate"
    # the KLD block is on stdout: stderr alone has none
    assert parse_perplexity("", (FIX / "kld-iq1m-vs-f16.stderr").read_text()).kld is None


def test_bad_base_file_exits_0_without_block_and_the_error_is_reported():
    out = load("kld-bad-base-file")
    assert out.kld is None
    problem = kld_problem(out, 0, gpu=False)
    assert problem and "does not look like a file containing log-probabilities" in problem


def test_too_few_tokens_exits_0_without_statistics():
    out = load("kld-too-few-tokens")
    assert out.kld is None and out.errors == []
    assert "no KL divergence block" in kld_problem(out, 0, gpu=False)


def test_output_cut_at_exit_is_told_from_a_refusal():
    """kld-cut-at-exit: a real run that exited 0 after chunk 1 of 2 (llama.cpp's log thread had not written the
    rest when the process ended); the refusals and the whole runs are not cut."""
    cut = load("kld-cut-at-exit")
    assert (cut.kld_rows, cut.n_chunks, cut.n_ctx) == (1, 2, 256) and cut.kld is None and cut.errors == []
    assert cut_short(cut, 0)
    assert "the output ended early (1 of 2 chunk rows, no statistics)" in kld_problem(cut, 0)
    assert not cut_short(cut, 1) and not cut_short(cut, None)       # a failed or timed-out run is what it is
    few = load("kld-too-few-tokens")                                 # a whole table of 63 tokens: upstream's refusal
    assert few.kld_rows == few.n_chunks == 1 and not cut_short(few, 0)
    assert "fewer than 100 evaluated tokens" in kld_problem(few, 0)
    assert not cut_short(load("kld-bad-base-file"), 0)               # an error was printed
    assert not cut_short(load("kld-iq1m-vs-f16"), 0)                 # whole (its timings lost, as is usual)
    assert load("kld-iq1m-vs-f16").kld_rows == 3
    # the same rows with a whole table of >= 100 tokens but no statistics: cut between the table and the block
    whole_table = (FIX / "kld-iq1m-vs-f16.stdout").read_text().split("====== Perplexity")[0]
    assert cut_short(parse_perplexity(whole_table, (FIX / "kld-iq1m-vs-f16.stderr").read_text()), 0)
    # a row cut inside its last column is not a row
    row_cut = (FIX / "kld-cut-at-exit.stdout").read_text().rstrip("\n")[:-3]
    assert parse_perplexity(row_cut, "").kld_rows == 0


def test_cudas_failed_init_with_hidden_gpus_is_no_error_of_a_cpu_run():
    """A CUDA build run with CUDA_VISIBLE_DEVICES= (the reference, --cpu) prints ggml_cuda_init's error line; a cut
    CPU run is still cut, and its reason is the cut, not that line. For a run that claims a GPU it is the reason."""
    hidden = "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected\n"
    cut = parse_perplexity((FIX / "kld-cut-at-exit.stdout").read_text(), hidden + (FIX / "kld-cut-at-exit.stderr").read_text())
    assert cut.errors and cut_short(cut, 0) and not cut_short(cut, 0, gpu=True)
    assert "the output ended early" in kld_problem(cut, 0) and "failed to initialize CUDA" in kld_problem(cut, 0, gpu=True)
    err = (FIX / "ref-cpu-f16.stderr").read_text()
    ref = parse_perplexity((FIX / "ref-cpu-f16.stdout").read_text(), hidden + err[: err.index("Final estimate")])
    assert cut_short(ref, 0, reference=True) and "ended early" in base_problem(ref, 0)
    few = parse_perplexity((FIX / "kld-too-few-tokens.stdout").read_text(), hidden + (FIX / "kld-too-few-tokens.stderr").read_text())
    assert not cut_short(few, 0) and "fewer than 100 evaluated tokens" in kld_problem(few, 0)


def test_a_reference_cut_before_its_final_estimate():
    err = (FIX / "ref-cpu-f16.stderr").read_text()
    cut = parse_perplexity((FIX / "ref-cpu-f16.stdout").read_text(), err[: err.index("Final estimate")])
    assert cut_short(cut, 0, reference=True) and "ended early" in base_problem(cut, 0)
    assert not cut_short(load("ref-cpu-f16"), 0, reference=True)
    refused = parse_perplexity("", err.replace("perplexity: tokenizing", "perplexity: error: you need at least"))
    assert not cut_short(refused, 0, reference=True)


def test_nonzero_exit_is_a_problem_even_with_a_block():
    out = load("kld-iq1m-vs-f16")
    assert "exited 1" in kld_problem(out, 1, gpu=False)


def test_truncated_block_is_not_a_result():
    text = (FIX / "kld-iq1m-vs-f16.stdout").read_text()
    cut = text[: text.index("====== Token probability statistics ======")]
    assert parse_perplexity(cut, "").kld is None


def test_a_percentile_printed_twice_is_unreadable():
    text = (FIX / "kld-iq1m-vs-f16.stdout").read_text()
    out = parse_perplexity(text.replace("Median  KLD:   3.375562", "Median  KLD:   3.375562\nMedian  KLD:   0.1"), "")
    assert out.kld is None and "unreadable" in kld_problem(out, 0)
