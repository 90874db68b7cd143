"""kld results as people read them: the table rows every kld table shares and the markdown. Works on the kld
model (what `pinset kld` writes and `pinset report` loads)."""

from __future__ import annotations

from pathlib import Path

from pinset.markdown_table import table
from pinset.measures.kld_model import KldResult
from pinset.measures.perplexity import ValueErr
from pinset.results import Doc


def _fmt(x, spec=".5g"):
    return "—" if x is None else format(x, spec)


def _value(stat: ValueErr | None) -> float | None:
    """The value of a statistic of the model; None where it was not measured."""
    return stat.value if stat else None


def _err(stat: ValueErr | None) -> float | None:
    return stat.err if stat else None


def kld_rows(result: KldResult):
    for r in result.runs:
        k = r.kld
        yield [r.label, r.backend, r.commit[:12],
               f"{_fmt(_value(r.ppl), '.4f')} ± {_fmt(_err(r.ppl), '.4f')}",
               f"{_fmt(k and k.mean)} ± {_fmt(k and k.err)}", _fmt(k and k.median), _fmt(k and k.p99_9),
               f"{_fmt(_value(r.same_top_p), '.3f')} %",
               f"{_fmt(_value(r.rms_dp), '.3f')} %", "ok" if r.ok else "FAILED"]


HEADERS = ["run", "backend", "commit", "PPL", "mean KLD", "median KLD", "99.9 % KLD", "same top p", "RMS Δp", "status"]


def kld_markdown(result: KldResult | dict) -> str:
    if isinstance(result, dict):   # a kld JSON document (the golden tests): read through the model
        result = KldResult.from_json(Doc(result, "kld", "kld"))
    v, ref = result.verdict, result.reference
    lines = [f"### KL divergence vs CPU: {result.model.name}", "",
             f"Reference: CPU backend, {ref.build} ({ref.commit[:12]}); "
             f"ctx {result.ctx}, {result.chunks} chunks of `{Path(result.text.path).name}`.", "",
             *table(HEADERS, kld_rows(result))]
    lines.append("")
    if v.sigma is not None:
        lines.append(f"**Verdict:** head is {v.text} (head − base mean KLD = {v.head_minus_base_kld:.3g}"
                     f" ± {v.sigma:.2g}; device: {result.device}).")
    else:
        lines.append(f"**Verdict:** {v.text}.")
    return "\n".join(lines) + "\n"
