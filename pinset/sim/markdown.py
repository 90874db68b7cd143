"""Markdown grid of a sim result (builds x pins); pure, also used by `pinset report`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinset.markdown_table import table
from pinset.sim.model import BuildResult, PinResult, SimResult

if TYPE_CHECKING:
    from pinset.sim.apply_errors import BuildPlace

ICON = {"applied": "✅", "upstream": "⏫", "conflict": "❌", "skipped": "⏭️", "error": "⚠️"}


def pr_label(sim: SimResult, pin_id: str) -> str:
    """` (PR merged)` after a PR pin's id in the grid, when its state is known; "" otherwise."""
    state = sim.prs.of(pin_id) if sim.prs is not None else None
    if state is None or state.state == "unknown":
        return ""
    return f" (PR {state.state}" + (f", {state.behind} behind" if state.behind else "") + \
        (", force-pushed" if state.on_head is False else "") + ")"


def cell(pin: PinResult) -> str:
    text = f"{ICON.get(pin.status, '')} {pin.status_text}"
    if pin.conflict_with:
        text += f" with `{pin.conflict_with}`"
    if pin.retire:
        text += " (retire)"
    if pin.applied and not pin.contract.ok:
        text += " — contract broken"
    return text


def sim_markdown(sim: SimResult, conflicts: bool = False) -> str:
    """The grid and the contract problems; with `conflicts`, why each conflict happened (the
    report lists causes itself, so it leaves them out)."""
    builds = sim.builds
    if not builds:
        return "_no builds_\n"
    # by pin id, every pin any build has (a result without a pin shows "no result", never a shifted column)
    first: dict[str, PinResult] = {}
    for b in builds:
        for p in b.pins:
            first.setdefault(p.id, p)
    pins = list(first.values())
    by_build = [{p.id: p for p in b.pins} for b in builds]
    rows = [[f"`{pin.id}`" + ("" if pin.required else " (optional)") + pr_label(sim, pin.id),
             *(cell(have[pin.id]) if pin.id in have else "— no result" for have in by_build)] for pin in pins]
    skipped = sim.prs.skipped() if sim.prs is not None else []
    rows += [[f"`{st.pin}`" + ("" if st.required else " (optional)"),
              *(f"⏭️ not open ({st.state}): skipped" for _ in builds)] for st in skipped]
    lines = table(["pin", *(f"{b.build} (`{b.commit[:9]}`)" for b in builds)], rows)
    if sim.prs is not None and (said := sim.prs.lines()):
        lines += ["", "Pull requests:", *(f"- {line}" for line in said)]
    problems = [f"- **{b.build}** `{p.id}`: {prob}" for b in builds for p in b.pins
                for prob in p.contract.problems]
    if problems:
        lines += ["", "Problems:", *problems]
    unions = union_lines(sim)
    if unions:
        lines += ["", *unions]
    causes = [item for b in builds for p in b.pins if p.conflicts
              for item in _conflict_cause(b, p)] if conflicts else []
    if causes:
        lines += ["", "Conflicts:", *causes]
    return "\n".join(lines) + "\n"


def union_lines(sim: SimResult) -> list[str]:
    """Every add/add conflict pinset unioned itself (pins.yaml `unions:`), for a reviewer: no person wrote them."""
    items = [f"- **{b.build}** `{p.id}`: {_tick(u.file)}:{u.line}: upstream added "
             f"{_tick(' / '.join(x.strip() for x in u.upstream if x.strip()))}, the pin "
             f"{_tick(' / '.join(x.strip() for x in u.pin if x.strip()))}"
             for b in sim.builds for p in b.pins if p.applied for u in p.unions or []]
    return ["Unions (add/add conflicts resolved by pinset, upstream's addition first; no person wrote them):",
            "", *items] if items else []


def _tick(text: str) -> str:
    """Inline code that holds backticks too."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{' ' if fence == '``' else ''}{text}{' ' if fence == '``' else ''}{fence}"


def _conflict_cause(build: BuildResult, pin: PinResult) -> list[str]:
    """A list item with git's reason, the hunk as the pin wants it next to what the build has there now, the
    build's commit to rebase onto and the command that starts fixing it."""
    item = [f"- **{build.build}** `{pin.id}`: {pin.detail or 'does not apply'}"]
    if pin.hunk:
        item += ["", "  The pin wants:", "", *_fenced("diff", pin.hunk)]
    place = pin.build_has
    if place:
        item += ["", f"  {build.build} has now ({place_label(place)}):", "", *_fenced("", numbered(place))]
    item += ["", f"  {base_line(build)}", f"  Start fixing: `{fix_command(build, pin)}`"]
    return item


def _fenced(lang: str, lines: list[str]) -> list[str]:
    fence = "````" if any("```" in line for line in lines) else "```"
    return [f"  {fence}{lang}", *(f"  {line}" for line in lines), f"  {fence}"]


def place_label(place: BuildPlace) -> str:
    """"src/f.c lines 40–52"."""
    end = place.start + len(place.lines) - 1
    return f"{place.path} lines {place.start}–{end}" if place.lines else f"{place.path} (empty)"


def numbered(place: BuildPlace) -> list[str]:
    width = len(str(place.start + len(place.lines)))
    return [f"{n:>{width}} | {line}" for n, line in enumerate(place.lines, place.start)]


def base_line(build: BuildResult) -> str:
    """The build's real commit, for `git format-patch --base` (a pypi build: its CHANGELOG's llama.cpp commit
    and the mirror's commit of the sdist's tree, which is what the pin applies onto)."""
    text = f"Build commit: `{build.commit}` (`git format-patch --base={build.commit}`)"
    if build.mirror_commit:
        text += f"; the sdist's tree is mirror commit `{build.mirror_commit}`"
    return text


def fix_command(build: BuildResult, pin: PinResult) -> str:
    return f"pinset rebase {pin.id} --onto {build.build}"
