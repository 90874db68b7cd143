"""The result model of `pinset matrix` (a GitHub Actions matrix, `{"include": [cell, ...]}`): `to_json` for the
verb, `from_json` for `pinset report --expect`, which names every cell that never delivered a result.

The document has no `kind` or `schema` key: Actions reads every top-level key as one more matrix dimension, so
`include` is all there is (docs/ci.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pinset.results import Doc

MATRIX_KINDS = ("verify", "kld", "bench")   # what a cell runs, in the order its commands run


@dataclass
class MatrixCell:
    """One CI job: a build on a GPU class, with the exact pinset command lines it runs."""

    cell: str                         # "BUILD on GPU": what the report names a missing cell by
    build: str
    gpu: str
    pinset_digest: str | None
    runs_on: list[str] = field(default_factory=list)
    architectures: str | None = None
    artifact: str = ""
    results: str = ""                 # RESULTS_DIR/ARTIFACT: where the cell's JSON and logs land
    kinds: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"cell": self.cell, "pinset": self.pinset_digest, "build": self.build, "gpu": self.gpu,
                "runs-on": list(self.runs_on), "architectures": self.architectures,
                "artifact": self.artifact, "results": self.results, "kinds": list(self.kinds),
                "commands": list(self.commands), "script": "\n".join(self.commands)}

    @classmethod
    def from_json(cls, d: Doc) -> MatrixCell:
        """What `report --expect` needs of a cell (build, gpu, kinds; pinset and architectures where given)."""
        kinds = d.strs("kinds")
        bad = sorted(set(kinds) - set(MATRIX_KINDS))
        if bad or not kinds:
            d.fail("kinds", f"expected a non-empty list of verify, kld, bench (got {', '.join(bad) or 'none'})")
        return cls(d.get("cell", str), d.get("build", str), d.get("gpu", str), d.get("pinset", str, default=None),
                   d.strs("runs-on", default=[]), d.get("architectures", str, default=None),
                   d.get("artifact", str, default=""), d.get("results", str, default=""),
                   list(dict.fromkeys(kinds)), d.strs("commands", default=[]))


@dataclass
class MatrixResult:
    cells: list[MatrixCell]

    def to_json(self) -> dict:
        """{"include": [cell, ...]}: nothing else at the top, Actions would read another key as a dimension."""
        return {"include": [c.to_json() for c in self.cells]}

    @classmethod
    def from_json(cls, d: Doc) -> MatrixResult:
        return cls([MatrixCell.from_json(c) for c in d.objs("include")])
