"""`pinset refresh --json`: the series fitted to a build, as a workflow reads it (kind "refresh"; results.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pinset.results import SCHEMAS, STARTED_SCHEMA, Doc

OUTCOMES = ("refreshed", "written", "nothing", "blocked")


@dataclass(frozen=True)
class RefreshedPinJson:
    pin: str
    mode: str           # how it applied before: offset | 3-way
    folder: str         # its patches (folder or file)
    patches: list[str]  # the new patch files' names


@dataclass
class RefreshResult:
    build: str
    commit: str
    outcome: str                    # refreshed (shown, --write not given), written, nothing, blocked
    refreshed: list[RefreshedPinJson] = field(default_factory=list)
    exact: list[str] = field(default_factory=list)      # named pins that apply exactly already
    problems: list[str] = field(default_factory=list)   # blocked: why, one line each

    @property
    def ok(self) -> bool:
        return self.outcome != "blocked"

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["refresh"], "kind": "refresh", "ok": self.ok, "build": self.build,
                "commit": self.commit, "outcome": self.outcome,
                "refreshed": [{"pin": r.pin, "mode": r.mode, "folder": r.folder, "patches": list(r.patches)}
                              for r in self.refreshed],
                "exact": list(self.exact), "problems": list(self.problems)}

    @classmethod
    def from_json(cls, d: Doc) -> RefreshResult:
        d.get("ok", bool)
        return cls(d.get("build", str), d.get("commit", str), d.choice("outcome", OUTCOMES),
                   [RefreshedPinJson(r.get("pin", str), r.get("mode", str), r.get("folder", str), r.strs("patches"))
                    for r in d.objs("refreshed")], d.strs("exact"), d.strs("problems"))


_STRS = {"type": "array", "items": {"type": "string"}}
JSON_SCHEMA = {
    "type": "object", "required": ["schema", "kind", "ok", "build", "commit", "outcome", "refreshed", "exact", "problems"],
    "properties": {
        "schema": {"const": 1}, "kind": {"const": "refresh"}, "started": STARTED_SCHEMA, "ok": {"type": "boolean"}, "build": {"type": "string"},
        "commit": {"type": "string"}, "outcome": {"enum": list(OUTCOMES)},
        "refreshed": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["pin", "mode", "folder", "patches"],
            "properties": {"pin": {"type": "string"}, "mode": {"type": "string"}, "folder": {"type": "string"},
                           "patches": _STRS}}},
        "exact": _STRS, "problems": _STRS,
    },
}
