"""The state of each PR pin's pull request (issue 43): open, draft, closed without merge, merged; how far the
pinned commit is behind the PR's head, or off it (force-pushed); the review decision where GitHub gives one.

Asked once per run by pinset/github/pr_state.py (the GitHub client's floor) and carried in sim's JSON under
`prs`; read back here by `pinset report`. A pin with `skip-unless-open: true` whose PR is merged or closed is
left out of the set (`skipped`), and every output says so. Without a token or a network every state is
`unknown`, said once (`note`), never a failure.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinset.config.schema import PinSet
    from pinset.results import Doc

OPEN, DRAFT, CLOSED, MERGED, UNKNOWN = "open", "draft", "closed", "merged", "unknown"
STATES = (OPEN, DRAFT, CLOSED, MERGED, UNKNOWN)
NOT_OPEN = (CLOSED, MERGED)
REVIEWS = ("APPROVED", "CHANGES_REQUESTED", "REVIEW_REQUIRED")


@dataclass(frozen=True)
class PrState:
    pin: str
    url: str
    pinned: str                    # the pinned commit (40 hex digits)
    state: str                     # one of STATES
    required: bool = True
    head: str | None = None        # the PR's head commit now (None: not known)
    behind: int | None = None      # commits on the PR after the pinned one (0: it is the head; None: not known)
    on_head: bool | None = None    # the pinned commit is one of the PR's commits now (False: force-pushed past it)
    review: str | None = None      # GitHub's review decision (GraphQL only; None where the API gives none)
    skipped: bool = False          # `skip-unless-open: true` and the PR is not open: left out of the set
    why: str | None = None         # unknown: why (not found, an answer without it)

    @property
    def not_open(self) -> bool:
        return self.state in NOT_OPEN

    @property
    def moved(self) -> bool:
        """The PR's head is another commit than the pin's."""
        return self.head is not None and self.head != self.pinned

    def short(self) -> str:
        """The state in a few words, for a grid cell or a pin label: `merged`, `open, 3 behind its head`."""
        if self.state == UNKNOWN:
            return "PR state unknown"
        words = {CLOSED: "closed without merge"}.get(self.state, self.state)
        text = f"PR {words}"
        if self.skipped:
            text += ": skipped (skip-unless-open)"
        elif self.moved:
            text += ", " + self.head_text()
        if self.review == "CHANGES_REQUESTED":
            text += ", changes requested"
        elif self.review == "APPROVED":
            text += ", approved"
        return text

    def head_text(self) -> str:
        """How the pin stands against the PR's head (only for a moved head)."""
        head = (self.head or "")[:9]
        if self.on_head is False:
            return f"force-pushed: the pin is no longer on it (head {head})"
        if self.behind is not None:
            return f"{self.behind} commit{'s' if self.behind != 1 else ''} behind its head {head}"
        return f"its head moved to {head}"

    def to_json(self) -> dict:
        out: dict = {"pin": self.pin, "url": self.url, "pinned": self.pinned, "state": self.state,
                     "required": self.required, "head": self.head, "behind": self.behind, "on_head": self.on_head,
                     "review": self.review, "skipped": self.skipped}
        if self.why:
            out["why"] = self.why
        return out

    @classmethod
    def from_json(cls, d: Doc) -> PrState:
        review = d.get("review", str, None, default=None)
        if review is not None and review not in REVIEWS:
            d.fail("review", f"unknown value {review!r} (expected one of {', '.join(REVIEWS)})")
        return cls(d.get("pin", str), d.get("url", str), d.get("pinned", str), d.choice("state", STATES),
                   d.get("required", bool, default=True), d.get("head", str, None, default=None),
                   d.get("behind", int, None, default=None), d.get("on_head", bool, None, default=None), review,
                   d.get("skipped", bool, default=False), d.get("why", str, None, default=None))


@dataclass
class PrStates:
    """Every PR pin's state, and the one line said when they could not be asked."""

    pins: list[PrState]
    note: str | None = None        # "PR state unknown: no token ..." (said once)
    source: str | None = None      # "graphql" | "rest" | None (not asked)

    def skipped(self) -> list[PrState]:
        return [s for s in self.pins if s.skipped]

    def of(self, pin_id: str) -> PrState | None:
        return next((s for s in self.pins if s.pin == pin_id), None)

    def without_skipped(self, pinset: PinSet) -> PinSet:
        """The pin set less the pins left out because their PR is not open (the digest stays the file's)."""
        gone = {s.pin for s in self.skipped()}
        if not gone:
            return pinset
        return dataclasses.replace(pinset, pins=tuple(p for p in pinset.pins if p.id not in gone))

    def lines(self) -> list[str]:
        """What a reader must know, one line each: skipped pins, PRs closed or merged, heads moved, the note."""
        out = []
        for s in self.pins:
            if s.skipped or s.not_open or s.moved or s.review == "CHANGES_REQUESTED":
                out.append(f"{s.pin}: {s.short()} ({s.url})")
        if self.note:
            out.append(self.note)
        return out

    def to_json(self) -> dict:
        return {"source": self.source, "note": self.note, "pins": [s.to_json() for s in self.pins]}

    @classmethod
    def from_json(cls, d: Doc) -> PrStates:
        return cls([PrState.from_json(p) for p in d.objs("pins")], d.get("note", str, None, default=None),
                   d.choice("source", ("graphql", "rest"), default=None) if d.get("source", str, None, default=None)
                   else None)


def unknown(pinset: PinSet, note: str | None, why: str | None = None) -> PrStates:
    """Every PR pin's state unknown (no token, no network): applied as if open, said once."""
    return PrStates([PrState(p.id, p.pr.url, p.commit or "", UNKNOWN, p.required, why=why)
                     for p in pinset.pins if p.pr is not None], note)
