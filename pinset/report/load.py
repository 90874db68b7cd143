"""Reading result files of sim, verify, kld, bench, pick and blame through their producers' models.

A report is only as trustworthy as its inputs: a file of an unknown schema version or with a missing
key is refused with a message naming the file and the key (exit 2), never rendered half-understood.
What a producer writes on its failure paths (a failed run, numbers it could not measure) is read, and
judged by the verdict, never refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinset.cells import canonical
from pinset.errors import PinsetError
from pinset.measures.bench_model import BenchResult
from pinset.measures.derived import check_derived
from pinset.measures.kld_model import KldResult, KldVerdict
from pinset.nightly.model import BlameResult, PickResult
from pinset.results import read_document
from pinset.sim.model import SimResult
from pinset.verify.model import VerifyResult

# Each kind is read by its producer's own model: what a verb writes is exactly what the report can read.
MODELS: dict[str, Any] = {"sim": SimResult, "verify": VerifyResult, "kld": KldResult, "bench": BenchResult, "pick": PickResult,
          "blame": BlameResult}
KINDS = tuple(MODELS)
# The kinds a shippable pin set needs evidence from; pick and blame say which base and why, not whether it works.
EVIDENCE_KINDS = ("sim", "verify", "kld", "bench")


def kld_delta_text(verdict: KldVerdict) -> str:
    """head − base mean KLD with its standard error and how many of them it is: `sigma` in the KLD JSON is the
    standard error of the difference, not a count of them."""
    diff, sigma = verdict.head_minus_base_kld, verdict.sigma
    if diff is None:
        return "head − base mean KLD unknown"
    if not sigma:
        return f"head − base mean KLD {diff:+.6f}"
    return f"head − base mean KLD {diff:+.6f} ± {sigma:.6f}, {diff / sigma:+.1f}σ"


@dataclass(frozen=True)
class ResultFile:
    """One parsed result document and where it came from."""

    path: Path
    kind: str
    canonical: str   # the model's JSON form in one spelling (pinset.cells.canonical): what tells duplicates apart
    sha256: str      # of the file's bytes: names the input in provenance independent of its path
    model: SimResult | VerifyResult | KldResult | BenchResult | PickResult | BlameResult

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def data(self) -> dict:
        """The model's current JSON form, whatever version the file had: for a producer that re-reads a result
        (bench --reanalyse); the report's stages read the model."""
        return self.model.to_json()


def load_result(path: str | Path) -> ResultFile:
    """One result file read through its kind's model (older versions upgraded, non-finite numbers as
    "not measured"); the later stages read the model, never the file's keys."""
    doc, kind, _schema, raw = read_document(path)
    if kind not in MODELS:
        article = "an" if kind[0] in "aeiou" else "a"
        raise PinsetError(f"{doc.path}: {article} {kind} document; pinset report reads the results of {', '.join(KINDS)}")
    model = MODELS[kind].from_json(doc)
    check_derived(doc.path, model)
    return ResultFile(doc.path, kind, canonical(model.to_json()), hashlib.sha256(raw).hexdigest(), model)


def load_results(paths: list[str | Path]) -> list[ResultFile]:
    if not paths:
        raise PinsetError("no result files given (pass the JSON files written by sim, verify, kld, bench, pick and blame)")
    files = [load_result(p) for p in paths]
    for f in files:
        if isinstance(f.model, BenchResult) and f.model.compare != "builds":
            raise PinsetError(f"{f.path}: compare {f.model.compare!r}: a comparison of two models on one build "
                              "(pinset bench --vs-model), not base vs head of the pin set; pinset report takes "
                              "base/head results only")
    return files
