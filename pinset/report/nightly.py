"""Reading `pinset pick` and `pinset blame` results for the report.

The nightly models (pinset/nightly/pick.py, blame.py) read their own JSON from plain dicts; a report
input must be refused with one line naming the file and key instead, so every key they read is checked
here through Doc first, and then the producer's own `from_json` builds the model (one format, no copy).
"""

from __future__ import annotations

from pinset.nightly.blame import BlameResult
from pinset.nightly.pick import VERDICTS, PickResult
from pinset.results import Doc

PIN_STATES = ("applied", "upstream", "conflict", "contract", "error", "skipped")


def _commit_ref(d: Doc | None) -> None:
    if d is None:
        return
    d.get("commit", str)
    d.get("subject", str, default="")
    d.get("pr", int, None, default=None)
    d.get("merge", bool, default=False)
    d.get("merged_commits", int, None, default=None)


class PickFile:
    """A pick result, checked key by key; `picked` must name a build whose row says "picked"."""

    @staticmethod
    def from_json(d: Doc) -> PickResult:
        d.get("pinset", str)
        picked = d.get("picked", str, None)
        d.get("verified", bool, default=False)
        rows = d.objs("builds")
        for row in rows:
            row.get("build", str)
            row.get("commit", str, None, default=None)
            verdict = row.choice("verdict", VERDICTS)
            if verdict != "not tried" and not row.raw.get("commit"):
                row.fail("commit", f"missing for a build that was {verdict}")
            for reason in row.objs("reasons", default=[]):
                reason.get("pin", str, None, default=None)
                reason.choice("status", (*PIN_STATES, "verify"))
                reason.get("required", bool, default=True)
                reason.get("conflict_with", str, None, default=None)
                reason.strs("files", default=[])
                reason.strs("problems", default=[])
                reason.get("detail", str, None, default=None)
                reason.get("monotone", bool, None, default=None)
                _commit_ref(reason.obj("upstream_commit", null=True, default=None))
            row.obj("verify", null=True, default=None)
        chosen = [r.raw["build"] for r in rows if r.raw["verdict"] == "picked"]
        if picked is None and chosen:
            d.fail("picked", f"null, but build {chosen[0]} has verdict \"picked\"")
        if picked is not None and chosen != [picked]:
            d.fail("picked", f"{picked!r} is not the one build with verdict \"picked\" "
                             f"(those are: {', '.join(chosen) or 'none'})")
        return PickResult.from_json(d.raw)


class BlameFile:
    """A blame result, checked key by key."""

    @staticmethod
    def from_json(d: Doc) -> BlameResult:
        d.get("pinset", str)
        for end in ("good", "bad"):
            ref = d.obj(end)
            ref.get("build", str)
            ref.get("commit", str)
        if d.num("commits") < 0 or d.num("probes") < 0 or not isinstance(d.raw["commits"], int) \
                or not isinstance(d.raw["probes"], int):
            d.fail("commits", "expected counts (non-negative integers) in commits and probes")
        for pin in d.objs("pins"):
            pin.get("id", str)
            status = pin.choice("status", (*PIN_STATES, "ok", "broken-on-good"))
            pin.choice("good_status", PIN_STATES)
            pin.choice("bad_status", PIN_STATES)
            _commit_ref(pin.obj("last_good", null=True, default=None))
            first_bad = pin.obj("first_bad", null=True, default=None)
            _commit_ref(first_bad)
            if (first_bad is None) != (status in ("ok", "broken-on-good")):
                pin.fail("first_bad", f"{'missing' if first_bad is None else 'given'} for status {status!r}")
            pin.strs("files", default=[])
            pin.strs("problems", default=[])
            pin.get("conflict_with", str, None, default=None)
            pin.get("detail", str, None, default=None)
            pin.get("monotone", bool, None, default=None)
            steps = pin.get("steps", int, default=0)
            if steps < 0:
                pin.fail("steps", f"expected a non-negative integer, got {steps}")
        return BlameResult.from_json(d.raw)
