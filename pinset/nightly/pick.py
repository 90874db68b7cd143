"""`pinset pick`: the newest build on which the pin set is green, and why each newer one was passed over.

Builds are simulated newest first, one at a time, until one is green (every required pin applied or
upstream with an intact contract) and, when a confirmation is asked for (`--verify`), confirmed; older
builds are not simulated at all. A newer git build passed over because a pin conflicts or broke its
contract is blamed against the picked build when it descends from it, so the reason names the
upstream commit (and PR) that broke the pin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pinset import SCHEMA_VERSION
from pinset.config.schema import PinSet
from pinset.errors import PinsetError
from pinset.nightly.blame import CommitRef, blame, pin_state
from pinset.sim.engine import Simulator
from pinset.sim.model import BuildResult, PinResult
from pinset.sim.pins import PreparedPin
from pinset.upstream.builds import Build
from pinset.upstream.mirror import Mirror

VERDICTS = ("picked", "not green", "verify failed", "not tried")


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
    def from_json(cls, data: dict) -> "Reason":
        commit = data.get("upstream_commit")
        return cls(data.get("pin"), data["status"], bool(data.get("required", True)), data.get("conflict_with"),
                   list(data.get("files", [])), list(data.get("problems", [])), data.get("detail"),
                   CommitRef.from_json(commit) if commit else None, data.get("monotone"))


@dataclass
class BuildPick:
    build: str
    commit: str | None     # upstream commit (None when not tried)
    verdict: str           # one of VERDICTS
    reasons: list[Reason] = field(default_factory=list)
    verify: dict | None = None   # {"ok": bool, "failed_gates": [...], "json": path or null} with --verify
    dropped: list[Reason] = field(default_factory=list)   # green build: the optional pins not fine on it
    resolved: dict[str, list[str]] = field(default_factory=dict)  # pin -> recorded resolutions that applied it

    def to_json(self) -> dict:
        out = {"build": self.build, "commit": self.commit, "verdict": self.verdict,
               "reasons": [r.to_json() for r in self.reasons], "verify": self.verify}
        if self.dropped:
            out["dropped"] = [r.to_json() for r in self.dropped]
        if self.resolved:
            out["resolved"] = {pin: list(ids) for pin, ids in self.resolved.items()}
        return out

    @classmethod
    def from_json(cls, data: dict) -> "BuildPick":
        if data["verdict"] not in VERDICTS:
            raise PinsetError(f"pick result: unknown verdict {data['verdict']!r}")
        return cls(data["build"], data.get("commit"), data["verdict"],
                   [Reason.from_json(r) for r in data.get("reasons", [])], data.get("verify"),
                   [Reason.from_json(r) for r in data.get("dropped", [])],
                   {k: list(v) for k, v in (data.get("resolved") or {}).items()})


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
        return next((b.dropped for b in self.builds if b.verdict == "picked"), [])

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "kind": "pick", "pinset": self.pinset_digest, "ok": self.ok,
                "picked": self.picked, "verified": self.verified, "dropped": [r.pin for r in self.dropped],
                "builds": [b.to_json() for b in self.builds]}

    @classmethod
    def from_json(cls, data: dict) -> "PickResult":
        if data.get("kind") != "pick" or data.get("schema") != SCHEMA_VERSION:
            raise PinsetError(f"not a pick result of schema {SCHEMA_VERSION} "
                              f"(kind {data.get('kind')!r}, schema {data.get('schema')!r})")
        return cls(data.get("pinset", ""), data.get("picked"), [BuildPick.from_json(b) for b in data["builds"]],
                   bool(data.get("verified", False)))


Confirm = Callable[[Build, BuildResult], tuple[bool, dict]]
"""A second opinion on a green build (`pinset verify`): (ok, {"failed_gates": [...], ...})."""


def pick(pinset: PinSet, mirror: Mirror, prepared: dict[str, PreparedPin], newest_first: list[Build],
         confirm: Confirm | None = None, say: Callable[[str], None] = lambda _: None) -> PickResult:
    simulator = Simulator(pinset, mirror, prepared)
    rows: list[BuildPick] = []
    picked: Build | None = None
    for build in newest_first:
        if picked is not None:
            rows.append(BuildPick(build.name, None, "not tried"))
            continue
        say(f"{build.name}: simulating the pin set")
        result = simulator.simulate_build(build)
        if not result.ok:
            rows.append(BuildPick(build.name, build.commit, "not green",
                                  [_reason(p) for p in result.pins if not p.ok]))
            continue
        row = BuildPick(build.name, build.commit, "picked", dropped=[_reason(p) for p in result.pins if not p.ok],
                        resolved={p.id: list(p.resolutions) for p in result.pins if p.resolutions})
        if confirm is not None:
            ok, summary = confirm(build, result)
            row.verify = {"ok": ok, **summary}
            if not ok:
                row.verdict = "verify failed"
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
    problems = list(pin.contract.problems) if state == "contract" else []
    files = sorted({p.split(":", 1)[0] for p in problems}) if problems else list(pin.files)
    return Reason(pin.id, state, pin.required, pin.conflict_with, files, problems, pin.detail)


def _blame_passed_over(pinset, mirror, prepared, picked: Build, builds: list[Build], rows: list[BuildPick],
                       say) -> None:
    """Name the upstream commit behind each pin that fails on a newer git build descending from `picked`."""
    by_name = {b.name: b for b in builds}
    for row in rows:
        build = by_name[row.build]
        pins = [r.pin for r in row.reasons if r.pin and r.status in ("conflict", "contract")
                and r.conflict_with in (None, "upstream")]
        if row.verdict != "not green" or not pins or picked.source != "git" or build.source != "git" \
                or build.oid == picked.oid or not mirror.git("merge-base", "--is-ancestor", picked.oid, build.oid).ok:
            continue
        say(f"{build.name}: bisecting {', '.join(pins)} from {picked.name}")
        found = {p.id: p for p in blame(pinset, mirror, prepared, picked, build, pins).pins}
        for reason in row.reasons:
            if reason.pin in found and found[reason.pin].first_bad is not None:
                reason.upstream_commit = found[reason.pin].first_bad
                reason.monotone = found[reason.pin].monotone
