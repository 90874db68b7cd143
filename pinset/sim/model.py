"""Result dataclasses of `pinset sim`, and their JSON form (the contract other verbs read): `to_json` for
the producer, `from_json` for `pinset report`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal, cast

from pinset.cells import BuildCommits, Cells, PinStates
from pinset.results import SCHEMAS, Doc
from pinset.sim.modes import APPLY_MODES, EXACT, REFRESHABLE, RESOLUTION, ApplyMode
from pinset.sim.prs import PrStates
from pinset.sim.unions import UnionHunk

if TYPE_CHECKING:
    from pinset.sim.apply_errors import BuildPlace

PinStatus = Literal["applied", "conflict", "upstream", "skipped", "error"]
STATUSES: tuple[PinStatus, ...] = ("applied", "conflict", "upstream", "skipped", "error")
APPLIED: PinStatus = "applied"
CONFLICT: PinStatus = "conflict"
UPSTREAM: PinStatus = "upstream"
SKIPPED: PinStatus = "skipped"
ERROR: PinStatus = "error"
# A pin's state on one build (blame's, pick's, the report's cells): the status, an applied pin whose contract
# broke told apart as `contract`.
PinState = Literal["applied", "upstream", "conflict", "contract", "error", "skipped"]
CONTRACT: PinState = "contract"
BASE_RELATIONS = ("older", "contains", "diverged")  # a build against the pin's base commit


def is_cuda_path(path: str) -> bool:
    """Code only a CUDA build compiles: a pin touching it needs evidence from a real CUDA device."""
    return path.startswith("ggml/src/ggml-cuda/") or path.endswith((".cu", ".cuh"))


@dataclass
class Contract:
    ok: bool = True
    problems: list[str] = field(default_factory=list)


@dataclass
class PinResult:
    id: str
    status: PinStatus
    required: bool
    conflict_with: str | None = None
    files: list[str] = field(default_factory=list)   # the conflicting files for a conflict, else `touched`
    retire: bool = False
    contract: Contract = field(default_factory=Contract)
    detail: str | None = None           # one line: why it conflicted / errored / counts as upstream
    carried_fraction: float | None = None  # share of substantive added lines already in the bare build
    touched: list[str] | None = None    # every file the pin changes; None: unknown (could not be prepared, old file)
    hunk: list[str] | None = None       # conflicts: the hunk git could not apply (header + first lines)
    base_relation: str | None = None    # upstream conflicts on git builds: build vs pin base (older|contains|diverged)
    evidence: list[str] | None = None   # pins.yaml `evidence:` (the kinds the pin needs); None: derived from touched
    build_has: BuildPlace | None = None     # conflicts: the build's lines where `hunk` wants to change it (BuildPlace)
    apply_mode: ApplyMode | None = None  # applied pins: exact|offset|3-way|resolution (None: not known, old file)
    resolutions: list[str] | None = None  # applied by the recorded resolutions named (the ledger, docs/heal.md)
    unions: list[UnionHunk] | None = None  # applied by provable add/add unions no person wrote (sim/unions.py)
    digest: str | None = None           # what the pin applies (PinSpec.digest: series bytes or PR commit); None: old file

    @property
    def status_text(self) -> str:
        """`applied (recorded resolution R)` for a pin the ledger applied, else the status."""
        if self.status == APPLIED and self.resolutions:
            return f"applied (recorded resolution {', '.join(self.resolutions)})"
        if self.status == APPLIED and self.unions:
            return f"applied (union at {', '.join(f'{u.file}:{u.line}' for u in self.unions)})"
        return self.status

    @property
    def ok(self) -> bool:
        return self.status in (APPLIED, UPSTREAM) and self.contract.ok

    @property
    def applied(self) -> bool:
        return self.status == APPLIED

    @property
    def conflicts(self) -> bool:
        return self.status == CONFLICT

    @property
    def errored(self) -> bool:
        return self.status == ERROR

    @property
    def is_upstream(self) -> bool:
        """Upstream already has its change (retired or carried by the build)."""
        return self.status == UPSTREAM

    @property
    def applied_exactly(self) -> bool:
        return self.status == APPLIED and self.apply_mode == EXACT

    @property
    def applied_by_resolution(self) -> bool:
        """Applied by a recorded resolution (the ledger), which `git am -3` cannot replay."""
        return self.status == APPLIED and (self.apply_mode == RESOLUTION or bool(self.resolutions))

    @property
    def applied_by_union(self) -> bool:
        """Applied with add/add conflicts pinset unioned itself (pins.yaml `unions:`): a merge no one reviewed."""
        return self.status == APPLIED and bool(self.unions)

    @property
    def applied_inexactly(self) -> bool:
        """Applied, but not exactly (lines away, by a 3-way merge or a recorded resolution, or not known)."""
        return self.status == APPLIED and self.apply_mode != EXACT

    @property
    def did_not_apply(self) -> bool:
        """A conflict or an error: the pin's change is not in the tree and upstream does not have it."""
        return self.status in (CONFLICT, ERROR)

    @property
    def contract_broken(self) -> bool:
        """Applied, but its contract (the symbols and files it promises) does not hold on the tree."""
        return self.status == APPLIED and not self.contract.ok

    @property
    def in_tree(self) -> bool:
        """Its change is in the tree: applied, or upstream already has it."""
        return self.status in (APPLIED, UPSTREAM)

    @property
    def needs_refresh(self) -> bool:
        """Applied, but lines away or by a 3-way merge (modes.REFRESHABLE): `pinset refresh` makes it exact. The
        one definition the sim table, the report and refresh use."""
        return self.status == APPLIED and self.apply_mode in REFRESHABLE

    def applied_worse_than(self, before: PinResult) -> bool:
        """Applied both times, but further from exact now (exact < offset < 3-way < resolution): forecast's `moves`."""
        if not (self.applied and before.applied and self.apply_mode and before.apply_mode):
            return False
        return APPLY_MODES.index(self.apply_mode) > APPLY_MODES.index(before.apply_mode)

    @property
    def state(self) -> PinState:
        """sim's status, with an applied pin whose contract broke told apart as `contract` (as blame's states)."""
        return CONTRACT if self.contract_broken else self.status

    @property
    def touches_cuda(self) -> bool | None:
        """True/False from `touched`; None when the files the pin changes are unknown."""
        return None if self.touched is None else any(is_cuda_path(f) for f in self.touched)

    @classmethod
    def from_json(cls, d: Doc) -> PinResult:
        c = d.obj("contract")
        return cls(d.get("id", str), cast(PinStatus, d.choice("status", STATUSES)), d.get("required", bool),
                   d.get("conflict_with", str, None), d.strs("files"), d.get("retire", bool),
                   Contract(c.get("ok", bool), c.strs("problems")), d.get("detail", str, None, default=None),
                   d.num("carried_fraction", null=True, default=None),
                   _touched(d), d.strs("hunk", default=None) or None,
                   d.choice("base_relation", BASE_RELATIONS, default=None),
                   d.strs("evidence", default=None) or None, _build_has(d),
                   cast("ApplyMode | None", d.choice("apply_mode", APPLY_MODES, default=None)),
                   d.strs("resolutions", default=None) or None,
                   [UnionHunk(o.get("file", str), o.get("line", int), tuple(o.strs("upstream")), tuple(o.strs("pin")))
                    for o in d.objs("unions", default=[])] or None,
                   d.get("digest", str, None, default=None))


def _build_has(d: Doc):
    """Optional `build_has` {"path", "start", "lines"} of a conflict (files before it existed have none)."""
    from pinset.sim.apply_errors import BuildPlace

    o = d.obj("build_has", null=True, default=None)
    return None if o is None else BuildPlace(o.get("path", str), o.get("start", int), o.strs("lines"))


def _touched(d: Doc) -> list[str] | None:
    """`touched` (null: unknown). Files written before it existed: `files` held every file the pin changes
    unless the pin conflicted (then only the conflicting ones) or could not be prepared."""
    if d.has("touched"):
        return None if d.get("touched", list, None) is None else d.strs("touched")
    return d.strs("files") if d.get("status", str) in ("applied", "upstream", "skipped") else None


@dataclass
class BuildResult:
    build: str
    commit: str
    pins: list[PinResult]
    tree: str | None = None             # merged tree in the mirror (not in JSON)
    base_tree: str | None = None
    mirror_commit: str | None = None    # pypi builds: the mirror's commit of the sdist's tree (`commit` is CHANGELOG's)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.pins if p.required)

    @classmethod
    def from_json(cls, d: Doc) -> BuildResult:
        d.get("ok", bool)
        return cls(d.get("build", str), d.get("commit", str), [PinResult.from_json(p) for p in d.objs("pins")],
                   mirror_commit=d.get("mirror_commit", str, None, default=None))


@dataclass
class SimResult:
    builds: list[BuildResult]
    pinset_digest: str = ""
    prs: PrStates | None = None   # the PR pins' pull requests (pinset/sim/prs.py); None: none asked, old file

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.builds)

    def cells(self) -> Cells:
        """Per build and pin what the simulation found (pinset.cells: compared across files by the report)."""
        for b in self.builds:
            for p in b.pins:
                yield (("sim", b.build, p.id),
                       {"status": p.status, "conflict_with": p.conflict_with, "retire": p.retire,
                        "required": p.required, "contract_ok": p.contract.ok})

    def build_commits(self) -> BuildCommits:
        for b in self.builds:
            yield b.build, b.commit

    def pin_states(self) -> PinStates:
        for b in self.builds:
            for p in b.pins:
                yield b.build, p.id, p.state

    @classmethod
    def from_json(cls, d: Doc) -> SimResult:
        """A sim document (schema 1; files written before `touched` existed read with touched unknown)."""
        d.get("ok", bool)
        prs = d.obj("prs", null=True, default=None)
        return cls([BuildResult.from_json(b) for b in d.objs("builds")], d.get("pinset", str),
                   PrStates.from_json(prs) if prs is not None else None)

    def to_json(self) -> dict:
        return {
            "schema": SCHEMAS["sim"],
            "kind": "sim",
            "pinset": self.pinset_digest,
            "ok": self.ok,
            "builds": [
                {"build": b.build, "commit": b.commit, "ok": b.ok,
                 **({"mirror_commit": b.mirror_commit} if b.mirror_commit else {}),
                 "pins": [_pin_json(p) for p in b.pins]}
                for b in self.builds
            ],
            **({"prs": self.prs.to_json()} if self.prs is not None and self.prs.pins else {}),
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
    if p.touched is not None:
        out["touched"] = list(p.touched)
    if p.hunk:
        out["hunk"] = list(p.hunk)
    if p.base_relation:
        out["base_relation"] = p.base_relation
    if p.evidence:
        out["evidence"] = list(p.evidence)
    if p.build_has is not None:
        out["build_has"] = p.build_has.to_json()
    if p.apply_mode:
        out["apply_mode"] = p.apply_mode
    if p.resolutions:
        out["resolutions"] = list(p.resolutions)
    if p.unions:
        out["unions"] = [u.to_json() for u in p.unions]
    if p.digest:
        out["digest"] = p.digest
    return out
