"""Result dataclasses of `pinset sim`, and their JSON form (the contract other verbs read)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pinset import SCHEMA_VERSION


@dataclass
class Contract:
    ok: bool = True
    problems: list[str] = field(default_factory=list)


@dataclass
class PinResult:
    id: str
    status: str
    required: bool
    conflict_with: str | None = None
    files: list[str] = field(default_factory=list)
    retire: bool = False
    contract: Contract = field(default_factory=Contract)
    detail: str | None = None           # one line: why it conflicted / errored / counts as upstream
    carried_fraction: float | None = None  # share of substantive added lines already in the bare build
    hunk: list[str] | None = None       # conflicts: the hunk git could not apply (header + first lines)
    base_relation: str | None = None    # upstream conflicts on git builds: build vs pin base (older|contains|diverged)

    @property
    def ok(self) -> bool:
        return self.status in ("applied", "upstream") and self.contract.ok


@dataclass
class BuildResult:
    build: str
    commit: str
    pins: list[PinResult]
    tree: str | None = None             # merged tree in the mirror (not in JSON)
    base_tree: str | None = None

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.pins if p.required)


@dataclass
class SimResult:
    builds: list[BuildResult]
    pinset_digest: str = ""

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.builds)

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA_VERSION,
            "kind": "sim",
            "pinset": self.pinset_digest,
            "ok": self.ok,
            "builds": [
                {"build": b.build, "commit": b.commit, "ok": b.ok,
                 "pins": [_pin_json(p) for p in b.pins]}
                for b in self.builds
            ],
        }


def _pin_json(p: PinResult) -> dict:
    out = {
        "id": p.id, "status": p.status, "required": p.required, "conflict_with": p.conflict_with,
        "files": list(p.files), "retire": p.retire, "contract": asdict(p.contract),
    }
    if p.detail:
        out["detail"] = p.detail
    if p.carried_fraction is not None:
        out["carried_fraction"] = round(p.carried_fraction, 4)
    if p.hunk:
        out["hunk"] = list(p.hunk)
    if p.base_relation:
        out["base_relation"] = p.base_relation
    return out
