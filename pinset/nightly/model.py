"""The result models of `pinset pick` and `pinset blame` (kinds "pick" and "blame", schema in
pinset.results.SCHEMAS): `to_json` for the producers (pinset/nightly/pick.py, blame.py), `from_json` for
them and for `pinset report`, which refuses a file that does not hold what the model needs with one line
naming the file and the key."""

from __future__ import annotations

from dataclasses import dataclass, field

from pinset.cells import SAYS_NOTHING, BuildCommits, Cells, PinStates
from pinset.errors import PinsetError
from pinset.result_parts import FieldsJson
from pinset.results import SCHEMAS, Doc
from pinset.sim.model import PinResult, PinState

# A pin's state on one build: sim's status, an applied pin whose contract broke told apart as `contract`.
PIN_STATES: tuple[PinState, ...] = ("applied", "upstream", "conflict", "contract", "error", "skipped")
APPLIED, UPSTREAM, CONFLICT, CONTRACT, ERROR, SKIPPED = PIN_STATES
FINE = (APPLIED, UPSTREAM)
BROKEN = (CONFLICT, CONTRACT, ERROR, SKIPPED)


def is_broken(state: str) -> bool:
    """A pin's state on a build is red: conflict, contract, error or skipped."""
    return state in BROKEN


def pin_state(pin: PinResult) -> PinState:
    """sim's status, with an applied pin whose contract broke told apart as `contract` (PinResult.state)."""
    return pin.state


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
    def from_json(cls, d: Doc) -> CommitRef:
        return cls(d.get("commit", str), d.get("subject", str, default=""), d.get("pr", int, None, default=None),
                   d.get("merge", bool, default=False), d.get("merged_commits", int, None, default=None))


@dataclass
class BuildRef(FieldsJson):
    build: str    # as named on the command line
    commit: str   # full sha

    @classmethod
    def from_json(cls, d: Doc) -> BuildRef:
        return cls(d.get("build", str), d.get("commit", str))


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

    @property
    def landed(self) -> bool:
        """The first bad commit is where upstream took the pin (state `upstream`), not where it broke."""
        return self.status == UPSTREAM

    def summary(self) -> str:
        """One line for tables and comments."""
        if self.resolutions:  # applied all the same, and said so
            return self._summary() + f" (applied by recorded resolution {', '.join(self.resolutions)})"
        return self._summary()

    def _summary(self) -> str:
        if not self.broke:
            return {"ok": "fine on both ends"}.get(self.status, f"already {self.good_status} on --good: not bisected")
        fb = self.first_bad
        assert fb is not None  # broke
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
    def from_json(cls, d: Doc) -> PinBlame:
        status = d.choice("status", (*PIN_STATES, "ok", "broken-on-good"))
        good, bad = d.choice("good_status", PIN_STATES), d.choice("bad_status", PIN_STATES)
        last_good, first_bad = _commit_ref(d, "last_good"), _commit_ref(d, "first_bad")
        if (first_bad is None) != (status in ("ok", "broken-on-good")):
            d.fail("first_bad", f"{'missing' if first_bad is None else 'given'} for status {status!r}")
        files, problems = d.strs("files", default=[]), d.strs("problems", default=[])
        conflict_with, detail = d.get("conflict_with", str, None, default=None), d.get("detail", str, None, default=None)
        monotone = d.get("monotone", bool, None, default=None)
        steps = d.get("steps", int, default=0)
        if steps < 0:
            d.fail("steps", f"expected a non-negative integer, got {steps}")
        return cls(d.get("id", str), status, good, bad, last_good, first_bad, files, problems, conflict_with, detail,
                   steps, monotone, d.strs("resolutions", default=[]))


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

    def cells(self) -> Cells:
        """Per range and pin what blame found (pinset.cells)."""
        for p in self.pins:
            yield (("blame", f"{self.good.build} -> {self.bad.build}", p.id),
                   {"status": p.status, "first_bad": p.first_bad.commit if p.first_bad else None,
                    "files": list(p.files), "problems": list(p.problems)})

    def build_commits(self) -> BuildCommits:
        for end in (self.good, self.bad):
            yield end.build, end.commit

    def pin_states(self) -> PinStates:
        for p in self.pins:
            yield self.good.build, p.id, p.good_status
            yield self.bad.build, p.id, p.bad_status

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["blame"], "kind": "blame", "pinset": self.pinset_digest, "ok": self.ok,
                "good": self.good.to_json(), "bad": self.bad.to_json(), "commits": self.commits,
                "probes": self.probes, "pins": [p.to_json() for p in self.pins]}

    @classmethod
    def from_json(cls, d: Doc | dict) -> BlameResult:
        """A blame document (schema 1); a plain dict is read as a file named "blame result" would be."""
        d = _doc(d, "blame")
        pinset = d.get("pinset", str)
        good, bad = BuildRef.from_json(d.obj("good")), BuildRef.from_json(d.obj("bad"))
        commits, probes = d.num("commits"), d.num("probes")
        if commits < 0 or probes < 0 or not isinstance(commits, int) or not isinstance(probes, int):
            d.fail("commits", "expected counts (non-negative integers) in commits and probes")
        return cls(pinset, good, bad, int(commits), int(probes), [PinBlame.from_json(p) for p in d.objs("pins")])


PICKED, NOT_GREEN, VERIFY_FAILED, NOT_TRIED = "picked", "not green", "verify failed", "not tried"
VERDICTS = (PICKED, NOT_GREEN, VERIFY_FAILED, NOT_TRIED)
PASSED_OVER = (NOT_GREEN, VERIFY_FAILED)   # builds pick tried and did not pick


@dataclass
class Reason:
    """Why a build was passed over: one pin that is not fine on it (or the gate that failed)."""

    pin: str | None                   # None for a verify failure
    status: str                       # conflict|contract|error|skipped (pins) or verify
    required: bool = True
    conflict_with: str | None = None
    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    detail: str | None = None
    upstream_commit: CommitRef | None = None   # the first bad upstream commit, when blamed
    monotone: bool | None = None               # when blamed: False if the pin flips more than once in between

    @property
    def broken_by_upstream(self) -> bool:
        """A pin that conflicts with upstream (not with another pin) or broke its contract: an upstream commit
        is behind it, which blame can name."""
        return self.status in (CONFLICT, CONTRACT) and self.conflict_with in (None, UPSTREAM)

    def summary(self) -> str:
        if self.pin is None:
            return f"verify failed: {self.detail}"
        text = f"pin {self.pin}" + ("" if self.required else " (optional)")
        if self.status == "conflict":
            who = self.conflict_with or "upstream"
            text += f" conflicts with {who}"
        else:
            text += {"contract": " broke its contract", "error": " could not be prepared",
                     "skipped": " changes nothing"}.get(self.status, f" is {self.status}")
        if self.upstream_commit is not None:
            c = self.upstream_commit
            text += f" since upstream commit {c.commit[:12]}" + (f" (#{c.pr})" if c.pr else "")
            if self.monotone is False:
                text += " (not monotone: it flips more than once in between; the earliest break found)"
        if self.files:
            text += f" in {', '.join(self.files)}"
        if self.status == "contract" and self.problems:
            text += f": {self.problems[0]}"
        elif self.status in ("error", "skipped") and self.detail:
            text += f": {self.detail}"
        return text

    def to_json(self) -> dict:
        return {"pin": self.pin, "status": self.status, "required": self.required,
                "conflict_with": self.conflict_with, "files": list(self.files), "problems": list(self.problems),
                "detail": self.detail,
                "upstream_commit": self.upstream_commit.to_json() if self.upstream_commit else None,
                "monotone": self.monotone, "summary": self.summary()}

    @classmethod
    def from_json(cls, d: Doc) -> Reason:
        return cls(d.get("pin", str, None, default=None), d.choice("status", (*PIN_STATES, "verify")),
                   d.get("required", bool, default=True), d.get("conflict_with", str, None, default=None),
                   d.strs("files", default=[]), d.strs("problems", default=[]), d.get("detail", str, None, default=None),
                   _commit_ref(d, "upstream_commit"), d.get("monotone", bool, None, default=None))


@dataclass
class BuildPick:
    build: str
    commit: str | None     # upstream commit (None when not tried)
    verdict: str           # one of VERDICTS
    reasons: list[Reason] = field(default_factory=list)
    verify: dict | None = None   # {"ok": bool, "failed_gates": [...], "json": path or null} with --verify
    dropped: list[Reason] = field(default_factory=list)   # green build: the optional pins not fine on it
    resolved: dict[str, list[str]] = field(default_factory=dict)  # pin -> recorded resolutions that applied it
    unioned: dict[str, list[str]] = field(default_factory=dict)   # pin -> FILE:LINE of the add/add unions pinset made

    def to_json(self) -> dict:
        out = {"build": self.build, "commit": self.commit, "verdict": self.verdict,
               "reasons": [r.to_json() for r in self.reasons], "verify": self.verify}
        if self.dropped:
            out["dropped"] = [r.to_json() for r in self.dropped]
        if self.resolved:
            out["resolved"] = {pin: list(ids) for pin, ids in self.resolved.items()}
        if self.unioned:
            out["unioned"] = {pin: list(places) for pin, places in self.unioned.items()}
        return out

    @classmethod
    def from_json(cls, d: Doc) -> BuildPick:
        build, commit = d.get("build", str), d.get("commit", str, None, default=None)
        verdict = d.choice("verdict", VERDICTS)
        if verdict != NOT_TRIED and not commit:
            d.fail("commit", f"missing for a build that was {verdict}")
        reasons = [Reason.from_json(r) for r in d.objs("reasons", default=[])]
        verify = d.obj("verify", null=True, default=None)
        dropped = [Reason.from_json(r) for r in d.objs("dropped", default=[])]
        resolved_doc = d.obj("resolved", default=None)
        resolved = {pin: resolved_doc.strs(pin) for pin in resolved_doc.raw} if resolved_doc is not None else {}
        unioned_doc = d.obj("unioned", default=None)
        unioned = {pin: unioned_doc.strs(pin) for pin in unioned_doc.raw} if unioned_doc is not None else {}
        return cls(build, commit, verdict, reasons, dict(verify.raw) if verify is not None else None, dropped,
                   resolved, unioned)


@dataclass
class PickResult:
    pinset_digest: str
    picked: str | None
    builds: list[BuildPick]      # newest first
    verified: bool = False       # --verify was asked for

    @property
    def ok(self) -> bool:
        return self.picked is not None

    @property
    def dropped(self) -> list[Reason]:
        """The optional pins the picked build ships without (not applied there, or contract broken)."""
        return next((b.dropped for b in self.builds if b.verdict == PICKED), [])

    def cells(self) -> Cells:
        """The picked base and each build's verdict with its reasons (pinset.cells); a build not tried says
        nothing (another pick may have tried it)."""
        yield ("pick", "picked base"), self.picked
        for b in self.builds:
            yield (("pick", b.build), SAYS_NOTHING if b.verdict == NOT_TRIED
                   else {"verdict": b.verdict, "why": [r.summary() for r in b.reasons]})

    def build_commits(self) -> BuildCommits:
        for b in self.builds:
            if b.commit:
                yield b.build, b.commit

    def pin_states(self) -> PinStates:
        """The pins pick passed a build over for, in their states there."""
        for b in self.builds:
            for r in b.reasons:
                if r.pin is not None:
                    yield b.build, r.pin, r.status

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["pick"], "kind": "pick", "pinset": self.pinset_digest, "ok": self.ok,
                "picked": self.picked, "verified": self.verified, "dropped": [r.pin for r in self.dropped],
                "builds": [b.to_json() for b in self.builds]}

    @classmethod
    def from_json(cls, d: Doc | dict) -> PickResult:
        """A pick document (schema 1); `picked` must name the one build whose row says "picked"."""
        d = _doc(d, "pick")
        pinset, picked = d.get("pinset", str), d.get("picked", str, None)
        verified = d.get("verified", bool, default=False)
        rows = [BuildPick.from_json(b) for b in d.objs("builds")]
        chosen = [r.build for r in rows if r.verdict == PICKED]
        if picked is None and chosen:
            d.fail("picked", f"null, but build {chosen[0]} has verdict \"picked\"")
        if picked is not None and chosen != [picked]:
            d.fail("picked", f"{picked!r} is not the one build with verdict \"picked\" "
                             f"(those are: {', '.join(chosen) or 'none'})")
        return cls(pinset, picked, rows, verified)


def _doc(d: Doc | dict, kind: str) -> Doc:
    """A plain dict (a producer reading its own JSON) checked as `pinset report` checks a file."""
    if isinstance(d, Doc):
        return d
    if not isinstance(d, dict) or d.get("kind") != kind or d.get("schema") != SCHEMAS[kind]:
        got = (d.get("kind"), d.get("schema")) if isinstance(d, dict) else (None, None)
        raise PinsetError(f"not a {kind} result of schema {SCHEMAS[kind]} (kind {got[0]!r}, schema {got[1]!r})")
    return Doc(d, f"{kind} result", kind)


def _commit_ref(d: Doc, key: str) -> CommitRef | None:
    ref = d.obj(key, null=True, default=None)
    return CommitRef.from_json(ref) if ref is not None else None
