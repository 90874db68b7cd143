"""The result of `pinset forecast` (kind "forecast" in pinset.results.SCHEMAS): per open PR whether it merges
onto the build and what it does to each pin, the effect rule and the ranking rule.

Effect of a PR on a pin, from sim's result of the pin on BUILD (`before`) and on BUILD+PR (`after`), first
match wins:
- `carries`: upstream would carry the pin after the PR (sim's `upstream`: an ancestor PR commit, its added
  lines present, moved code, the reverse apply) and did not before;
- `breaks`: the pin is fine before (applied or carried, contract intact) and not after (conflict, error,
  contract broken);
- `fixes`: the reverse;
- `moves`: applied both times, but the apply mode got worse (exact < offset < 3-way < resolution): it will
  need a `pinset refresh`;
- `none`: anything else (a pin not listed in a PR's `pins` has effect `none`).

Ranking, how soon a PR is likely to land: approved > reviewed > open > draft (a draft is a draft whatever
its reviews), then the most recent activity (`updated_at`) first, then the higher number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pinset.results import SCHEMAS, Doc
from pinset.sim.model import PinResult

EFFECTS = ("breaks", "carries", "fixes", "moves", "none")
BREAKS, CARRIES, FIXES, MOVES, NONE = EFFECTS
STATES = ("approved", "reviewed", "open", "draft")   # best first: the ranking's first key


def effect(before: PinResult, after: PinResult) -> str:
    """The effect rule (module docstring)."""
    if after.is_upstream and not before.is_upstream:
        return CARRIES
    if before.ok and not after.ok:
        return BREAKS
    if not before.ok and after.ok:
        return FIXES
    if after.applied_worse_than(before):
        return MOVES
    return NONE


def rank_key(pr: ForecastPR) -> tuple:
    """Sort key of the ranking rule (module docstring): sorted(prs, key=rank_key) is most likely first."""
    return (STATES.index(pr.state), _desc(pr.updated_at), -pr.number)


def _desc(text: str) -> tuple[int, ...]:
    """A text key that sorts descending (ISO 8601 times compare as text)."""
    return tuple(-ord(ch) for ch in text) + (0,)


@dataclass
class PinEffect:
    id: str
    effect: str
    required: bool
    before: str                       # sim's state of the pin on BUILD (applied, conflict, upstream, contract...)
    after: str                        # ... and on BUILD+PR
    before_mode: str | None = None
    after_mode: str | None = None
    detail: str | None = None         # breaks: why it no longer applies
    hunk: list[str] | None = None     # breaks: the hunk that does not apply on BUILD+PR
    files: list[str] = field(default_factory=list)   # breaks: the conflicting files
    has: list[str] | None = None      # breaks: what BUILD+PR has where the hunk wants to change it (numbered)

    def to_json(self) -> dict:
        out: dict = {"id": self.id, "effect": self.effect, "required": self.required,
                     "before": self.before, "after": self.after}
        for key in ("before_mode", "after_mode", "detail", "hunk", "has"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.files:
            out["files"] = list(self.files)
        return out

    @classmethod
    def from_json(cls, d: Doc) -> PinEffect:
        return cls(d.get("id", str), d.choice("effect", EFFECTS), d.get("required", bool), d.get("before", str),
                   d.get("after", str), d.get("before_mode", str, default=None), d.get("after_mode", str, default=None),
                   d.get("detail", str, default=None), d.strs("hunk", default=None) or None, d.strs("files", default=[]),
                   d.strs("has", default=None) or None)


@dataclass
class ForecastPR:
    number: int
    title: str
    url: str
    head: str | None                  # git's refs/pull/N/head; None: gone upstream (listed by the API only)
    state: str                        # approved | reviewed | open | draft (STATES)
    updated_at: str
    touches: list[str] = field(default_factory=list)   # its files that bear on a pin (run.bearing; empty: not simulated)
    merges: bool | None = None        # onto the build; None: not tried (touches no pin file, or no head)
    conflicts: list[str] = field(default_factory=list)  # where it does not merge
    pins: list[PinEffect] = field(default_factory=list)  # effects other than none
    onto: str | None = None           # the BUILD+PR commit (in the cache's mirror: refs/pinset/forecast/N)
    note: str | None = None           # why it was not judged (no head, no shared history, does not merge)

    def pins_with(self, *effects: str) -> list[PinEffect]:
        return [p for p in self.pins if p.effect in effects]

    @property
    def breaks_required(self) -> bool:
        return any(p.required for p in self.pins_with(BREAKS))

    def to_json(self) -> dict:
        out: dict = {"number": self.number, "title": self.title, "url": self.url, "head": self.head,
                     "state": self.state, "updated_at": self.updated_at, "touches": list(self.touches),
                     "merges": self.merges, "pins": [p.to_json() for p in self.pins]}
        if self.conflicts:
            out["conflicts"] = list(self.conflicts)
        if self.onto:
            out["onto"] = self.onto
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, d: Doc) -> ForecastPR:
        return cls(d.get("number", int), d.get("title", str), d.get("url", str), d.get("head", str, None),
                   d.choice("state", STATES), d.get("updated_at", str), d.strs("touches"),
                   d.get("merges", bool, None), d.strs("conflicts", default=[]),
                   [PinEffect.from_json(p) for p in d.objs("pins")], d.get("onto", str, default=None),
                   d.get("note", str, default=None))


@dataclass
class ForecastResult:
    repo: str                         # OWNER/NAME the PRs were listed from
    build: str                        # the --onto build
    commit: str                       # its upstream commit
    prs: list[ForecastPR]             # ranked (rank_key)
    pinset_digest: str = ""
    pin_ids: list[str] = field(default_factory=list)
    api_requests: int = 0             # how many the API was asked (list pages + reviews)

    @property
    def ok(self) -> bool:
        """No PR breaks a required pin."""
        return not any(pr.breaks_required for pr in self.prs)

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["forecast"], "kind": "forecast", "pinset": self.pinset_digest, "ok": self.ok,
                "repo": self.repo, "onto": {"build": self.build, "commit": self.commit}, "pins": list(self.pin_ids),
                "api_requests": self.api_requests, "prs": [pr.to_json() for pr in self.prs]}

    @classmethod
    def from_json(cls, d: Doc) -> ForecastResult:
        if d.get("kind", str) != "forecast" or d.get("schema", int) != SCHEMAS["forecast"]:
            d.fail("kind", f"not a forecast of schema {SCHEMAS['forecast']}")
        d.get("ok", bool)
        onto = d.obj("onto")
        return cls(d.get("repo", str), onto.get("build", str), onto.get("commit", str),
                   [ForecastPR.from_json(p) for p in d.objs("prs")], d.get("pinset", str), d.strs("pins"),
                   d.get("api_requests", int))
