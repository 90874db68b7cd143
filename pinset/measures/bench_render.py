"""Bench documents as people read them: the markdown table, the cells every table shares, titles and headers.
Works on the bench JSON (what `pinset bench` writes and `pinset report` loads), so a recorded file renders as
recorded."""

from __future__ import annotations

from statistics import median

from pinset.markdown_table import table
from pinset.measures.bench_model import exclusion_kind  # noqa: F401  (read by the report with the helpers here)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{(x - 1.0) * 100:+.1f} %"


def speed_stat(doc: dict) -> str:
    """What the t/s columns of every bench table hold (row_speeds), for the label next to them. Benches
    recorded before METHOD took a run's speed as llama-bench's avg_ts, the mean of its samples."""
    run = "the median of its `-r` samples" if str(doc.get("method")).startswith("run speed = median") else \
        "llama-bench's avg_ts, the mean of its `-r` samples, as recorded before pinset took the median"
    return f"median over kept rounds of each run's speed (a run's speed: {run})"


def row_speeds(row: dict) -> tuple[float | None, float | None]:
    """Base and head t/s of a row as every table shows them (bench.md, the console, the report), as speed_stat() says."""
    return (median(row["base_tps"]) if row["base_tps"] else None,
            median(row["head_tps"]) if row["head_tps"] else None)


def row_cells(row: dict) -> list[str]:
    n = len(row["base_tps"])
    b, h = row_speeds(row)
    ci = row["ci95"]
    return [row["test"], _params_text(row["params"]), str(n),
            "—" if b is None else f"{b:,.1f}", "—" if h is None else f"{h:,.1f}", _pct(row["ratio"]),
            "—" if not ci else f"{_pct(ci[0])} … {_pct(ci[1])}",
            "—" if row["p_value"] is None else f"{row['p_value']:.3g}",
            "—" if row["aa_spread"] is None else f"±{row['aa_spread'] * 100:.1f} %", verdict_text(row)]


def verdict_text(row: dict) -> str:
    """The verdict, with the further rounds a "too noisy" row suggests."""
    more = row.get("more_rounds")
    return f"{row['verdict']} (~{more} more rounds)" if row["verdict"] == "too noisy" and more else row["verdict"]


def band_name(doc: dict) -> str:
    """What a bench's `aa_spread` column holds, by the file's schema: schema 1 measured an A/A spread, schema 2
    records the sequential rule's no-change band (this module's own table and the report name it alike)."""
    return "no-change band" if doc.get("schema", 1) >= 2 else "A/A spread"


HEADERS = ["test", "params", "rounds", "base t/s", "head t/s", "head vs base", "95 % CI", "p", "no-change band",
           "verdict"]


def is_aa(doc: dict) -> bool:
    """The bench ran the base programs on both sides (`aa_check`): a check of the machine's noise, shown as "A/A"
    everywhere (never as head's speed)."""
    return bool(doc.get("aa_check")) and doc.get("compare") != "models"


def subject(doc: dict) -> str:
    """What a bench measured, for titles: the model, "<model> vs <reference>" for a model comparison, and
    "(A/A check)" for an A/A bench."""
    if doc.get("compare") == "models":
        return f"{doc['head']['model']} vs {doc['base']['model']}"
    return doc["model"]["name"] + (" (A/A check)" if is_aa(doc) else "")


AA_HEADERS = [*HEADERS[:3], "A t/s", "A′ t/s", "A/A difference", *HEADERS[6:]]


def headers(doc: dict) -> list[str]:
    """HEADERS, with the two models named when the bench compares models rather than builds, and the two sides
    as A and A′ for an A/A check."""
    if is_aa(doc):
        return list(AA_HEADERS)
    if doc.get("compare") != "models":
        return list(HEADERS)
    ref, new = doc["base"]["model"], doc["head"]["model"]
    return [*HEADERS[:3], f"{ref} t/s", f"{new} t/s", "vs reference", *HEADERS[6:]]


def p_text(doc: dict) -> str | None:
    """What the `p` column holds, for the line under the table: the deciding test's p (rows with `p_test`), or
    the informational signed-rank p of older files."""
    tests = {r.get("p_test") for r in doc["rows"] if r.get("p_value") is not None}
    if not tests:
        return None
    if None in tests:
        return "p: Wilcoxon signed-rank (recorded before pinset showed the deciding test's p), informational"
    per_look = (doc.get("decision") or {}).get("alpha_per_look")
    level = f"; a test decides at p < {per_look:.2g} (alpha per look)" if per_look else ""
    return ("p: of the test behind the verdict — t test of no difference for faster/slower/too noisy, equivalence "
            f"(TOST) within the band for no change{level}")


def _params_text(params: dict) -> str:
    keep = {"n_ubatch": "ub", "n_batch": "b", "n_gpu_layers": "ngl", "flash_attn": "fa", "n_threads": "t"}
    return " ".join(f"{short}={params[k]}" for k, short in keep.items() if k in params)


def bench_markdown(doc: dict, plot_name: str | None = None) -> str:
    cols = headers(doc)
    if doc.get("compare") == "models":
        title = f"### llama-bench: {doc['head']['model']} vs {doc['base']['model']} (reference), one build"
        sides = (f"build {doc['head']['build']} ({doc['head']['commit'][:12]}) for both; "
                 f"the reference model {doc['base']['model']} runs as \"base\"")
    elif is_aa(doc):
        title = f"### llama-bench A/A check: the base build against itself on {doc['model']['name']}"
        sides = (f"A = A′ = {doc['base']['build']} ({doc['base']['commit'][:12]}), the same programs on both sides: "
                 "this measures the machine's noise, not head's speed")
    else:
        title = f"### llama-bench: head vs base on {doc['model']['name']}"
        sides = (f"base {doc['base']['build']} ({doc['base']['commit'][:12]}), head {doc['head']['build']} "
                 f"({doc['head']['commit'][:12]})")
    lines = [title, "",
             f"{sides}; GPU: {doc['gpu']['name'] if doc['gpu'] else 'none (CPU)'}; "
             f"{doc['rounds']} interleaved rounds (first = warm-up) of `-r {doc['repetitions']}`; "
             f"args `{' '.join(doc['llama_bench_args'])}`. t/s: {speed_stat(doc)}.", "",
             *_decision_lines(doc),
             *table(cols, [row_cells(r) for r in doc["rows"]])]
    if p_note := p_text(doc):
        lines += ["", p_note + "."]
    if doc.get("reanalysed_from"):
        lines += ["", "Re-analysed (`pinset bench --reanalyse`): rows recomputed from the recorded rounds; recorded with "
                  f"the method \"{doc['reanalysed_from']['method']}\"."]
    if plot_name:
        lines += ["", f"![per-round t/s]({plot_name})"]
    return "\n".join(lines) + "\n"


def _decision_lines(doc: dict) -> list[str]:
    """How the verdicts were reached (schema 2), in one paragraph."""
    dec = doc.get("decision")
    if not dec:
        return []
    looks = (f"stopping allowed after each of {dec['looks']} rounds (alpha {dec['alpha']:g} spread over them, "
             f"{dec['alpha_per_look']:.2g} each)" if dec["looks"] > 1 else f"one look, {1 - dec['alpha']:.0%} CI")
    band = f"from the A/A bench `{dec['noise_from']}`" if dec.get("noise_from") else "from this bench's own scatter"
    budget = ""
    if dec.get("adaptive"):
        budget = (f"; budget {dec['max_rounds']} rounds / {dec['max_time_s']:g} s, used {doc['rounds']} rounds / "
                  f"{dec['elapsed_s']:g} s" + (" — ran out" if dec.get("budget_ran_out") else ""))
    more = f"; the undecided rows suggest ~{dec['more_rounds']} more rounds" if dec.get("more_rounds") else ""
    return [f"Decision ({dec['rule']}): {looks}; no-change band ±max({dec['margin_min']:.0%}, "
            f"{dec['noise_k']:g} × per-round noise sd) {band}{budget}{more}.", ""]
