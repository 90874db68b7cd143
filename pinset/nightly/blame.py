"""`pinset blame`: the upstream commit at which each pin stopped being fine, by shared bisection.

Every probe is one `Simulator.simulate_build` of the whole pin set on one upstream commit (in
memory, exactly what `pinset sim` does on a build), so a pin broken by an earlier pin's change is
judged as sim would judge it. Results are cached per commit: a commit is simulated at most once.
"""

from __future__ import annotations

from typing import Callable

from pinset.config.schema import PinSet
from pinset.errors import PinsetError
from pinset.nightly.bisect import bisect_pins
from pinset.nightly.history import Commit, first_parent_line, merged_pr, pr_number
from pinset.nightly.model import BROKEN, CONTRACT, FINE, UPSTREAM, BlameResult, BuildRef, CommitRef, PinBlame, pin_state
from pinset.sim.engine import Simulator
from pinset.sim.model import PinResult
from pinset.sim.pins import PreparedPin
from pinset.upstream.builds import Build
from pinset.upstream.mirror import Mirror


def blame(pinset: PinSet, mirror: Mirror, prepared: dict[str, PreparedPin], good: Build, bad: Build,
          pin_ids: list[str] | None = None, say: Callable[[str], None] = lambda _: None) -> BlameResult:
    """Bisect every chosen pin that is fine on `good` and not on `bad` (or newly upstream)."""
    for build, flag in ((good, "--good"), (bad, "--bad")):
        if build.source != "git":
            raise PinsetError(f"{flag} {build.name}: blame needs upstream git history (a tag, branch or commit), "
                              "not an sdist snapshot")
    line = first_parent_line(mirror, good.oid, bad.oid, good.name, bad.name)
    say(f"{len(line) - 1} first-parent commits from {good.name} to {bad.name}")
    simulator = Simulator(pinset, mirror, prepared, apply_modes=False)  # probes: applies or not, not how
    probed: dict[tuple[int, bool], dict[str, PinResult]] = {}

    def results(index: int, full: bool = True) -> dict[str, PinResult]:
        """sim on line[index]; `full=False` only for the pins' states (see the comment on moved_in_probes)."""
        key = (index, full)
        if key not in probed:
            c = line[index]
            simulator.look_for_moved_code = True if full else moved_in_probes
            simulator.attribute_conflicts = full
            probed[key] = {p.id: p for p in simulator.simulate_build(Build(c.sha, c.sha, c.sha, c.tree, "git")).pins}
        return probed[key]

    moved_in_probes: set[str] = set()   # set below, once the pins' good states are known
    chosen = pin_ids or [p.id for p in pinset.pins]
    at_good, at_bad = results(0), results(len(line) - 1)
    good_states = {pin: pin_state(at_good[pin]) for pin in chosen}
    bad_states = {pin: pin_state(at_bad[pin]) for pin in chosen}
    to_bisect = {pin: s for pin, s in good_states.items()   # fine on good; broken, or newly landed, on bad
                 if s in FINE and bad_states[pin] != s and bad_states[pin] in (UPSTREAM, *BROKEN)}
    if to_bisect:
        say(f"bisecting {', '.join(to_bisect)}")
    # What is bisected is the change that matters on --bad: a pin upstream there is looked for where it
    # landed (a conflict on the way, resolved by the landing, is no cause); a pin broken there, where it
    # stopped being fine (a landing later undone is no cause either). Other states count as the good one.
    landed = {pin for pin in to_bisect if bad_states[pin] == UPSTREAM}

    def bisect_state(pin: str, result: PinResult) -> str:
        state = pin_state(result)
        hit = state == UPSTREAM if pin in landed else state in BROKEN
        return state if hit else good_states[pin]

    # A probe needs each pin's state only: who a conflict is with does not change it, so conflicts are
    # not attributed. The (whole-tree) search for moved code is needed only for the pins that may be
    # found there (good state `upstream`, or bisected for where they landed), and runs only when such
    # a pin does not apply. The two ends and the reported first bad commits get the full sim.
    moved_in_probes = {pin for pin, s in to_bisect.items() if pin in landed or s == UPSTREAM}
    found = bisect_pins(len(line), to_bisect,
                        lambda i: {pin: bisect_state(pin, r) for pin, r in results(i, False).items()
                                   if pin in to_bisect}) if to_bisect else {}

    pins = []
    for pin in chosen:
        if pin not in found:
            status = "ok" if good_states[pin] in FINE else "broken-on-good"
            pins.append(PinBlame(pin, status, good_states[pin], bad_states[pin]))
            continue
        f = found[pin]
        at = results(f.first_bad)[pin]
        problems = list(at.contract.problems) if pin_state(at) == CONTRACT else []
        files = sorted({p.split(":", 1)[0] for p in problems}) if problems else list(at.files)
        pins.append(PinBlame(pin, pin_state(at), good_states[pin], bad_states[pin],
                             _ref(mirror, line[f.last_good]), _ref(mirror, line[f.first_bad]), files, problems,
                             at.conflict_with, at.detail, f.steps, f.monotone))
    for entry in pins:
        entry.resolutions = sorted({*(at_good[entry.id].resolutions or []), *(at_bad[entry.id].resolutions or [])})
    probes = len({index for index, _ in probed} - {0, len(line) - 1})
    return BlameResult(pinset.digest, BuildRef(good.name, good.oid), BuildRef(bad.name, bad.oid), len(line) - 1,
                       probes, pins)


def _ref(mirror: Mirror, commit: Commit) -> CommitRef:
    if not commit.is_merge:
        return CommitRef(commit.sha, commit.subject, pr_number(commit.subject))
    number, count = merged_pr(mirror, commit)
    return CommitRef(commit.sha, commit.subject, number, True, count)
