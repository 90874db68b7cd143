"""Markdown of pick and blame results; pure functions over their models, so `pinset report` can reuse them.
`write_results` is the one tail of both verbs: their --json and --markdown files."""

from __future__ import annotations

from pinset.markdown_table import table
from pinset.nightly.model import BlameResult, BuildPick, CommitRef, PickResult
from pinset.output import write_result


def _commit(ref: CommitRef | None) -> str:
    if not ref:
        return "—"
    text = f"`{ref.commit[:12]}`"
    if ref.pr:
        text += f" (#{ref.pr})"
    if ref.merge:
        text += f" merge of {ref.merged_commits} commits"
    return text


def blame_markdown(result: BlameResult) -> str:
    good, bad = result.good, result.bad
    return _page(f"Blame from **{good.build}** (`{good.commit[:12]}`) to **{bad.build}** "
                 f"(`{bad.commit[:12]}`): {result.commits} first-parent commits, {result.probes} probed.",
                 ["pin", "status", "last good", "first bad", "subject", "files / problems", "steps"],
                 [[f"`{p.id}`", p.summary(), _commit(p.last_good), _commit(p.first_bad),
                   p.first_bad.subject if p.first_bad else "",
                   ", ".join([f"`{f}`" for f in p.files] + list(p.problems)), p.steps]
                  for p in result.pins])


def pick_markdown(result: PickResult) -> str:
    """The picked base and every build's verdict with its reasons (`pinset report` passes its merged pick rows)."""
    picked = result.picked
    heading = f"Base: picked **{picked}**." if picked else "Base: **no build is green**."
    dropped = dropped_text(result)
    if dropped:
        heading += f" It ships without the optional pins {dropped}."
    return _page(heading, ["build", "commit", "verdict", "why"],
                 [[b.build, f"`{(b.commit or '')[:12]}`", b.verdict, why_text(b)] for b in result.builds])


def dropped_text(result: PickResult) -> str:
    """"`a`, `b`" for the optional pins dropped on the picked build (pick JSON `dropped`)."""
    return ", ".join(f"`{r.pin}`" for r in result.dropped)


def why_text(b: BuildPick, sep: str = "; ") -> str:
    """A pick row's reasons, and on a green build the optional pins it drops ("dropped: pin x (optional) ...")."""
    return sep.join([r.summary() for r in b.reasons] + [f"dropped: {r.summary()}" for r in b.dropped]
                    + [f"pin {pin} applied by recorded resolution {', '.join(ids)}" for pin, ids in b.resolved.items()]
                    + [f"pin {pin} applied by add/add union at {', '.join(places)} (no person wrote it)"
                       for pin, places in b.unioned.items()])


def _page(heading: str, headers: list[str], rows: list[list]) -> str:
    return "\n".join([heading, "", *table(headers, rows)]) + "\n"


def write_results(result: PickResult | BlameResult, json_path: str | None, markdown_path: str | None) -> None:
    """The --json and --markdown files of a pick or blame result."""
    write_result(result, json_path, markdown_path,
                 lambda r: pick_markdown(r) if isinstance(r, PickResult) else blame_markdown(r))
