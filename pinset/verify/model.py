"""Result dataclasses of `pinset verify` and their JSON form (schema 1, kind "verify")."""

from __future__ import annotations

from dataclasses import dataclass, field

from pinset import SCHEMA_VERSION
from pinset.checks.backend_ops import OpCount

GATES = ("cpu-build", "cpu-backend-ops", "cpu-test-chat", "cuda-build", "test-chat", "backend-ops", "feature-checks")
GPU_GATES = ("cuda-build", "test-chat", "backend-ops")


@dataclass
class CheckResult:
    pin: str
    check: str             # FeatureCheck.describe()
    status: str            # passed | failed | not-run | unchecked
    cases: int = 0
    detail: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"pin": self.pin, "check": self.check, "status": self.status, "cases": self.cases,
                "detail": self.detail, "seconds": round(self.seconds, 1)}


@dataclass
class GateResult:
    name: str
    status: str = "not-run"     # passed | failed | not-run
    seconds: float = 0.0
    detail: str | None = None
    ops: list[OpCount] | None = None
    checks: list[CheckResult] | None = None
    extra: dict = field(default_factory=dict)   # cached/targets for builds, device for backend-ops, logs

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_json(self) -> dict:
        out = {"name": self.name, "status": self.status, "seconds": round(self.seconds, 1), "detail": self.detail}
        if self.ops is not None:
            out["ops"] = [o.to_json() for o in self.ops]
        if self.checks is not None:
            out["checks"] = [c.to_json() for c in self.checks]
        out.update(self.extra)
        return out


@dataclass
class PinRef:
    id: str
    status: str
    ref: str             # PR commit sha, or the first 12 hex of sha256 over the patch series

    def to_json(self) -> dict:
        return {"id": self.id, "status": self.status, "ref": self.ref}


@dataclass
class BuildVerification:
    build: str
    commit: str
    pins: list[PinRef]
    gates: list[GateResult]
    cmake_flags: list[str] = field(default_factory=list)
    cuda_architectures: str | None = None
    tree: str | None = None
    ccache: str | None = None
    not_tested: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every gate that ran passed, and nothing that should have run was stopped."""
        if any(g.status == "failed" for g in self.gates):
            return False
        stopped = [g for g in self.gates if g.status == "not-run" and not g.extra.get("not_requested")]
        return not stopped and any(g.status == "passed" for g in self.gates)

    def gate(self, name: str) -> GateResult:
        for g in self.gates:
            if g.name == name:
                return g
        raise KeyError(name)

    def to_json(self) -> dict:
        return {"build": self.build, "commit": self.commit, "ok": self.ok, "tree": self.tree,
                "pins": [p.to_json() for p in self.pins], "cmake_flags": list(self.cmake_flags),
                "cuda_architectures": self.cuda_architectures, "ccache": self.ccache,
                "gates": [g.to_json() for g in self.gates], "not_tested": list(self.not_tested)}


@dataclass
class VerifyResult:
    pinset_digest: str
    machine: dict
    builds: list[BuildVerification]
    cuda: bool
    options: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.builds) and all(b.ok for b in self.builds)

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "kind": "verify", "pinset": self.pinset_digest, "ok": self.ok,
                "cuda": self.cuda, "options": dict(self.options), "machine": self.machine,
                "builds": [b.to_json() for b in self.builds]}
