"""`pinset report`: load result files, merge them across machines, judge, render markdown, post.

Stages: load (contract checks) -> merge (contradictions are errors) -> verdict -> markdown -> github.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinset.config.schema import PinSet
from pinset.errors import PinsetError
from pinset.report.load import load_results
from pinset.report.markdown import render
from pinset.report.merge import Merged, expected_cells, merge
from pinset.report.model import ReportResult
from pinset.report.rederive import missing_pins
from pinset.report.verdict import Verdict, judge, unfilled_cells
from pinset.sim.model import BuildResult, SimResult

__all__ = ["Report", "build_report", "post_report"]


@dataclass
class Report:
    merged: Merged
    verdict: Verdict
    markdown: str
    digest: str | None

    def result(self) -> ReportResult:
        v = self.verdict
        return ReportResult(self.digest, v.outcome, v.line(), v.blockers, v.missing, v.warnings, v.not_tested_lines(),
                            [{"build": b, "commit": c} for b, c in sorted(self.merged.commits.items())],
                            [{"name": f.name, "kind": f.kind, "sha256": f.sha256} for f in self.merged.files])

    def to_json(self) -> dict:
        return self.result().to_json()


def post_report(github, target, report: Report):
    """Post or update the report's comment; every failure, one nobody foresaw included, is one GitHubError line
    with the token redacted (the verb then keeps the report and exits 1)."""
    from pinset.errors import GitHubError
    from pinset.report.markdown import marker

    assert report.digest, "the verb refuses --post without a pin set"
    try:
        return github.post(target, marker(report.digest), report.markdown)
    except GitHubError:
        raise
    except Exception as exc:  # an answer nobody foresaw: never a traceback that could show headers
        raise github.unexpected(exc) from None


class OtherPinSet(PinsetError):
    """pins.yaml is not the pin set the results were made with."""


def build_report(paths, pinset: PinSet | None = None, expect: str | None = None) -> Report:
    """expect: a `pinset matrix` JSON; each of its cells without a result is listed as not tested, and
    keeps the outcome from "ready"."""
    merged = merge(load_results(paths))
    cells = expected_cells(expect) if expect else []
    pins_info, description, digest = None, None, merged.pinset
    if pinset is not None:
        if merged.pinset and merged.pinset != pinset.digest:
            raise OtherPinSet(f"{pinset.path.name} is pin set {pinset.digest} but the results are for pin set "
                              f"{merged.pinset} (pins.yaml or its patches changed since; re-run the verbs)")
        merged.pinset = digest = pinset.digest
        description = pinset.description
        pins_info = {p.id: {"description": p.description, "required": p.required} for p in pinset.pins}
    verdict = judge(merged)
    sims: dict[str, BuildResult] = {}
    for f in merged.files:   # the first file that simulated a build speaks for it, as in merge
        for b in f.model.builds if isinstance(f.model, SimResult) else []:
            sims.setdefault(b.build, b)
    gaps = missing_pins(sims.values(), [p.id for p in pinset.pins] if pinset is not None else None)
    unfilled = unfilled_cells(merged, cells)
    for items in (gaps, unfilled):   # evidence no result gives: missing, and listed under Not tested
        verdict.missing += [item.text() for item in items]
        verdict.not_tested += items
    return Report(merged, verdict, render(merged, verdict, pins_info, description), digest)
