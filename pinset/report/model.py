"""The report's own result model (kind "report", SCHEMAS["report"]): what `pinset report --json` writes and
reads back, and the outcomes a verdict can have, spelled here once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pinset.results import SCHEMAS, Doc

READY: Final = "ready"
BLOCKED: Final = "blocked"
NOT_ENOUGH: Final = "not enough evidence"
OUTCOMES = (READY, BLOCKED, NOT_ENOUGH)


@dataclass
class ReportResult:
    """The verdict as JSON (kind "report"). Schema 2: `outcome` is ready | blocked | not enough evidence, and
    `ok` means ready (schema 1's `ok` meant "no blocker"; read as outcome blocked or, without blockers, from
    its verdict line)."""

    pinset: str | None
    outcome: str
    line: str
    blockers: list[str]
    missing: list[str]
    warnings: list[str]
    not_tested: list[str]
    builds: list[dict]            # {"build", "commit"}
    inputs: list[dict]            # {"name", "kind", "sha256"}

    @property
    def ok(self) -> bool:
        return self.outcome == READY

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["report"], "kind": "report", "pinset": self.pinset, "ok": self.ok,
                "outcome": self.outcome,
                "verdict": {"line": self.line, "blockers": list(self.blockers), "missing": list(self.missing),
                            "warnings": list(self.warnings), "not_tested": list(self.not_tested)},
                "builds": list(self.builds), "inputs": list(self.inputs)}

    @classmethod
    def from_json(cls, d: Doc) -> ReportResult:
        v = d.obj("verdict")
        blockers, line = v.strs("blockers"), v.get("line", str)
        if d.has("outcome"):
            outcome = d.choice("outcome", OUTCOMES)
        else:  # schema 1
            outcome = BLOCKED if blockers else READY if "ready to ship" in line else NOT_ENOUGH
        builds = [{"build": b.get("build", str), "commit": b.get("commit", str)} for b in d.objs("builds")]
        inputs = [{"name": i.get("name", str), "kind": i.get("kind", str), "sha256": i.get("sha256", str)}
                  for i in d.objs("inputs")]
        return cls(d.get("pinset", str, None), outcome, line, blockers, v.strs("missing", default=[]),
                   v.strs("warnings"), v.strs("not_tested"), builds, inputs)


@dataclass(frozen=True)
class Untested:
    """One item of the report's Not tested list: what was not tested, why, and where (the builds or runs it
    holds for, merged into one item when the same what and why hold for several). Typed, so the verdict never
    builds or parses the sentence; `text()` is the one place it is written ("WHAT: WHY (WHERE, WHERE)")."""

    what: str
    why: str = ""
    where: tuple[str, ...] = ()

    def text(self) -> str:
        line = f"{self.what}: {self.why}" if self.why else self.what
        return line + (f" ({', '.join(self.where)})" if self.where else "")


def grouped(items: list[Untested]) -> list[Untested]:
    """One item per (what, why), its places joined in order of first appearance."""
    order: dict[tuple[str, str], list[str]] = {}
    for item in items:
        places = order.setdefault((item.what, item.why), [])
        places += [w for w in item.where if w not in places]
    return [Untested(what, why, tuple(where)) for (what, why), where in order.items()]
