"""PNG of per-round t/s, base vs head, one panel per benchmark row: for people who would rather look."""

from __future__ import annotations

import math
from pathlib import Path

from pinset.measures.bench import subject, verdict_text


def plot_bench(doc: dict, dest: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = doc["rows"]
    models = doc.get("compare") == "models"
    names = {side: (doc[side]["model"] if models else side) for side in ("base", "head")}
    mark = "vs " + names["base"] if models else "head"
    n = max(1, len(rows))
    cols = min(3, n)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.4 * nrows), squeeze=False)
    for ax, row in zip(axes.flat, rows):
        rounds = row.get("rounds") or list(range(1, len(row["base_tps"]) + 1))
        ax.plot(rounds, row["base_tps"], "o-", color="#1f77b4", label=names["base"])
        ax.plot(rounds, row["head_tps"], "s-", color="#d62728", label=names["head"])
        ratio = "" if row["ratio"] is None else f"  {mark} {100 * (row['ratio'] - 1):+.1f} %"
        params = " ".join(f"{k.replace('n_', '')}={v}" for k, v in row["params"].items()
                          if k in ("n_ubatch", "n_batch", "flash_attn"))
        ax.set_title(f"{row['test']} {params}\n{verdict_text(row)}{ratio}", fontsize=9)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("t/s")
        ax.grid(alpha=0.3)
        lo = min(row["base_tps"] + row["head_tps"], default=0)
        hi = max(row["base_tps"] + row["head_tps"], default=1)
        pad = (hi - lo) * 0.2 or hi * 0.02 or 1
        ax.set_ylim(lo - pad, hi + pad)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    fig.suptitle(f"{subject(doc)}: per-round t/s (warm-up round not shown)", fontsize=10)
    fig.tight_layout()
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dest, dpi=110)
    plt.close(fig)
    return dest
