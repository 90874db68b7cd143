"""`pinset sim`: the pin set on every build, in memory."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from pinset import ci_annotations
from pinset.commands.common import add_config_args, open_config
from pinset.output import check_outputs, console, write_json, write_text
from pinset.sim.markdown import base_line, fix_command, numbered, place_label, sim_markdown
from pinset.sim.model import BuildResult, PinResult, SimResult
from pinset.sim.run import pick_builds, simulate

STYLE = {"applied": "green", "upstream": "cyan", "conflict": "red", "skipped": "yellow", "error": "red"}


def add_parser(sub):
    p = sub.add_parser(
        "sim",
        description="Apply every pin of pins.yaml, in order, onto each upstream build (pins.yaml's builds, or "
                    "--builds) in a private git mirror in the cache, without checking anything out, and check "
                    "each pin's contracts (symbols that must exist). Prints a table of pin x build; --json "
                    "and --markdown write the same result. Exit 1 when a required pin fails on a build.")
    add_config_args(p)
    p.add_argument("--json", help="write the result JSON here")
    p.add_argument("--markdown", help="write a markdown grid here")
    return p


def run(args) -> int:
    check_outputs({"--json": args.json, "--markdown": args.markdown}, inputs=[args.config])
    pinset, store = open_config(args)
    with simulate(pinset, pick_builds(pinset, args.builds), store) as sim:
        result = sim.result
    console.print(sim_table(result))
    for b in result.builds:
        for p in b.pins:
            if p.conflicts:
                shown = ", ".join(p.files[:4]) + (f", … ({len(p.files)} files)" if len(p.files) > 4 else "")
                console.print(f"  [red]{p.id}[/] on {short_build(b.build)}: conflicts with {p.conflict_with} in {shown}")
                if p.detail:
                    console.print(f"    {escape(p.detail)}")
                _print_conflict_place(b, p)
            elif p.errored:
                console.print(f"  [red]{p.id}[/] on {short_build(b.build)}: {p.detail}")
            else:
                for problem in p.contract.problems:
                    console.print(f"  [red]{p.id}[/] on {short_build(b.build)}: {problem}")
    verdict = "[green]ok[/]: every required pin applies with an intact contract" if result.ok \
        else "[red]not ok[/]: a required pin failed or broke its contract"
    console.print(verdict)
    if args.json:
        write_json(args.json, result.to_json())
    if args.markdown:
        write_text(args.markdown, sim_markdown(result, conflicts=True))
    ci_annotations.sim_annotations(pinset, result)   # GitHub Actions only: pins.yaml lines, patch files
    ci_annotations.step_summary("## pinset sim\n\n" + sim_markdown(result, conflicts=True))
    return 0 if result.ok else 1


def _print_conflict_place(build: BuildResult, pin: PinResult) -> None:
    """The hunk as the pin wants it, what the build has there now, its commit and the command to start fixing."""
    if pin.hunk:
        console.print("    the pin wants:")
        for line in pin.hunk:
            console.print(f"      [dim]{escape(line)}[/]", soft_wrap=True)
    if pin.build_has is not None:
        console.print(f"    {escape(build.build)} has now ({escape(place_label(pin.build_has))}):")
        for line in numbered(pin.build_has):
            console.print(f"      [dim]{escape(line)}[/]", soft_wrap=True)
    console.print(f"    {escape(base_line(build).replace('`', ''))}", soft_wrap=True)
    console.print(f"    start fixing: {escape(fix_command(build, pin))}", soft_wrap=True)


def sim_table(result: SimResult) -> Table:
    table = Table(title="pinset sim")
    # overflow="fold": on a narrow terminal a long pin id or status wraps instead of ending in "…".
    table.add_column("pin", overflow="fold")
    for b in result.builds:
        table.add_column(f"{short_build(b.build)}\n{b.commit[:9]}", overflow="fold")
    ids = [p.id for p in result.builds[0].pins] if result.builds else []
    for i, pin_id in enumerate(ids):
        cells = []
        for b in result.builds:
            p = b.pins[i]
            text = f"[{STYLE[p.status]}]{p.status_text}[/]"
            if p.needs_refresh:
                text += f" [dim]({p.apply_mode}: needs a refresh)[/]"
            if p.conflict_with:
                text += f" ← {p.conflict_with}"
            if p.retire:
                text += " (retire)"
            if p.applied and not p.contract.ok:
                text += " [red]contract broken[/]"
            cells.append(text)
        optional = "" if result.builds[0].pins[i].required else " [dim](optional)[/]"
        table.add_row(pin_id + optional, *cells)
    return table


def short_build(name: str) -> str:
    """`pypi:llama-cpp-python==0.3.36` -> `lcp 0.3.36`: table columns stay readable on 80 columns."""
    if name.startswith("pypi:llama-cpp-python=="):
        return "lcp " + name.split("==", 1)[1]
    return name
