"""`pinset apply --json`: the tree written, as a workflow reads it (kind "apply"; pinset/results.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pinset.results import SCHEMAS, STARTED_SCHEMA, Doc


@dataclass
class ApplyResult:
    build: str
    commit: str                     # the build's upstream commit
    out: str                        # the folder written (or that would have been)
    bare: bool
    written: bool                   # False: a required pin failed, nothing written
    applied: list[str] = field(default_factory=list)       # pins in the tree (with a recorded resolution noted)
    failed: list[str] = field(default_factory=list)        # required pins that failed (nothing written)
    not_in_tree: list[str] = field(default_factory=list)   # optional pins that did not apply
    skipped: list[str] = field(default_factory=list)       # left out: their PR is not open (skip-unless-open)

    @property
    def ok(self) -> bool:
        return self.written

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["apply"], "kind": "apply", "ok": self.ok, "build": self.build,
                "commit": self.commit, "out": self.out, "bare": self.bare, "written": self.written,
                "applied": list(self.applied), "failed": list(self.failed), "not_in_tree": list(self.not_in_tree),
                "skipped": list(self.skipped)}

    @classmethod
    def from_json(cls, d: Doc) -> ApplyResult:
        d.get("ok", bool)
        return cls(d.get("build", str), d.get("commit", str), d.get("out", str), d.get("bare", bool),
                   d.get("written", bool), d.strs("applied"), d.strs("failed"), d.strs("not_in_tree"),
                   d.strs("skipped", default=[]))


_STRS = {"type": "array", "items": {"type": "string"}}
JSON_SCHEMA = {
    "type": "object",
    "required": ["schema", "kind", "ok", "build", "commit", "out", "bare", "written", "applied", "failed", "not_in_tree"],
    "properties": {"schema": {"const": 1}, "kind": {"const": "apply"}, "started": STARTED_SCHEMA, "ok": {"type": "boolean"},
                   "build": {"type": "string"}, "commit": {"type": "string"}, "out": {"type": "string"},
                   "bare": {"type": "boolean"}, "written": {"type": "boolean"}, "applied": _STRS, "failed": _STRS,
                   "not_in_tree": _STRS, "skipped": _STRS},
}
