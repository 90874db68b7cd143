"""`pinset blame`: the upstream commit at which each pin stopped being fine, by shared bisection.

Every probe is one `Simulator.simulate_build` of the whole pin set on one upstream commit (in
memory, exactly what `pinset sim` does on a build), so a pin broken by an earlier pin's change is
judged as sim would judge it. Results are cached per commit: a commit is simulated at most once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pinset import SCHEMA_VERSION
from pinset.config.schema import PinSet
from pinset.errors import PinsetError
from pinset.nightly.bisect import bisect_pins
from pinset.nightly.history import Commit, first_parent_line, merged_pr, pr_number
from pinset.sim.engine import Simulator
from pinset.sim.model import PinResult
from pinset.sim.pins import PreparedPin
from pinset.upstream.builds import Build
from pinset.upstream.mirror import Mirror

FINE = ("applied", "upstream")
BROKEN = ("conflict", "contract", "error", "skipped")


def pin_state(pin: PinResult) -> str:
    """sim's status, with an applied pin whose contract broke told apart as `contract`."""
    if pin.status == "applied" and not pin.contract.ok:
        return "contract"
    return pin.status


@dataclass
class CommitRef:
    commit: str                       # full sha
    subject: str = ""
    pr: int | None = None             # the PR the commit names ((#N) or "Merge pull request #N")
    merge: bool = False               # a merge commit on the first-parent line
    merged_commits: int | None = None  # merges: how many commits it brought in

    def to_json(self) -> dict:
        out = {"commit": self.commit, "subject": self.subject, "pr": self.pr}
        if self.merge:
            out["merge"] = True
            out["merged_commits"] = self.merged_commits
        return out

    @classmethod
    def from_json(cls, data: dict) -> "CommitRef":
        return cls(data["commit"], data.get("subject", ""), data.get("pr"), bool(data.get("merge", False)),
                   data.get("merged_commits"))


@dataclass
class BuildRef:
    build: str    # as named on the command line
    commit: str   # full sha

    def to_json(self) -> dict:
        return {"build": self.build, "commit": self.commit}

    @classmethod
    def from_json(cls, data: dict) -> "BuildRef":
        return cls(data["build"], data["commit"])


@dataclass
class PinBlame:
    id: str
    status: str           # state at first_bad (conflict|contract|upstream|error|skipped), or ok|broken-on-good
    good_status: str      # state on --good / on --bad (applied|contract|upstream|conflict|skipped|error)
    bad_status: str
    last_good: CommitRef | None = None
    first_bad: CommitRef | None = None
    files: list[str] = field(default_factory=list)     # conflicting files / files with contract problems
    problems: list[str] = field(default_factory=list)  # contract problems at first_bad
    conflict_with: str | None = None
    detail: str | None = None
    steps: int = 0        # probes that narrowed this pin's range
    monotone: bool | None = None   # bisected pins: False when probes saw it flip more than once
    resolutions: list[str] = field(default_factory=list)  # recorded resolutions that applied it on --good/--bad

    @property
    def broke(self) -> bool:
        return self.first_bad is not None

    def summary(self) -> str:
        """One line for tables and comments."""
        if self.resolutions:  # applied all the same, and said so
            return self._summary() + f" (applied by recorded resolution {', '.join(self.resolutions)})"
        return self._summary()

    def _summary(self) -> str:
        if not self.broke:
            return {"ok": "fine on both ends"}.get(self.status, f"already {self.good_status} on --good: not bisected")
        fb = self.first_bad
        what = f"{fb.commit[:12]}" + (f" (#{fb.pr})" if fb.pr else "")
        if self.status == "upstream":
            text = f"landed upstream in {what}"
        elif self.status == "conflict":
            text = f"conflicts with upstream since {what}" + (f" in {', '.join(self.files)}" if self.files else "")
        elif self.status == "contract":
            text = f"contract broken since {what}" + (f": {self.problems[0]}" if self.problems else "")
        else:
            text = f"{self.status} since {what}" + (f": {self.detail}" if self.detail else "")
        if self.monotone is False:
            text += (" (not monotone: it flips more than once in this range; this is the earliest flip the "
                     "probes found, not necessarily the only cause)")
        return text

    def to_json(self) -> dict:
        return {"id": self.id, "status": self.status, "good_status": self.good_status, "bad_status": self.bad_status,
                "last_good": self.last_good.to_json() if self.last_good else None,
                "first_bad": self.first_bad.to_json() if self.first_bad else None,
                "files": list(self.files), "problems": list(self.problems), "conflict_with": self.conflict_with,
                "detail": self.detail, "steps": self.steps, "monotone": self.monotone, "summary": self.summary(),
                **({"resolutions": list(self.resolutions)} if self.resolutions else {})}

    @classmethod
    def from_json(cls, data: dict) -> "PinBlame":
        ref = lambda d: CommitRef.from_json(d) if d else None  # noqa: E731
        return cls(data["id"], data["status"], data["good_status"], data["bad_status"], ref(data.get("last_good")),
                   ref(data.get("first_bad")), list(data.get("files", [])), list(data.get("problems", [])),
                   data.get("conflict_with"), data.get("detail"), int(data.get("steps", 0)), data.get("monotone"),
                   list(data.get("resolutions", [])))


@dataclass
class BlameResult:
    pinset_digest: str
    good: BuildRef
    bad: BuildRef
    commits: int          # first-parent commits after --good up to and including --bad
    probes: int           # commits simulated besides the two ends
    pins: list[PinBlame]

    @property
    def ok(self) -> bool:
        """Nothing broke (or landed upstream) between --good and --bad, and every pin was fine on --good:
        a pin already broken there was not tested, which is no "nothing broke"."""
        return not any(p.broke or p.status == "broken-on-good" for p in self.pins)

    @property
    def untested(self) -> list[PinBlame]:
        return [p for p in self.pins if p.status == "broken-on-good"]

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "kind": "blame", "pinset": self.pinset_digest, "ok": self.ok,
                "good": self.good.to_json(), "bad": self.bad.to_json(), "commits": self.commits,
                "probes": self.probes, "pins": [p.to_json() for p in self.pins]}

    @classmethod
    def from_json(cls, data: dict) -> "BlameResult":
        if data.get("kind") != "blame" or data.get("schema") != SCHEMA_VERSION:
            raise PinsetError(f"not a blame result of schema {SCHEMA_VERSION} "
                              f"(kind {data.get('kind')!r}, schema {data.get('schema')!r})")
        return cls(data.get("pinset", ""), BuildRef.from_json(data["good"]), BuildRef.from_json(data["bad"]),
                   int(data["commits"]), int(data["probes"]), [PinBlame.from_json(p) for p in data["pins"]])


def blame(pinset: PinSet, mirror: Mirror, prepared: dict[str, PreparedPin], good: Build, bad: Build,
          pin_ids: list[str] | None = None, say: Callable[[str], None] = lambda _: None) -> BlameResult:
    """Bisect every chosen pin that is fine on `good` and not on `bad` (or newly upstream)."""
    for build, flag in ((good, "--good"), (bad, "--bad")):
        if build.source != "git":
            raise PinsetError(f"{flag} {build.name}: blame needs upstream git history (a tag, branch or commit), "
                              "not an sdist snapshot")
    line = first_parent_line(mirror, good.oid, bad.oid, good.name, bad.name)
    say(f"{len(line) - 1} first-parent commits from {good.name} to {bad.name}")
    simulator = Simulator(pinset, mirror, prepared)
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
                 if s in FINE and bad_states[pin] != s and bad_states[pin] in ("upstream", *BROKEN)}
    if to_bisect:
        say(f"bisecting {', '.join(to_bisect)}")
    # What is bisected is the change that matters on --bad: a pin upstream there is looked for where it
    # landed (a conflict on the way, resolved by the landing, is no cause); a pin broken there, where it
    # stopped being fine (a landing later undone is no cause either). Other states count as the good one.
    landed = {pin for pin in to_bisect if bad_states[pin] == "upstream"}

    def bisect_state(pin: str, result: PinResult) -> str:
        state = pin_state(result)
        hit = state == "upstream" if pin in landed else state in BROKEN
        return state if hit else good_states[pin]

    # A probe needs each pin's state only: who a conflict is with does not change it, so conflicts are
    # not attributed. The (whole-tree) search for moved code is needed only for the pins that may be
    # found there (good state `upstream`, or bisected for where they landed), and runs only when such
    # a pin does not apply. The two ends and the reported first bad commits get the full sim.
    moved_in_probes = {pin for pin, s in to_bisect.items() if pin in landed or s == "upstream"}
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
        problems = list(at.contract.problems) if pin_state(at) == "contract" else []
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
