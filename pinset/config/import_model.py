"""`pinset import --json`: what was imported, as a workflow reads it (kind "import"; pinset/results.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pinset.results import SCHEMAS, STARTED_SCHEMA, Doc

PIN_KINDS = ("pr", "patches")


@dataclass(frozen=True)
class ImportedPin:
    id: str
    kind: str                       # pr | patches
    source: str                     # the comment naming where it came from
    required: bool = True
    skip_unless_open: bool = False


@dataclass
class ImportResult:
    source: str                     # the pr-set.json or checkout read
    format: str                     # pr-set | ollama
    out: str                        # the pins.yaml written
    upstream: str
    builds: list[str]
    pins: list[ImportedPin]
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return True   # a refused import writes no result: bad input is exit 2

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["import"], "kind": "import", "ok": self.ok, "source": self.source,
                "format": self.format, "out": self.out, "upstream": self.upstream, "builds": list(self.builds),
                "pins": [{"id": p.id, "kind": p.kind, "source": p.source, "required": p.required,
                          "skip_unless_open": p.skip_unless_open} for p in self.pins],
                "notes": list(self.notes)}

    @classmethod
    def from_json(cls, d: Doc) -> ImportResult:
        d.get("ok", bool)
        pins = [ImportedPin(p.get("id", str), p.choice("kind", PIN_KINDS), p.get("source", str),
                            p.get("required", bool), p.get("skip_unless_open", bool, default=False))
                for p in d.objs("pins")]
        return cls(d.get("source", str), d.choice("format", ("pr-set", "ollama")), d.get("out", str),
                   d.get("upstream", str), d.strs("builds"), pins, d.strs("notes"))


JSON_SCHEMA = {
    "type": "object", "required": ["schema", "kind", "ok", "source", "format", "out", "upstream", "builds", "pins", "notes"],
    "properties": {
        "schema": {"const": 1}, "kind": {"const": "import"}, "started": STARTED_SCHEMA, "ok": {"type": "boolean"}, "source": {"type": "string"},
        "format": {"enum": ["pr-set", "ollama"]}, "out": {"type": "string"}, "upstream": {"type": "string"},
        "builds": {"type": "array", "items": {"type": "string"}},
        "pins": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["id", "kind", "source", "required"],
            "properties": {"id": {"type": "string"}, "kind": {"enum": list(PIN_KINDS)}, "source": {"type": "string"},
                           "required": {"type": "boolean"}, "skip_unless_open": {"type": "boolean"}}}},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
}
