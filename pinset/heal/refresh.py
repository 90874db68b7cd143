"""Refreshed series: the same commits replayed on a build and exported again (`pinset refresh`).

The series of each chosen pin is `git am -3`'d in a worktree of the mirror at the build, after the
earlier pins, and exported with `git format-patch --base=<build>`: messages, authors, dates and order
are the series' own, only context and line numbers move. The proof is the sim's: the pin set with the
refreshed series must give, on that build, the very tree (same tree id) it gave before, with every
refreshed pin applying exactly; anything else is an error and nothing is written.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pinset.errors import RuntimeFailure
from pinset.heal.worktree import Worktree
from pinset.sim import modes
from pinset.sim.changes import series_base
from pinset.sim.engine import Simulator
from pinset.sim.pins import prepare_pins


@dataclasses.dataclass
class Refreshed:
    pin_id: str
    folder: Path            # the pin's patch folder
    old: list[Path]
    new: list[Path]         # in the scratch folder
    start: str              # the commit before the series in the worktree
    end: str                # its last commit
    range_diff: str = ""


def with_series(pinset, replaced: dict[str, list[Path]]):
    """The pin set with some pins' series replaced by other files (in order)."""
    pins = tuple(dataclasses.replace(p, series=tuple(replaced[p.id])) if p.id in replaced else p
                 for p in pinset.pins)
    return dataclasses.replace(pinset, pins=pins)


def resimulate(sim, build, replaced: dict[str, list[Path]]):
    """The build simulated again with `replaced` series (the other pins as prepared before)."""
    changed = with_series(sim.pinset, replaced)
    only = dataclasses.replace(changed, pins=tuple(p for p in changed.pins if p.id in replaced))
    prepared = {**sim.prepared, **prepare_pins(only, None, sim.mirror)}
    return Simulator(changed, sim.mirror, prepared).simulate_build(build)


def refresh_series(sim, build, result, chosen: list[str], scratch: Path) -> list[Refreshed]:
    """Replay the pin set on `build` in a worktree, export each chosen pin's series again."""
    tree = Worktree.add(sim.mirror, scratch / "worktree", build.oid)
    out: list[Refreshed] = []
    try:
        for spec, pin in zip(sim.pinset.pins, result.pins):
            start = tree.head()
            if not pin.applied:
                continue
            tree.apply_pin(spec, sim.prepared[spec.id])
            if spec.id in chosen:
                old = spec.patch_files()
                new = tree.export(start, build.oid, scratch / "new" / spec.id, [p.name for p in old])
                out.append(Refreshed(spec.id, spec.patches, old, new, start, tree.head()))
        for item in out:
            item.range_diff = range_diff(tree, item)
    finally:
        tree.remove()
    return out


def range_diff(tree: Worktree, item: Refreshed) -> str:
    """`git range-diff` of the old series (as commits on its base-commit) and the new one; a diff of
    the patch files when the old series has no base the mirror holds."""
    base = series_base([p.read_text(encoding="utf-8", errors="replace") for p in item.old])
    if base and tree.git("checkout", "-q", "--detach", base).ok:
        applied = tree.am(item.old)
        if applied.ok:
            return tree.git_ok("range-diff", "--no-color", f"{base}..HEAD", f"{item.start}..{item.end}")
        tree.git("am", "--abort")
    shown = []
    for old, new in zip(item.old, item.new):
        diff = tree.git("diff", "--no-index", "--no-color", str(old), str(new))
        shown.append(diff.stdout)
    return "".join(shown)


def prove(sim, build, result, refreshed: list[Refreshed]) -> None:
    """The refreshed pin set gives the same tree on `build`, every refreshed pin exactly."""
    again = resimulate(sim, build, {r.pin_id: r.new for r in refreshed})
    by_id = {p.id: p for p in again.pins}
    for r in refreshed:
        pin = by_id[r.pin_id]
        if not pin.applied or pin.apply_mode != modes.EXACT:
            raise RuntimeFailure(f"refresh of {r.pin_id} on {build.name}: the new series does not apply exactly "
                                 f"({pin.status_text}, {pin.apply_mode or pin.detail}); nothing written")
    if again.tree != result.tree:
        raise RuntimeFailure(f"refresh on {build.name}: the refreshed series give tree {str(again.tree)[:12]}, "
                             f"not the tree {str(result.tree)[:12]} `pinset apply` writes now; nothing written")
