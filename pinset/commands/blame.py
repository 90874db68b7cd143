"""`pinset blame`: which upstream commit between --good and --bad broke (or landed) each pin."""

from __future__ import annotations

import time

from rich.table import Table

from pinset.commands.common import add_config_args, open_config
from pinset.commands.paths import OUTPUT_FILE, add_path
from pinset.config.selectors import looks_like_selector
from pinset.errors import PinsetError
from pinset.nightly.blame import blame
from pinset.nightly.markdown import write_results
from pinset.nightly.model import BlameResult
from pinset.output import console, err_console
from pinset.sim.pins import prepare_pins
from pinset.upstream.builds import resolve_build
from pinset.upstream.mirror import Mirror

STYLE = {"ok": "green", "upstream": "cyan", "broken-on-good": "yellow"}


def add_parser(sub):
    p = sub.add_parser("blame")
    add_config_args(p, builds=False)
    p.add_argument("--good", required=True, help="a build (tag, branch, commit) on which the pins are fine")
    p.add_argument("--bad", required=True, help="a later build on which some pin is broken")
    p.add_argument("--pin", action="append", metavar="ID", help="bisect only this pin (repeatable; default: all)")
    add_path(p, "--json", role=OUTPUT_FILE, help="write the blame JSON here")
    add_path(p, "--markdown", role=OUTPUT_FILE, help="write a markdown table here")
    return p


def run(args) -> int:
    pinset, store = open_config(args)
    known = {p.id for p in pinset.pins}
    for pin_id in args.pin or []:
        if pin_id not in known:
            raise PinsetError(f"--pin {pin_id}: no such pin in {pinset.path.name} (pins: {', '.join(sorted(known))})")
    if pinset.upstream is None:
        raise PinsetError(f"{pinset.path.name}: blame needs an `upstream:` with git history")
    for flag, name in (("--good", args.good), ("--bad", args.bad)):
        if name.startswith("pypi:") or looks_like_selector(name):
            raise PinsetError(f"{flag} {name}: blame needs one upstream git build (a tag, branch or commit); "
                              "an sdist snapshot or a selector has no history to bisect")
    started = time.monotonic()
    with Mirror(store.mirror) as mirror:
        good = resolve_build(args.good, pinset.upstream, pinset.path.parent, store, mirror)
        bad = resolve_build(args.bad, pinset.upstream, pinset.path.parent, store, mirror)
        prepared = prepare_pins(pinset, store, mirror)
        result = blame(pinset, mirror, prepared, good, bad, list(dict.fromkeys(args.pin or [])) or None,
                       say=lambda text: err_console.print(f"[dim]{text}[/]"))
    console.print(blame_table(result))
    console.print(f"{result.commits} commits, {result.probes} probed, {time.monotonic() - started:.1f} s")
    if result.untested:
        console.print("[yellow]not tested[/]: " + "; ".join(f"pin {p.id} is already {p.good_status} on --good "
                                                           f"{args.good}" for p in result.untested))
    if any(p.broke for p in result.pins):
        console.print("[red]something broke[/]: see the first bad commits above")
    elif result.ok:
        console.print("[green]ok[/]: no pin broke in this range")
    write_results(result, args.json, args.markdown)
    return 0 if result.ok else 1


def blame_table(result: BlameResult) -> Table:
    table = Table(title=f"pinset blame {result.good.build}..{result.bad.build}")
    for column in ("pin", "what happened", "last good", "first bad", "steps"):
        table.add_column(column)
    for p in result.pins:
        style = STYLE.get(p.status, "red")
        first_bad = p.first_bad
        table.add_row(p.id, f"[{style}]{p.summary()}[/]",
                      p.last_good.commit[:12] if p.last_good else "",
                      f"{first_bad.commit[:12]} {first_bad.subject[:50]}" if first_bad else "",
                      str(p.steps))
    return table
