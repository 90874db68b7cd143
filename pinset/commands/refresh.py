"""`pinset refresh`: rewrite series that apply, but not exactly, on a build so that they apply exactly.

Without --write it shows the `git range-diff` of old and new series and changes nothing; with --write it
replaces each refreshed pin's patch files (the folder swapped whole: see pinset/heal/series.py), only
after the proof (pinset/heal/refresh.py) held for every pin.
"""

from __future__ import annotations

import sys

from pinset.commands.common import add_config_args, open_config, pin_named
from pinset.commands.paths import OUTPUT_FILE, add_path
from pinset.errors import PinsetError
from pinset.heal.model import RefreshedPinJson, RefreshResult
from pinset.heal.refresh import prove, refresh_series
from pinset.heal.series import write_folders
from pinset.output import console, write_json
from pinset.sim.run import pick_builds, simulate
from pinset.store import cache_tmp, scratch_dir


def add_parser(sub):
    p = sub.add_parser(
        "refresh", help="rewrite series so they apply exactly on a build (same commits, moved context)",
        description="For each local-series pin (PIN..., default: every series that applies on BUILD but not "
                    "exactly: offset or 3-way), replay its commits on BUILD after the earlier pins and export "
                    "them again in the queue's own style (its format-patch options; a file whose commit's diff did "
                    "not change keeps its bytes; a `base-commit:` only where the queue has one): same messages, "
                    "authors, dates and order, only context and line numbers moved. Checked before anything is written: the pin set with "
                    "the new series gives the same tree on BUILD as now, each refreshed pin applying exactly. "
                    "Without --write shows the `git range-diff` and changes nothing.")
    add_config_args(p, builds=False)
    p.add_argument("pins", nargs="*", metavar="PIN", help="pin ids (default: every series that needs a refresh)")
    p.add_argument("--onto", required=True, metavar="BUILD", help="the build to fit the series to")
    p.add_argument("--write", action="store_true", help="replace the pins' patch files")
    add_path(p, "--json", role=OUTPUT_FILE, help="write what was refreshed (pins, modes, files) as JSON here")
    return p


def one_build(pinset, selection: str, flag: str) -> list[str]:
    names = pick_builds(pinset, selection, flag=flag)
    if len(names) != 1:
        raise PinsetError(f"{flag} {selection!r}: names {len(names)} builds; give one")
    return names


def the_build(sim, selection: str, flag: str):
    """(build, result) of the one build `selection` names, once resolved: a selector (`tags:b*:2`, a pypi
    range) naming several builds is refused as a comma list is, never narrowed to one of them."""
    if len(sim.builds) != 1:
        shown = ", ".join(b.name for b in sim.builds) or "none"
        raise PinsetError(f"{flag} {selection!r}: names {len(sim.builds)} builds ({shown}); give one")
    return sim.build(sim.builds[0].name)


def not_applied(pinset, result) -> list[str]:
    """Lines for the required pins that do not apply on the build (or broke their contract): no pin of the
    set fits a build on which a required one does not."""
    lines = []
    for spec, pin in zip(pinset.pins, result.pins):
        if spec.required and not pin.ok:
            what = "applied, contract broken" if pin.contract_broken else pin.status_text
            hint = (f"`pinset rebase {pin.id} --onto {result.build}` resolves it" if pin.conflicts
                    else pin.detail or "see `pinset sim`")
            lines.append(f"{pin.id} (required) on {result.build}: {what}: {hint}")
    return lines


def run(args) -> int:
    outcome: list[RefreshResult] = []
    code = _run(args, outcome)
    if args.json and outcome:
        write_json(args.json, outcome[0].to_json())
    return code


def _run(args, outcome: list[RefreshResult]) -> int:
    pinset, store = open_config(args)
    known = {p.id: p for p in pinset.pins}
    for pin_id in args.pins:
        if pin_named(pinset, pin_id, args.config).patches is None:
            raise PinsetError(f"pin {pin_id} is a PR pin: its commits cannot be rewritten "
                              f"(`pinset rebase {pin_id} --as-series patches/NAME` makes it a local series)")
    with simulate(pinset, one_build(pinset, args.onto, "--onto"), store) as sim:
        build, result = the_build(sim, args.onto, "--onto")
        by_id = {p.id: p for p in result.pins}
        broken = not_applied(pinset, result)
        said = RefreshResult(build.name, build.commit, "blocked")
        outcome.append(said)
        if broken:   # the series would be fitted to a tree the pin set does not give: nothing to call exact
            said.problems = broken
            for line in broken:
                console.print(f"[red]{line}[/]", soft_wrap=True)
            console.print(f"{build.name} is not a build the pin set applies on; nothing refreshed, nothing written")
            return 1
        for pin_id in args.pins:
            if not by_id[pin_id].applied:
                said.problems = [f"{pin_id} on {build.name}: {by_id[pin_id].status_text}, not applied"]
                console.print(f"[red]{pin_id}[/] on {build.name}: {by_id[pin_id].status_text}, not applied: "
                              f"`pinset rebase {pin_id} --onto {args.onto}` resolves a conflict; nothing written")
                return 1
            if by_id[pin_id].applied_by_resolution:
                said.problems = [f"{pin_id} on {build.name}: applies by its recorded resolution"]
                console.print(f"[red]{pin_id}[/] on {build.name}: applies by its recorded resolution, which `git am -3` "
                              f"cannot replay; `pinset rebase {pin_id} --onto {args.onto}` fits the series to this "
                              f"build; nothing written")
                return 1
        # the default: offset and 3-way series (the help's words). One applied by its recorded resolution
        # keeps working by it on this build; `git am -3` cannot replay it (it would stop at the conflict).
        chosen = list(args.pins) or [p.id for p in result.pins if known[p.id].patches is not None
                                     and p.needs_refresh]
        exact = [p for p in chosen if by_id[p].applied_exactly]
        for pin_id in exact:
            console.print(f"{pin_id}: applies exactly on {build.name} already")
        chosen = [p for p in chosen if p not in exact]
        said.exact, said.outcome = exact, "nothing"
        if not chosen:
            console.print(f"nothing to refresh on {build.name}: every series named applies exactly")
            return 0
        with scratch_dir(cache_tmp(store.root), "refresh-") as scratch:
            refreshed = refresh_series(sim, build, result, chosen, scratch)
            prove(sim, build, result, refreshed, scratch)
            said.outcome = "refreshed"
            said.refreshed = [RefreshedPinJson(item.pin_id, by_id[item.pin_id].apply_mode or "", str(item.folder),
                                               [f.name for f in item.new]) for item in refreshed]
            for item in refreshed:
                console.print(f"[bold]{item.pin_id}[/]: {by_id[item.pin_id].apply_mode} -> exact on {build.name} "
                              f"({len(item.new)} patches, base {build.oid[:12]}; same tree {str(result.tree)[:12]})")
                sys.stdout.write(item.range_diff if item.range_diff.endswith("\n") or not item.range_diff
                                 else item.range_diff + "\n")
                sys.stdout.flush()
                for note in item.notes:
                    console.print(f"[yellow]note:[/] {item.pin_id}: {note}", soft_wrap=True)
            if not args.write:
                console.print("nothing written (--write replaces the patch files)")
                return 0
            write_folders([(item.folder, item.new, None) for item in refreshed])
            said.outcome = "written"
            console.print(f"wrote {', '.join(f'{i.folder}' for i in refreshed)}")
    return 0
