"""Combining result files from one or many machines into one view, refusing contradictions.

Every result is broken into cells (e.g. verify x build x machine x gate). The same cell may come from
several files (a CI matrix re-run, a copied artifact): identical values merge silently, different values
are an error naming both files, because a report that picks one of two answers would hide a flaky run.
A gate or check that was `not-run` in one file and run in another is not a contradiction: the run wins.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from pinset.cells import SAYS_NOTHING, canonical
from pinset.checks.backend_ops import OpCount
from pinset.errors import PinsetError
from pinset.matrix.model import MatrixCell, MatrixResult
from pinset.measures.bench_model import BenchResult, BenchRow
from pinset.measures.kld_model import KldResult, KldRun
from pinset.nightly.model import NOT_TRIED, BlameResult, BuildPick, PickResult
from pinset.report.load import KINDS, ResultFile
from pinset.result_parts import GpuRecord, MachineRecord
from pinset.sim.model import BuildResult, SimResult
from pinset.verify.model import NOT_RUN, BuildVerification, CheckResult, GateResult, VerifyResult


@dataclass
class VerifyRun:
    """One build verified on one machine (gates merged over every file that reported them)."""

    machine: MachineRecord
    machine_key: tuple
    build: BuildVerification        # the gates, checks and not-tested items of every file, merged
    sources: list[str] = field(default_factory=list)
    gpu_class: str | None = None    # the pins.yaml `gpus:` class of the CI cell that made it (--gpu-class)
    ok: bool = True                 # every file called the build ok (a run elsewhere never undoes a stop here)

    @property
    def gpu(self) -> GpuRecord | None:
        return self.machine.gpu


@dataclass
class KldStudy:
    """KLD runs against one CPU reference (one model, text and context)."""

    result: KldResult               # the first file's: model, text, reference, verdict, host
    runs: list[KldRun]
    sources: list[str] = field(default_factory=list)

    @property
    def device(self) -> str:
        """The backends of its runs ("CPU" for CPU against CPU), "none" without a run."""
        return ", ".join(sorted({r.backend for r in self.runs})) or "none"

    @property
    def on_device(self) -> bool:
        """Every run under test ran on a device, not the CPU (a CPU-against-CPU KLD says nothing of a GPU path)."""
        return bool(self.runs) and all(r.backend != "CPU" for r in self.runs)


@dataclass
class BenchStudy:
    """llama-bench rows of one base/head pair on one GPU and model."""

    result: BenchResult             # the first file's: model, sides, GPU, rounds, host
    rows: list[BenchRow]
    sources: list[str] = field(default_factory=list)

    @property
    def device(self) -> str:
        """The GPU llama-bench ran on; "CPU" with the GPU hidden or with every test at -ngl 0."""
        on_cpu = self.rows and all(r.params.get("n_gpu_layers") == 0 for r in self.rows)
        return self.result.gpu.name if self.result.gpu and not on_cpu else "CPU"


@dataclass
class Merged:
    files: list[ResultFile]
    pinset: str | None
    sim: SimResult | None           # builds merged over every sim file (the first file to simulate a build speaks)
    verify: list[VerifyRun]
    kld: list[KldStudy]
    bench: list[BenchStudy]
    commits: dict[str, str]  # build name -> longest commit seen
    pick: PickResult | None = None      # rows merged over every pick file (a tried row beats "not tried")
    blame: list[BlameResult] = field(default_factory=list)  # per (good, bad) commit range, pins merged

    def kinds(self) -> set[str]:
        return {f.kind for f in self.files}


M = TypeVar("M")


def models_of(files: list[ResultFile], cls: type[M]) -> list[tuple[M, str]]:
    """(model, path) of every file holding a `cls` result, in the files' order."""
    return [(f.model, str(f.path)) for f in files if isinstance(f.model, cls)]


def expected_cells(path) -> list[MatrixCell]:
    """The cells a run should have delivered, read from `pinset matrix` JSON by the matrix kind's own model."""
    from pinset.results import Doc, read_json

    return MatrixResult.from_json(Doc(read_json(path, "matrix")[0], path, "matrix")).cells


def op_key(op: OpCount) -> tuple[str, str, str]:
    """An op count is one (op, backend, -p filter): the CPU gate may run MUL_MAT under two filters."""
    return op.op, op.backend, op.params or ""


def order_files(files: list[ResultFile]) -> list[ResultFile]:
    """A fixed order independent of the command line (same inputs -> same report), duplicates dropped."""
    seen: dict[str, ResultFile] = {}
    for f in sorted(files, key=lambda f: (KINDS.index(f.kind), f.canonical, f.name)):
        seen.setdefault(f.canonical, f)
    return list(seen.values())


# --- cells ----------------------------------------------------------------------------------
# What merging reads of each result is asked of its model, one method per question (pinset.cells): its cells
# (compared across files), its (build, commit) pairs, and the pins' states per build (`pin_states`: as blame's
# pin_state: sim's status, a broken contract as `contract`, as sim, pick -- the pins it passed a build over
# for -- and blame saw them: a blame that calls a pin broken on a build the sim calls fine, or the reverse,
# contradicts it).


def _show(value) -> str:
    return json.dumps(value, sort_keys=True) if not isinstance(value, str) else value


def check_consistent(files: list[ResultFile]) -> tuple[str | None, dict[str, str]]:
    """Raise PinsetError on the first contradiction; return the pin set digest and build commits."""
    digest = _one_pinset(files)
    commits = _build_commits(files)
    _check_cells(files)
    _check_pin_states(files)
    return digest, commits


def _one_pinset(files: list[ResultFile]) -> str | None:
    """The pin set every file that names one names (kld and bench: absent for explicit --base-bin/--head-bin
    and older files)."""
    digest_from: tuple[str, str] | None = None
    for f in files:
        digest = f.model.pinset_digest
        if not digest:
            continue
        if digest_from is None:
            digest_from = (digest, str(f.path))
        elif digest != digest_from[0]:
            raise PinsetError(f"{digest_from[1]} and {f.path} are results of different pin sets "
                              f"({digest_from[0]} vs {digest}); report one pin set at a time")
    return digest_from[0] if digest_from else None


def _build_commits(files: list[ResultFile]) -> dict[str, str]:
    """build -> the longest commit any file gives it; a commit that is no prefix of another is a contradiction."""
    commits: dict[str, tuple[str, str]] = {}
    for f in files:
        for build, commit in f.model.build_commits():
            if build in commits:
                known, where = commits[build]
                if not (known.startswith(commit) or commit.startswith(known)):
                    raise PinsetError(f"{where} and {f.path} disagree on build {build}: "
                                      f"commit {known[:12]} vs {commit[:12]}")
                if len(commit) > len(known):
                    commits[build] = (commit, where)
            else:
                commits[build] = (commit, str(f.path))
    return {b: c for b, (c, _) in commits.items()}


def _check_cells(files: list[ResultFile]) -> None:
    """Identical cells merge, different ones are an error naming both files, a cell that says nothing merges."""
    cells: dict[tuple, tuple[object, str]] = {}
    for f in files:
        for key, value in f.model.cells():
            if value is SAYS_NOTHING:
                continue
            if key in cells and cells[key][0] != value:
                other_value, other = cells[key]
                raise PinsetError(f"{other} and {f.path} disagree on {' / '.join(map(str, key))}: "
                                  f"{_show(other_value)} vs {_show(value)}")
            cells.setdefault(key, (value, str(f.path)))


def _check_pin_states(files: list[ResultFile]) -> None:
    """A pin's state on a build as sim, pick and blame saw it: two that differ contradict each other."""
    states: dict[tuple[str, str], tuple[str, str, str]] = {}
    for f in files:
        for build, pin, state in f.model.pin_states():
            said = states.setdefault((build, pin), (state, f.kind, str(f.path)))
            if said[0] != state:
                raise PinsetError(f"{said[2]} and {f.path} disagree on pin {pin} on build {build}: "
                                  f"{said[0]} ({said[1]}) vs {state} ({f.kind})")


# --- merging --------------------------------------------------------------------------------
def merge(files: list[ResultFile]) -> Merged:
    files = order_files(files)
    digest, commits = check_consistent(files)
    return Merged(files, digest, _merge_sim(files), _merge_verify(files), _merge_kld(files),
                  _merge_bench(files), commits, _merge_pick(files), _merge_blame(files))


def _merge_pick(files: list[ResultFile]) -> PickResult | None:
    """One pick (the cells above refuse two different picked bases): its rows, with a row another file tried
    replacing this one's "not tried"."""
    picks = [p for p, _ in models_of(files, PickResult)]
    if not picks:
        return None
    rows: dict[str, BuildPick] = {}
    for pick in picks:
        for b in pick.builds:
            if b.build not in rows or rows[b.build].verdict == NOT_TRIED:
                rows[b.build] = b
    first = picks[0]
    return PickResult(first.pinset_digest, first.picked, list(rows.values()), any(p.verified for p in picks))


def _merge_blame(files: list[ResultFile]) -> list[BlameResult]:
    """Blame results per range (good, bad commits); the pins of two files over one range are joined."""
    ranges: dict[tuple[str, str], BlameResult] = {}
    for blame, _ in models_of(files, BlameResult):
        key = (blame.good.commit, blame.bad.commit)
        if key not in ranges:
            ranges[key] = replace(blame, pins=list(blame.pins))
            continue
        have = {p.id for p in ranges[key].pins}
        ranges[key].pins += [p for p in blame.pins if p.id not in have]
        ranges[key].probes = max(ranges[key].probes, blame.probes)
    return list(ranges.values())


def _merge_sim(files: list[ResultFile]) -> SimResult | None:
    sims = [s for s, _ in models_of(files, SimResult)]
    if not sims:
        return None
    builds: dict[str, BuildResult] = {}
    for sim in sims:
        for b in sim.builds:
            builds.setdefault(b.build, b)
    return SimResult(list(builds.values()), sims[0].pinset_digest, next((s.prs for s in sims if s.prs), None))


def _prefer_run(old: G, new: G) -> G:
    return new if old.status == NOT_RUN and new.status != NOT_RUN else old


G = TypeVar("G", GateResult, CheckResult)


def _merge_gate(old: GateResult, new: GateResult) -> GateResult:
    gate = replace(_prefer_run(old, new))
    if old.ops is not None or new.ops is not None:
        ops = {op_key(o): o for o in (old.ops or [])}
        for o in new.ops or []:
            ops.setdefault(op_key(o), o)
        gate.ops = list(ops.values())
    if old.checks is not None or new.checks is not None:
        checks = {(c.pin, c.check): c for c in (old.checks or [])}
        for c in new.checks or []:
            key = (c.pin, c.check)
            checks[key] = _prefer_run(checks[key], c) if key in checks else c
        gate.checks = list(checks.values())
    return gate


def _merge_verify(files: list[ResultFile]) -> list[VerifyRun]:
    runs: dict[tuple, VerifyRun] = {}
    for result, path in models_of(files, VerifyResult):
        mk = result.machine_key
        for b in result.builds:
            key = (mk, b.build, result.gpu_class)  # one GPU may run the cells of two classes (two builds of one tree)
            if key not in runs:
                runs[key] = VerifyRun(result.machine, mk, replace(b, gates=list(b.gates), not_tested=list(b.not_tested)),
                                      [path], result.gpu_class, b.ok)
                continue
            run = runs[key]
            run.sources.append(path)
            gates = {g.name: g for g in run.build.gates}
            for g in b.gates:
                gates[g.name] = _merge_gate(gates[g.name], g) if g.name in gates else g
            run.build.gates = list(gates.values())
            run.build.not_tested += [item for item in b.not_tested if item not in run.build.not_tested]
            run.ok = run.ok and b.ok
    return list(runs.values())


Item = TypeVar("Item")


def _studies(files: list[ResultFile], cls: type[M], key: Callable[[M], tuple], items: Callable[[M], list[Item]],
             same: Callable[[Item], tuple]) -> list[tuple[M, list[Item], list[str]]]:
    """The `cls` results grouped by `key` (one study each): the first file's result, the items of every file of
    the group (an item another file already gave, by `same`, once) and the files' paths."""
    studies: dict[tuple, tuple[M, list[Item], list[str]]] = {}
    for d, path in models_of(files, cls):
        _, merged, sources = studies.setdefault(key(d), (d, [], []))
        sources.append(path)
        have = {same(item) for item in merged}
        merged += [item for item in items(d) if same(item) not in have]
    return list(studies.values())


def _merge_kld(files: list[ResultFile]) -> list[KldStudy]:
    return [KldStudy(d, runs, sources) for d, runs, sources in _studies(
        files, KldResult,
        lambda d: (d.model.name, d.text.sha256, d.ctx, d.chunks, d.reference.build, d.device_key, d.gpu_class),
        lambda d: d.runs, lambda r: (r.label, r.build, r.backend))]


def _merge_bench(files: list[ResultFile]) -> list[BenchStudy]:
    return [BenchStudy(d, rows, sources) for d, rows, sources in _studies(
        files, BenchResult,
        lambda d: (d.model.name, d.gpu.name if d.gpu else None, d.base.build, d.head.build, d.device_key,
                   d.gpu_class, d.aa_check),   # an A/A check of a cell is a study of its own, beside its bench
        lambda d: d.rows, lambda r: (r.test, canonical(r.params)))]
