"""Result dataclasses of `pinset verify` and their JSON form (schema 1, kind "verify"): `to_json` for the
producer, `from_json` for `pinset report`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, cast

from pinset.cells import SAYS_NOTHING, BuildCommits, Cells, PinStates, device_text, machine_key
from pinset.checks.backend_ops import OpCount
from pinset.result_parts import FieldsJson, MachineRecord
from pinset.results import SCHEMAS, Doc
from pinset.sim.model import CONFLICT, ERROR

GATES = ("cpu-build", "cpu-backend-ops", "cpu-test-chat", "cuda-build", "test-chat", "backend-ops", "feature-checks")
CPU_GATES = ("cpu-build", "cpu-backend-ops", "cpu-test-chat")
GPU_GATES = ("cuda-build", "test-chat", "backend-ops")
# The statuses of gates and feature checks: spelled here once, everything else names these constants.
PASSED: Final = "passed"
FAILED: Final = "failed"
NOT_RUN: Final = "not-run"
UNCHECKED: Final = "unchecked"
GateStatus = Literal["passed", "failed", "not-run"]
CheckStatus = Literal["passed", "failed", "not-run", "unchecked"]
GATE_STATUSES: tuple[GateStatus, ...] = (PASSED, FAILED, NOT_RUN)
CHECK_STATUSES: tuple[CheckStatus, ...] = (PASSED, FAILED, NOT_RUN, UNCHECKED)
RAN = (PASSED, FAILED)   # a check that ran (not-run and unchecked ones did not)
INTERRUPTED = "verify was interrupted (SIGINT/SIGTERM)"   # the detail of the gate Ctrl-C or SIGTERM cut short
PIN_SET = "(pin set)"   # CheckResult.pin of a pin-set-level check (pins.yaml top-level `checks:`: no pin owns it)
NOT_RUN_PREFIX = "not run: "   # the detail of a gate that did not run because of another one


def not_run_because(reason: str) -> str:
    """The detail of a gate not run for `reason` (a failed gate, an interruption): the stopped-gate rule's text,
    written once (verify writes it, the report reads the reason back with `not_run_reason`)."""
    return NOT_RUN_PREFIX + reason


def gate_failed_reason(gate: str) -> str:
    return f"gate {gate} failed"


def not_run_reason(detail: str | None) -> str:
    """Why a gate did not run, from its detail: the reason without the "not run: " of not_run_because."""
    return (detail or "").removeprefix(NOT_RUN_PREFIX)


def is_stopped(status: str, not_requested: bool) -> bool:
    """The stopped-gate rule: a gate that did not run although it was asked for (a gate before it failed, the
    run was interrupted, the sim gave no tree). A build with a stopped gate is not ok; pick --verify counts it
    as failed; the report lists it as "verify stopped" unless another machine ran it."""
    return status == NOT_RUN and not not_requested


@dataclass(frozen=True)
class NotTested(FieldsJson):
    """Something a verify run did not test, and why: typed, so no reader parses it back out of text."""

    what: str
    why: str

    @classmethod
    def from_json(cls, d: Doc) -> NotTested:
        return cls(d.get("what", str), d.get("why", str))

    def line(self) -> str:
        return f"{self.what}: {self.why}"


def op_from_json(d: Doc) -> OpCount:
    return OpCount(d.get("op", str), d.get("backend", str), d.get("passed", int), d.get("total", int),
                   d.get("not_supported", int), d.strs("failures"), d.get("params", str, None, default=None))


@dataclass
class CheckResult:
    pin: str
    check: str             # FeatureCheck.describe()
    status: str            # CHECK_STATUSES
    cases: int = 0
    detail: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"pin": self.pin, "check": self.check, "status": self.status, "cases": self.cases,
                "detail": self.detail, "seconds": round(self.seconds, 1)}

    @classmethod
    def from_json(cls, d: Doc) -> CheckResult:
        return cls(d.get("pin", str), d.get("check", str), d.choice("status", CHECK_STATUSES), d.get("cases", int),
                   d.get("detail", str, None), cast(float, d.num("seconds", default=0.0)))


@dataclass
class GateResult:
    name: str
    status: str = NOT_RUN       # GATE_STATUSES
    seconds: float = 0.0
    detail: str | None = None
    ops: list[OpCount] | None = None
    checks: list[CheckResult] | None = None
    extra: dict = field(default_factory=dict)   # cached/targets for builds, device for backend-ops, logs

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def stopped(self) -> bool:
        return is_stopped(self.status, bool(self.extra.get("not_requested")))

    def to_json(self) -> dict:
        out = {"name": self.name, "status": self.status, "seconds": round(self.seconds, 1), "detail": self.detail}
        if self.ops is not None:
            out["ops"] = [o.to_json() for o in self.ops]
        if self.checks is not None:
            out["checks"] = [c.to_json() for c in self.checks]
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, d: Doc) -> GateResult:
        known = {"name", "status", "seconds", "detail", "ops", "checks"}
        ops = [op_from_json(o) for o in d.objs("ops")] if d.get("ops", list, None, default=None) is not None else None
        checks = [CheckResult.from_json(c) for c in d.objs("checks")] \
            if d.get("checks", list, None, default=None) is not None else None
        return cls(d.get("name", str), d.choice("status", GATE_STATUSES), d.num("seconds"), d.get("detail", str, None),
                   ops, checks, {k: v for k, v in d.raw.items() if k not in known})

    @property
    def shown_seconds(self) -> float:
        """The seconds as the JSON holds them (one decimal): what the renderers print, so a run and its file agree."""
        return round(self.seconds, 1)

    @property
    def device(self) -> str | None:
        """test-backend-ops gates: the device the run named (`extra`)."""
        return self.extra.get("device")

    @property
    def scope(self) -> str | None:
        """The CPU backend-ops gate: the rule that chose its ops (plan.cpu_gate_scope)."""
        return self.extra.get("scope")

    @property
    def where(self) -> str:
        """The feature-checks gate: where its checks ran ("?" when the file does not say)."""
        return self.extra.get("where", "?")


@dataclass
class PinRef(FieldsJson):
    id: str
    status: str
    ref: str             # PR commit sha, or the first 12 hex of sha256 over the patch series

    @property
    def did_not_apply(self) -> bool:
        """Verify's own word that the pin conflicted or errored (sim's statuses, as verify wrote them)."""
        return self.status in (CONFLICT, ERROR)

    @classmethod
    def from_json(cls, d: Doc) -> PinRef:
        return cls(d.get("id", str), d.get("status", str), d.get("ref", str))


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
    not_tested: list[NotTested] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every gate that ran passed, and nothing that should have run was stopped."""
        if any(g.status == FAILED for g in self.gates):
            return False
        return not self.stopped and any(g.status == PASSED for g in self.gates)

    @property
    def stopped(self) -> list[GateResult]:
        return [g for g in self.gates if g.stopped]

    @property
    def failed_gates(self) -> list[str]:
        """Gates that failed or were stopped: what keeps `pinset pick --verify` from confirming the build."""
        return [g.name for g in self.gates if g.status == FAILED or g.stopped]

    @property
    def not_run(self) -> list[str]:
        """Gates that did not run, requested or not: what this build's green does not cover."""
        return [g.name for g in self.gates if g.status == NOT_RUN]

    def gate(self, name: str) -> GateResult:
        for g in self.gates:
            if g.name == name:
                return g
        raise KeyError(name)

    def to_json(self) -> dict:
        return {"build": self.build, "commit": self.commit, "ok": self.ok, "tree": self.tree,
                "pins": [p.to_json() for p in self.pins], "cmake_flags": list(self.cmake_flags),
                "cuda_architectures": self.cuda_architectures, "ccache": self.ccache,
                "gates": [g.to_json() for g in self.gates], "not_run": self.not_run,
                "not_tested": [n.to_json() if isinstance(n, NotTested) else dict(n) for n in self.not_tested]}

    @classmethod
    def from_json(cls, d: Doc) -> BuildVerification:
        d.get("ok", bool)
        not_tested = d.objs("not_tested")
        return cls(d.get("build", str), d.get("commit", str), [PinRef.from_json(p) for p in d.objs("pins")],
                   [GateResult.from_json(g) for g in d.objs("gates")], d.strs("cmake_flags"),
                   d.get("cuda_architectures", str, None), d.get("tree", str, None, default=None),
                   d.get("ccache", str, None, default=None),
                   [NotTested.from_json(n) for n in not_tested])


@dataclass
class VerifyResult:
    pinset_digest: str
    machine: MachineRecord          # a producer may give its JSON object (Machine.to_json()): read as given
    builds: list[BuildVerification]
    cuda: bool
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.machine, dict):
            self.machine = MachineRecord.of(self.machine)

    @property
    def ok(self) -> bool:
        return bool(self.builds) and all(b.ok for b in self.builds)

    def summary(self) -> str:
        """One line that claims no more than ran: "all gates green" only when every gate ran and passed."""
        if not self.builds:
            return "nothing verified (no build)"
        red = [f"{g.name} on {b.build}" for b in self.builds for g in b.gates if g.status == FAILED]
        if red:
            return "a gate is red: " + ", ".join(red)
        stopped = [b.build for b in self.builds if not b.ok]
        if stopped and any(g.detail == INTERRUPTED for b in self.builds for g in b.gates):
            return f"{INTERRUPTED}: gates not run on " + ", ".join(stopped)
        if stopped:
            return "verify stopped before its gates ran on " + ", ".join(stopped)
        not_run = {name for b in self.builds for name in b.not_run}
        if not not_run:
            return "all gates green"
        ran = {g.name for b in self.builds for g in b.gates if g.status == PASSED}
        parts = ["CPU and GPU gates green" if set(CPU_GATES + GPU_GATES) <= ran else
                 "CPU gates green" if set(CPU_GATES) <= ran else "gates that ran are green"]
        if "feature-checks" in ran:
            parts[0] += ", feature checks green" + (" on CPU" if not self.cuda else "")
        if not_run & set(GPU_GATES):
            parts.append("GPU gates not run" + ("" if self.cuda else " (no --cuda)"))
        if "feature-checks" in not_run:
            parts.append("no feature check run")
        return "; ".join(parts)

    @property
    def machine_key(self) -> tuple:
        return machine_key(self.machine)

    @property
    def gpu_class(self) -> str | None:
        """The pins.yaml `gpus:` class of the CI cell that made it (--gpu-class)."""
        return self.options.get("gpu_class")

    def cells(self) -> Cells:
        """Per build, machine and gate its status, op counts and feature checks (pinset.cells); a gate or check
        not run says nothing (another file may have run it)."""
        mk = self.machine_key
        host = f"{mk[1] or 'no GPU'} on {device_text(mk)}" + (f" as {self.gpu_class}" if self.gpu_class else "")
        for b in self.builds:
            for g in b.gates:
                yield ("verify", b.build, host, g.name), (g.status if g.status != NOT_RUN else SAYS_NOTHING)
                for op in g.ops or []:
                    yield (("verify", b.build, host, g.name, op.op, op.backend) + ((f"/{op.params}/",) if op.params else ()),
                           {"passed": op.passed, "total": op.total, "not_supported": op.not_supported})
                for c in g.checks or []:
                    yield (("verify", b.build, host, "feature check", c.pin, c.check),
                           SAYS_NOTHING if c.status == NOT_RUN else {"status": c.status, "cases": c.cases})

    def build_commits(self) -> BuildCommits:
        for b in self.builds:
            yield b.build, b.commit

    def pin_states(self) -> PinStates:
        return iter(())

    @classmethod
    def from_json(cls, d: Doc) -> VerifyResult:
        d.get("ok", bool)
        machine = MachineRecord.from_json(d.obj("machine"))
        options = d.obj("options", default=None)
        if options is not None:
            options.get("gpu_class", str, None, default=None)  # the matrix cell it fills
        return cls(d.get("pinset", str), machine, [BuildVerification.from_json(b) for b in d.objs("builds")],
                   d.get("cuda", bool, default=False), dict(options.raw) if options else {})

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["verify"], "kind": "verify", "pinset": self.pinset_digest, "ok": self.ok,
                "summary": self.summary(), "cuda": self.cuda, "options": dict(self.options), "machine": self.machine.to_json(),
                "builds": [b.to_json() for b in self.builds]}
