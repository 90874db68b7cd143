"""`pinset sim`: the pin set on every build, in memory."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from pinset import ci_annotations, output
from pinset.commands.common import add_config_args, open_config
from pinset.commands.paths import OUTPUT_FILE, add_path
from pinset.commands.prs import add_pr_state_arg, ask_pr_states
from pinset.output import write_result
from pinset.sim.markdown import base_line, fix_command, numbered, place_label, pr_label, sim_markdown
from pinset.sim.model import BuildResult, PinResult, SimResult
from pinset.sim.run import pick_builds, simulate

if TYPE_CHECKING:
    from rich.table import Table

STYLE = {"applied": "green", "upstream": "cyan", "conflict": "red", "skipped": "yellow", "error": "red"}


def add_parser(sub):
    p = sub.add_parser(
        "sim",
        description="Apply every pin of pins.yaml, in order, onto each upstream build (pins.yaml's builds, or "
                    "--builds) in a private git mirror in the cache, without checking anything out, and check "
                    "each pin's contracts (symbols that must exist). Prints a table of pin x build; --json "
                    "and --markdown write the same result. Exit 1 when a required pin fails on a build.")
    add_config_args(p)
    add_path(p, "--json", role=OUTPUT_FILE, help="write the result JSON here")
    add_path(p, "--markdown", role=OUTPUT_FILE, help="write a markdown grid here")
    add_pr_state_arg(p)
    return p


def run(args) -> int:
    pinset, store = open_config(args)
    prs = ask_pr_states(pinset, args)
    builds = pick_builds(pinset, args.builds)
    with simulate(prs.without_skipped(pinset), builds, store) as sim:
        result = sim.result
    result.pinset_digest, result.prs = pinset.digest, prs if prs.pins else None
    if output.stdout_is_terminal():
        _print_report(result)
    else:  # a pipe, a file, a CI log without FORCE_COLOR: the same words laid out once, one write (rich not imported)
        sys.stdout.write(plain_report(result))
        sys.stdout.flush()
    write_result(result, args.json, args.markdown, lambda r: sim_markdown(r, conflicts=True))
    ci_annotations.sim_annotations(pinset, result)   # GitHub Actions only: pins.yaml lines, patch files
    ci_annotations.step_summary("## pinset sim\n\n" + sim_markdown(result, conflicts=True))
    return 0 if result.ok else 1


OK = "ok: every required pin applies with an intact contract"
NOT_OK = "not ok: a required pin failed or broke its contract"


def _problems(result: SimResult, mark=lambda style, text: text) -> list[str]:
    """The lines under the grid: each conflict (with its place), error and contract problem, then the
    verdict. `mark(style, text)` styles a piece (rich markup on a terminal, nothing off one)."""
    lines: list[str] = [f"  {mark('yellow', line.split(':', 1)[0])}:{mark('', line.split(':', 1)[1])}"
                        if ":" in line else f"  {mark('', line)}" for line in pr_lines(result)]
    for b in result.builds:
        for p in b.pins:
            if p.conflicts:
                shown = ", ".join(p.files[:4]) + (f", … ({len(p.files)} files)" if len(p.files) > 4 else "")
                lines.append(f"  {mark('red', p.id)} on {mark('', short_build(b.build))}: conflicts with "
                             f"{mark('', str(p.conflict_with))} in {mark('', shown)}")
                if p.detail:
                    lines.append(f"    {mark('', p.detail)}")
                lines += _conflict_place(b, p, mark)
            elif p.errored:
                lines.append(f"  {mark('red', p.id)} on {mark('', short_build(b.build))}: {mark('', str(p.detail))}")
            else:
                for problem in p.contract.problems:
                    lines.append(f"  {mark('red', p.id)} on {mark('', short_build(b.build))}: {mark('', problem)}")
                for union in p.unions or []:   # what no person wrote: every unioned hunk, for a reviewer
                    lines.append(f"  {mark('yellow', p.id)} on {mark('', short_build(b.build))}: union (no person "
                                 f"wrote it; verify it) at {mark('', union.text())}")
    lines.append(mark("green", OK) if result.ok else mark("red", NOT_OK))
    return lines


def _markup(style: str, text: str) -> str:
    from rich.markup import escape

    return f"[{style}]{escape(text)}[/]" if style else escape(text)


def _print_report(result: SimResult) -> None:
    """The grid and each problem on a terminal, in colour (rich)."""
    output.console.print(sim_table(result))
    for line in _problems(result, _markup):
        output.console.print(line, soft_wrap=True)


def plain_report(result: SimResult) -> str:
    """What _print_report shows, without rich: the grid as aligned columns and the same lines, laid out in one
    pass (rich's table and one print per line cost a second for a 36-pin queue on 4 builds, read by nobody)."""
    header = ["pin", *(f"{short_build(b.build)} {b.commit[:9]}" for b in result.builds)]
    rows = [header]
    for i, pin_id in enumerate([p.id for p in result.builds[0].pins] if result.builds else []):
        optional = "" if result.builds[0].pins[i].required else " (optional)"
        rows.append([pin_id + optional + pr_label(result, pin_id), *(_cell(b.pins[i]) for b in result.builds)])
    rows += [[label, *(cell for _ in result.builds)] for label, cell in skipped_rows(result)]
    widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
    grid = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(["pinset sim", *grid, *_problems(result)]) + "\n"


def _conflict_place(build: BuildResult, pin: PinResult, mark) -> list[str]:
    """The hunk as the pin wants it, what the build has there now, its commit and the command to start fixing."""
    lines: list[str] = []
    if pin.hunk:
        lines.append("    the pin wants:")
        lines += [f"      {mark('dim', line)}" for line in pin.hunk]
    if pin.build_has is not None:
        lines.append(f"    {mark('', build.build)} has now ({mark('', place_label(pin.build_has))}):")
        lines += [f"      {mark('dim', line)}" for line in numbered(pin.build_has)]
    lines.append(f"    {mark('', base_line(build).replace('`', ''))}")
    lines.append(f"    start fixing: {mark('', fix_command(build, pin))}")
    return lines


class _Built(Protocol):
    """A build as a result names it (sim's BuildResult, verify's BuildVerification)."""

    build: str
    commit: str


def build_grid(title: str, first: str, builds: Sequence[_Built], sha_len: int) -> Table:
    """A table of a column `first` and one column per build, headed by its short name over its commit; overflow=
    "fold": on a narrow terminal a long pin id, status, build name or op list wraps instead of ending in "…"."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column(first, overflow="fold")
    for b in builds:
        table.add_column(f"{short_build(b.build)}\n{b.commit[:sha_len]}", overflow="fold")
    return table


def sim_table(result: SimResult) -> Table:
    table = build_grid("pinset sim", "pin", result.builds, 9)
    ids = [p.id for p in result.builds[0].pins] if result.builds else []
    for i, pin_id in enumerate(ids):
        cells = []
        for b in result.builds:
            cells.append(_cell(b.pins[i], _markup))
        optional = "" if result.builds[0].pins[i].required else " [dim](optional)[/]"
        label = pr_label(result, pin_id)
        table.add_row(pin_id + optional + (_markup("dim", label) if label else ""), *cells)
    for label, cell in skipped_rows(result):
        table.add_row(_markup("", label), *(_markup("yellow", cell) for _ in result.builds))
    return table


def skipped_rows(result: SimResult) -> list[tuple[str, str]]:
    """(pin label, cell) of each pin left out because its PR is not open (`skip-unless-open`), below the grid's
    rows: the same words in every build's column."""
    if result.prs is None:
        return []
    return [(s.pin + ("" if s.required else " (optional)"), f"not open ({s.state}): skipped")
            for s in result.prs.skipped()]


def pr_lines(result: SimResult) -> list[str]:
    """The PR pins a reader must know about (skipped, closed or merged, head moved, changes requested), and why
    their state is unknown when it could not be asked."""
    return [] if result.prs is None else result.prs.lines()


def _cell(p: PinResult, mark=lambda style, text: text) -> str:
    text = mark(STYLE[p.status], p.status_text)
    if p.needs_refresh:
        text += " " + mark("dim", f"({p.apply_mode}: needs a refresh)")
    if p.conflict_with:
        text += f" ← {mark('', p.conflict_with)}"
    if p.retire:
        text += " (retire)"
    if p.applied and not p.contract.ok:
        text += " " + mark("red", "contract broken")
    return text


def short_build(name: str) -> str:
    """`pypi:llama-cpp-python==0.3.36` -> `lcp 0.3.36`: table columns stay readable on 80 columns."""
    if name.startswith("pypi:llama-cpp-python=="):
        return "lcp " + name.split("==", 1)[1]
    return name
