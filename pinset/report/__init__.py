"""`pinset report`: load result files, merge them across machines, judge, render markdown, post.

Stages: load (contract checks) -> merge (contradictions are errors) -> verdict -> markdown -> github.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinset.config.schema import PinSet
from pinset.errors import PinsetError
from pinset.report.load import load_results
from pinset.report.markdown import render
from pinset.report.merge import Merged, merge
from pinset.report.verdict import Verdict, judge
from pinset.results import SCHEMAS


@dataclass
class Report:
    merged: Merged
    verdict: Verdict
    markdown: str
    digest: str | None

    def to_json(self) -> dict:
        return {
            "schema": SCHEMAS["report"], "kind": "report", "pinset": self.digest, "ok": self.verdict.ok,
            "outcome": self.verdict.outcome,
            "verdict": {"line": self.verdict.line(), "blockers": self.verdict.blockers,
                        "missing": self.verdict.missing, "warnings": self.verdict.warnings,
                        "not_tested": self.verdict.not_tested},
            "builds": [{"build": b, "commit": c} for b, c in sorted(self.merged.commits.items())],
            "inputs": [{"name": f.name, "kind": f.kind, "sha256": f.sha256} for f in self.merged.files],
        }


def build_report(paths, pinset: PinSet | None = None) -> Report:
    merged = merge(load_results(paths))
    pins_info, description, digest = None, None, merged.pinset
    if pinset is not None:
        if merged.pinset and merged.pinset != pinset.digest:
            raise PinsetError(f"{pinset.path.name} is pin set {pinset.digest} but the results are for pin set "
                              f"{merged.pinset} (pins.yaml or its patches changed since; re-run the verbs)")
        merged.pinset = digest = pinset.digest
        description = pinset.description
        pins_info = {p.id: {"description": p.description, "required": p.required} for p in pinset.pins}
    verdict = judge(merged)
    return Report(merged, verdict, render(merged, verdict, pins_info, description), digest)
