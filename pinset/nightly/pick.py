"""`pinset pick`: the newest build on which the pin set is green, and why each newer one was passed over.

Builds are simulated newest first, one at a time, until one is green (every required pin applied or
upstream with an intact contract) and, when a confirmation is asked for (`--verify`), confirmed; older
builds are not simulated at all. A newer git build passed over because a pin conflicts or broke its
contract is blamed against the picked build when it descends from it, so the reason names the
upstream commit (and PR) that broke the pin.
"""

from __future__ import annotations

from typing import Callable

from pinset.config.schema import PinSet
from pinset.nightly.blame import blame
from pinset.nightly.model import (
    NOT_GREEN,
    NOT_TRIED,
    PICKED,
    VERIFY_FAILED,
    BuildPick,
    PickResult,
    Reason,
    pin_state,
)
from pinset.sim.engine import Simulator
from pinset.sim.model import BuildResult, PinResult
from pinset.sim.pins import PreparedPin
from pinset.upstream.builds import Build
from pinset.upstream.mirror import Mirror

Confirm = Callable[[Build, BuildResult], tuple[bool, dict]]
"""A second opinion on a green build (`pinset verify`): (ok, {"failed_gates": [...], ...})."""


def pick(pinset: PinSet, mirror: Mirror, prepared: dict[str, PreparedPin], newest_first: list[Build],
         confirm: Confirm | None = None, say: Callable[[str], None] = lambda _: None) -> PickResult:
    simulator = Simulator(pinset, mirror, prepared)
    rows: list[BuildPick] = []
    picked: Build | None = None
    for build in newest_first:
        if picked is not None:
            rows.append(BuildPick(build.name, None, NOT_TRIED))
            continue
        say(f"{build.name}: simulating the pin set")
        result = simulator.simulate_build(build)
        if not result.ok:
            rows.append(BuildPick(build.name, build.commit, NOT_GREEN,
                                  [_reason(p) for p in result.pins if not p.ok]))
            continue
        row = BuildPick(build.name, build.commit, PICKED, dropped=[_reason(p) for p in result.pins if not p.ok],
                        resolved={p.id: list(p.resolutions) for p in result.pins if p.resolutions},
                        unioned={p.id: [f"{u.file}:{u.line}" for u in p.unions] for p in result.pins
                                 if p.applied and p.unions})
        if confirm is not None:
            ok, summary = confirm(build, result)
            row.verify = {"ok": ok, **summary}
            if not ok:
                row.verdict = VERIFY_FAILED
                gates = ", ".join(summary.get("failed_gates") or []) or "a gate did not pass"
                row.reasons = [Reason(None, "verify", detail=gates)]
                rows.append(row)
                continue
        rows.append(row)
        picked = build
    if picked is not None:
        _blame_passed_over(pinset, mirror, prepared, picked, newest_first, rows, say)
    return PickResult(pinset.digest, picked.name if picked else None, rows, confirm is not None)


def _reason(pin: PinResult) -> Reason:
    state = pin_state(pin)
    problems = list(pin.contract.problems) if pin.contract_broken else []
    files = sorted({p.split(":", 1)[0] for p in problems}) if problems else list(pin.files)
    return Reason(pin.id, state, pin.required, pin.conflict_with, files, problems, pin.detail)


def _blame_passed_over(pinset, mirror, prepared, picked: Build, builds: list[Build], rows: list[BuildPick],
                       say) -> None:
    """Name the upstream commit behind each pin that fails on a newer git build descending from `picked`."""
    by_name = {b.name: b for b in builds}
    for row in rows:
        build = by_name[row.build]
        pins = [r.pin for r in row.reasons if r.pin and r.broken_by_upstream]
        if row.verdict != NOT_GREEN or not pins or picked.source != "git" or build.source != "git" \
                or build.oid == picked.oid or not mirror.git("merge-base", "--is-ancestor", picked.oid, build.oid).ok:
            continue
        say(f"{build.name}: bisecting {', '.join(pins)} from {picked.name}")
        found = {p.id: p for p in blame(pinset, mirror, prepared, picked, build, pins).pins}
        for reason in row.reasons:
            if reason.pin in found and found[reason.pin].first_bad is not None:
                reason.upstream_commit = found[reason.pin].first_bad
                reason.monotone = found[reason.pin].monotone
