"""PNG of a bench, one column per benchmark row: per-round t/s of both sides (top), and per-round head/base with
the effect, its CI and the no-change band the verdict rests on (bottom). Labelled with the builds, the GPU and,
for an A/A check, "A/A"; tests by readable names ("prompt 512", "generate 128")."""

from __future__ import annotations

import math
import re
from pathlib import Path

from pinset.measures.bench_model import BenchResult, BenchRow
from pinset.measures.bench_render import is_aa, subject, verdict_text

_TEST = re.compile(r"^(pp|tg)(\d+)$")


def test_name(test: str) -> str:
    """llama-bench's test names for people: pp512 -> "prompt 512", tg128 -> "generate 128",
    "pp512+tg128" -> "prompt 512 + generate 128", "pp512 @ d4096" -> "prompt 512 at depth 4096"."""
    name, _, depth = test.partition(" @ d")
    parts = []
    for part in name.split("+"):
        m = _TEST.match(part.strip())
        parts.append((("prompt " if m.group(1) == "pp" else "generate ") + m.group(2)) if m else part.strip())
    return " + ".join(parts) + (f" at depth {depth}" if depth else "")


def _side_names(result: BenchResult) -> dict[str, str]:
    if result.compares_models:
        return {"base": str(result.base.model), "head": str(result.head.model)}
    if is_aa(result):
        return {"base": "A (base)", "head": "A′ (base again)"}
    return {"base": "base", "head": "head"}


def _builds(result: BenchResult) -> str:
    sides = {"base": result.base, "head": result.head}

    def commit(side: str) -> str:
        return sides[side].commit[:12]

    def build(side: str) -> str:   # a folder (--base-bin/--head-bin) by its name, a pins.yaml build as it is
        name = sides[side].build
        return Path(name).name if name.startswith("/") else name

    if result.compares_models:
        return f"build {build('head')} ({commit('head')})"
    if is_aa(result):
        return f"A/A check: {build('base')} ({commit('base')}) against itself"
    return f"base {build('base')} ({commit('base')}), head {build('head')} ({commit('head')})"


def plot_bench(result: BenchResult, dest: Path) -> Path:
    import matplotlib.pyplot as plt

    fig = bench_figure(result)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dest, dpi=110)
    plt.close(fig)
    return dest


def bench_figure(result: BenchResult):
    """The matplotlib figure plot_bench saves (the caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = result.rows
    names = _side_names(result)
    aa = is_aa(result)
    mark = "A/A" if aa else ("vs " + str(result.base.model) if result.compares_models else "head")
    n = max(1, len(rows))
    cols = min(3, n)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(2 * nrows, cols, figsize=(max(6.4, 4.8 * cols), 5.6 * nrows), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2] * nrows})
    for i, row in enumerate(rows):
        top, bottom = axes[2 * (i // cols)][i % cols], axes[2 * (i // cols) + 1][i % cols]
        rounds = row.rounds or list(range(1, len(row.base_tps) + 1))
        top.plot(rounds, row.base_tps, "o-", color="#1f77b4", label=names["base"])
        top.plot(rounds, row.head_tps, "s-", color="#d62728", label=names["head"])
        ratio = "" if row.ratio is None else f"  {mark} {100 * (row.ratio - 1):+.1f} %"
        params = " ".join(f"{k.replace('n_', '')}={v}" for k, v in row.params.items()
                          if k in ("n_ubatch", "n_batch", "flash_attn"))
        top.set_title(f"{test_name(row.test)}  {params}\n{verdict_text(row)}{ratio}", fontsize=9)
        top.xaxis.set_major_locator(MaxNLocator(integer=True))
        top.set_ylabel("t/s")
        top.grid(alpha=0.3)
        lo = min(row.base_tps + row.head_tps, default=0)
        hi = max(row.base_tps + row.head_tps, default=1)
        pad = (hi - lo) * 0.2 or hi * 0.02 or 1
        top.set_ylim(lo - pad, hi + pad)
        top.legend(fontsize=8)
        _effect_panel(bottom, row, rounds, aa)
    for ax in list(axes.flat):
        if not ax.has_data() and not ax.get_title():
            ax.axis("off")
    gpu = result.gpu.name if result.gpu else "CPU (GPU hidden)"
    fig.suptitle(f"{subject(result)}\n{_builds(result)}; {gpu}; per-round t/s, warm-up round not shown", fontsize=9)
    fig.tight_layout()
    return fig


def _effect_panel(ax, row: BenchRow, rounds: list[int], aa: bool) -> None:
    """Per-round head/base − 1 in %, the effect and its CI (shaded) and the ±band dashed: what the verdict read."""
    from matplotlib.ticker import MaxNLocator

    pct = [100 * (h / b - 1) for b, h in zip(row.base_tps, row.head_tps) if b > 0]
    ax.axhline(0, color="black", lw=0.8)
    if pct:
        ax.plot(rounds[:len(pct)], pct, ".", color="#555555", label="per round")
    band = row.threshold if row.threshold is not None else row.aa_spread
    if band is not None:
        for sign in (1, -1):
            ax.axhline(sign * 100 * band, color="#2ca02c", ls="--", lw=1,
                       label=f"no-change band ±{100 * band:.1f} %" if sign > 0 else None)
    if row.ratio is not None and row.ci95:
        lo, hi = (100 * (x - 1) for x in row.ci95)
        ax.axhspan(lo, hi, color="#d62728" if not aa else "#9467bd", alpha=0.18,
                   label=f"95 % CI {lo:+.1f} … {hi:+.1f} %" if row.ci_method != "t-seq"
                   else f"CI {lo:+.1f} … {hi:+.1f} %")
        ax.axhline(100 * (row.ratio - 1), color="#d62728" if not aa else "#9467bd", lw=1.2)
    ax.set_ylabel("A′/A − 1 (%)" if aa else "head/base − 1 (%)", fontsize=8)
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
