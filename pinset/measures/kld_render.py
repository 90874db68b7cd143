"""kld documents as people read them: the table rows every kld table shares and the markdown. Works on the kld
JSON (what `pinset kld` writes and `pinset report` loads)."""

from __future__ import annotations

from pathlib import Path

from pinset.markdown_table import table


def _fmt(x, spec=".5g"):
    return "—" if x is None else format(x, spec)


def kld_rows(doc):
    for r in doc["runs"]:
        k = r["kld"] or {}
        yield [r["label"], r["backend"], r["commit"][:12],
               f"{_fmt(r['ppl'] and r['ppl']['value'], '.4f')} ± {_fmt(r['ppl'] and r['ppl']['err'], '.4f')}",
               f"{_fmt(k.get('mean'))} ± {_fmt(k.get('err'))}", _fmt(k.get("median")), _fmt(k.get("p99_9")),
               f"{_fmt(r['same_top_p'] and r['same_top_p']['value'], '.3f')} %",
               f"{_fmt(r['rms_dp'] and r['rms_dp']['value'], '.3f')} %", "ok" if r["ok"] else "FAILED"]


HEADERS = ["run", "backend", "commit", "PPL", "mean KLD", "median KLD", "99.9 % KLD", "same top p", "RMS Δp", "status"]


def kld_markdown(doc) -> str:
    v = doc["verdict"]
    lines = [f"### KL divergence vs CPU: {doc['model']['name']}", "",
             f"Reference: CPU backend, {doc['reference']['build']} ({doc['reference']['commit'][:12]}); "
             f"ctx {doc['ctx']}, {doc['chunks']} chunks of `{Path(doc['text']['path']).name}`.", "",
             *table(HEADERS, kld_rows(doc))]
    lines.append("")
    if v["sigma"] is not None:
        lines.append(f"**Verdict:** head is {v['text']} (head − base mean KLD = {v['head_minus_base_kld']:.3g}"
                     f" ± {v['sigma']:.2g}; device: {', '.join(sorted({r['backend'] for r in doc['runs']}))}).")
    else:
        lines.append(f"**Verdict:** {v['text']}.")
    return "\n".join(lines) + "\n"
