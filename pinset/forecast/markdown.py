"""The forecast as markdown for one tracking issue (or the pin set's PR comment): found again and updated in
place by its hidden marker, never posted anew each night."""

from __future__ import annotations

from pinset.forecast.model import BREAKS, CARRIES, FIXES, MOVES, ForecastPR, ForecastResult
from pinset.markdown_table import table

ICON = {BREAKS: "❌", CARRIES: "⏫", FIXES: "✅", MOVES: "↔️"}
ORDER = (BREAKS, CARRIES, FIXES, MOVES)


def marker(result: ForecastResult) -> str:
    """One tracking issue per upstream repository and pin set file: the digest changes with every patch."""
    return f"<!-- pinset-forecast {result.repo} -->"


def rebase_line(result: ForecastResult, pr: ForecastPR, pin_id: str) -> str:
    """The command that prepares the fix: the BUILD+PR commit is in the cache's mirror
    (refs/pinset/forecast/N), so rebase finds it by its sha there."""
    return f"pinset rebase {pin_id} --onto {pr.onto}"


def forecast_markdown(result: ForecastResult) -> str:
    judged = [pr for pr in result.prs if pr.pins]
    lines = [marker(result), f"## pinset forecast: open PRs of {result.repo} onto `{result.build}` "
             f"(`{result.commit[:12]}`)", ""]
    touching = [pr for pr in result.prs if pr.touches]
    lines.append(f"{len(result.prs)} open PRs, {len(touching)} touch a file of the pin set, "
                 f"{sum(1 for pr in touching if pr.merges is False)} of those do not merge; "
                 f"{sum(1 for pr in judged if pr.pins_with(BREAKS))} break a pin.")
    lines.append("")
    if judged:
        rows = [[f"[#{pr.number}]({pr.url})", pr.title, pr.state,
                 ", ".join(f"{ICON[e.effect]} `{e.id}` {e.effect}" for kind in ORDER for e in pr.pins_with(kind))]
                for pr in _breaking_first(judged)]
        lines += table(["PR", "title", "state", "pins"], rows)
    else:
        lines.append("No open PR changes what a pin does.")
    unmerged = [pr for pr in touching if pr.merges is False]
    if unmerged:
        lines += ["", "Not judged (the PR does not merge onto the build): "
                  + ", ".join(f"[#{pr.number}]({pr.url})" for pr in unmerged)]
    for pr in _breaking_first(judged):
        for e in pr.pins_with(BREAKS):
            lines += ["", f"### #{pr.number} breaks `{e.id}`" + ("" if e.required else " (optional)"), "",
                      f"{pr.title} — {pr.url}", "", e.detail or "does not apply"]
            if e.hunk:
                lines += ["", "The pin wants:", "", *_fenced("diff", e.hunk)]
            if e.has:
                lines += ["", "With the PR the file has:", "", *_fenced("", e.has)]
            lines += ["", f"Prepare the fix: `{rebase_line(result, pr, e.id)}`"]
    return "\n".join(lines) + "\n"


def _breaking_first(prs: list[ForecastPR]) -> list[ForecastPR]:
    """The ranked list with PRs that break a pin first, then those that carry one (the rank kept within)."""
    return sorted(prs, key=lambda pr: (not pr.pins_with(BREAKS), not pr.pins_with(CARRIES)))


def _fenced(lang: str, lines: list[str]) -> list[str]:
    fence = "````" if any("```" in line for line in lines) else "```"
    return [f"{fence}{lang}", *lines, fence]
