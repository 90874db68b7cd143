"""Bench results as people read them: the markdown table, the cells every table shares, titles and headers.
Works on the bench model (what `pinset bench` writes and `pinset report` loads), so a recorded file renders as
recorded."""

from __future__ import annotations

from statistics import median
from typing import cast

from pinset.markdown_table import table
from pinset.measures.bench_model import BenchResult, BenchRow


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{(x - 1.0) * 100:+.1f} %"


def speed_stat(result: BenchResult) -> str:
    """What the t/s columns of every bench table hold (row_speeds), for the label next to them. Benches
    recorded before METHOD took a run's speed as llama-bench's avg_ts, the mean of its samples."""
    run = "the median of its `-r` samples" if str(result.method).startswith("run speed = median") else \
        "llama-bench's avg_ts, the mean of its `-r` samples, as recorded before pinset took the median"
    return f"median over kept rounds of each run's speed (a run's speed: {run})"


def row_speeds(row: BenchRow) -> tuple[float | None, float | None]:
    """Base and head t/s of a row as every table shows them (bench.md, the console, the report), as speed_stat() says."""
    return (median(row.base_tps) if row.base_tps else None, median(row.head_tps) if row.head_tps else None)


def row_cells(row: BenchRow) -> list[str]:
    n = len(row.base_tps)
    b, h = row_speeds(row)
    ci = row.ci95
    return [row.test, _params_text(row.params), str(n),
            "—" if b is None else f"{b:,.1f}", "—" if h is None else f"{h:,.1f}", _pct(row.ratio),
            "—" if not ci else f"{_pct(ci[0])} … {_pct(ci[1])}",
            "—" if row.p_value is None else f"{row.p_value:.3g}",
            "—" if row.aa_spread is None else f"±{row.aa_spread * 100:.1f} %", verdict_text(row)]


def verdict_text(row: BenchRow) -> str:
    """The verdict, with the further rounds a "too noisy" row suggests."""
    more = row.more_rounds
    return f"{row.verdict} (~{more} more rounds)" if row.verdict == "too noisy" and more else row.verdict


def band_name(result: BenchResult) -> str:
    """What a bench's `aa_spread` column holds, by the file's schema: schema 1 measured an A/A spread, schema 2
    records the sequential rule's no-change band (this module's own table and the report name it alike)."""
    return "no-change band" if result.schema >= 2 else "A/A spread"


HEADERS = ["test", "params", "rounds", "base t/s", "head t/s", "head vs base", "95 % CI", "p", "no-change band",
           "verdict"]


def is_aa(result: BenchResult) -> bool:
    """The bench ran the base programs on both sides (`aa_check`): a check of the machine's noise, shown as "A/A"
    everywhere (never as head's speed)."""
    return result.aa_check and not result.compares_models


def subject(result: BenchResult) -> str:
    """What a bench measured, for titles: the model, "<model> vs <reference>" for a model comparison, and
    "(A/A check)" for an A/A bench."""
    if result.compares_models:
        return f"{result.head.model} vs {result.base.model}"
    return result.model.name + (" (A/A check)" if is_aa(result) else "")


AA_HEADERS = [*HEADERS[:3], "A t/s", "A′ t/s", "A/A difference", *HEADERS[6:]]


def headers(result: BenchResult) -> list[str]:
    """HEADERS, with the two models named when the bench compares models rather than builds, and the two sides
    as A and A′ for an A/A check."""
    if is_aa(result):
        return list(AA_HEADERS)
    if not result.compares_models:
        return list(HEADERS)
    ref, new = result.base.model, result.head.model
    return [*HEADERS[:3], f"{ref} t/s", f"{new} t/s", "vs reference", *HEADERS[6:]]


def p_text(result: BenchResult) -> str | None:
    """What the `p` column holds, for the line under the table: the deciding test's p (rows with `p_test`), or
    the informational signed-rank p of older files."""
    tests = {r.p_test for r in result.rows if r.p_value is not None}
    if not tests:
        return None
    if None in tests:
        return "p: Wilcoxon signed-rank (recorded before pinset showed the deciding test's p), informational"
    per_look = result.decision.alpha_per_look if result.decision else None
    level = f"; a test decides at p < {per_look:.2g} (alpha per look)" if per_look else ""
    return ("p: of the test behind the verdict — t test of no difference for faster/slower/too noisy, equivalence "
            f"(TOST) within the band for no change{level}")


def _params_text(params: dict) -> str:
    keep = {"n_ubatch": "ub", "n_batch": "b", "n_gpu_layers": "ngl", "flash_attn": "fa", "n_threads": "t"}
    return " ".join(f"{short}={params[k]}" for k, short in keep.items() if k in params)


def bench_markdown(result: BenchResult, plot_name: str | None = None) -> str:
    base, head = result.base, result.head
    cols = headers(result)
    if result.compares_models:
        title = f"### llama-bench: {head.model} vs {base.model} (reference), one build"
        sides = (f"build {head.build} ({head.commit[:12]}) for both; "
                 f"the reference model {base.model} runs as \"base\"")
    elif is_aa(result):
        title = f"### llama-bench A/A check: the base build against itself on {result.model.name}"
        sides = (f"A = A′ = {base.build} ({base.commit[:12]}), the same programs on both sides: "
                 "this measures the machine's noise, not head's speed")
    else:
        title = f"### llama-bench: head vs base on {result.model.name}"
        sides = (f"base {base.build} ({base.commit[:12]}), head {head.build} "
                 f"({head.commit[:12]})")
    lines = [title, "",
             f"{sides}; GPU: {result.gpu.name if result.gpu else 'none (CPU)'}; "
             f"{result.rounds} interleaved rounds (first = warm-up) of `-r {result.repetitions}`; "
             f"args `{' '.join(result.llama_bench_args)}`. t/s: {speed_stat(result)}.", "",
             *_decision_lines(result),
             *table(cols, [row_cells(r) for r in result.rows])]
    if p_note := p_text(result):
        lines += ["", p_note + "."]
    if result.reanalysed_from:
        lines += ["", "Re-analysed (`pinset bench --reanalyse`): rows recomputed from the recorded rounds; recorded with "
                  f"the method \"{result.reanalysed_from['method']}\"."]
    if plot_name:
        lines += ["", f"![per-round t/s]({plot_name})"]
    return "\n".join(lines) + "\n"


def _decision_lines(result: BenchResult) -> list[str]:
    """How the verdicts were reached (schema 2), in one paragraph (BenchResult.decision)."""
    dec = result.decision
    if not dec:
        return []
    alpha = cast(float, dec.alpha)   # a schema-2 decision record names them (decision_record)
    looks = (f"stopping allowed after each of {dec.looks} rounds (alpha {alpha:g} spread over them, "
             f"{dec.alpha_per_look:.2g} each)" if cast(int, dec.looks) > 1 else f"one look, {1 - alpha:.0%} CI")
    band = f"from the A/A bench `{dec.noise_from}`" if dec.noise_from else "from this bench's own scatter"
    budget = ""
    if dec.adaptive:
        budget = (f"; budget {dec.max_rounds} rounds / {dec.max_time_s:g} s, used {result.rounds} rounds / "
                  f"{dec.elapsed_s:g} s" + (" — ran out" if dec.budget_ran_out else ""))
    more = f"; the undecided rows suggest ~{dec.more_rounds} more rounds" if dec.more_rounds else ""
    return [f"Decision ({dec.rule}): {looks}; no-change band ±max({dec.margin_min:.0%}, "
            f"{dec.noise_k:g} × per-round noise sd) {band}{budget}{more}.", ""]
