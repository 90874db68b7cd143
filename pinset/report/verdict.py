"""What blocks shipping, what was not tested, and the headline numbers: pure functions of merged results.

The verdict names each blocker concretely (which pin, which build, which op or test) so the PR comment's
first line is actionable; everything that could not be checked is listed rather than silently passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pinset.build.settings import covers
from pinset.errors import PinsetError
from pinset.matrix.model import MatrixCell
from pinset.measures.bench_model import INSUFFICIENT_DATA, SLOWER, TOO_NOISY, BenchResult, BenchRow
from pinset.measures.bench_render import band_name
from pinset.measures.kld_model import KldResult
from pinset.nightly.model import PASSED_OVER, PickResult
from pinset.report.load import EVIDENCE_KINDS, kld_delta_text
from pinset.report.merge import BenchStudy, KldStudy, Merged, VerifyRun, models_of
from pinset.report.model import BLOCKED, NOT_ENOUGH, READY, Untested, grouped
from pinset.sim import evidence
from pinset.verify.model import (
    FAILED,
    GPU_GATES,
    NOT_RUN,
    PASSED,
    RAN,
    UNCHECKED,
    not_run_reason,
)

BACKEND_OP_GATES = ("backend-ops", "cpu-backend-ops")


@dataclass
class Verdict:
    blockers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)     # red but not blocking (optional pins)
    not_tested: list[Untested] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)      # evidence a pin's changes need that no result gives

    @property
    def outcome(self) -> str:
        return BLOCKED if self.blockers else NOT_ENOUGH if self.missing else READY

    @property
    def ok(self) -> bool:
        """Ready to ship: nothing failed and every pin has the evidence its changes need."""
        return self.outcome == READY

    def not_tested_lines(self) -> list[str]:
        return [item.text() for item in self.not_tested]

    def line(self) -> str:
        if self.blockers:
            return "**❌ blocked:** " + "; ".join(self.blockers)
        if self.missing:
            return "**⏳ not enough evidence:** " + "; ".join(self.missing) + " (see [Not tested](#not-tested))"
        text = "**✅ ready to ship:** no blockers, and every pin has the evidence its changes need"
        if self.not_tested:
            n = len(self.not_tested)
            text += f" ({n} thing{'s' if n != 1 else ''} not tested, see [Not tested](#not-tested))"
        return text


# --- labels ---------------------------------------------------------------------------------
def ran_on_gpu(run: VerifyRun) -> bool:
    """The machine has a GPU and a GPU gate actually ran (verify without --cuda on a GPU host does not count)."""
    return bool(run.gpu) and any(g.name in GPU_GATES and g.status != NOT_RUN for g in run.build.gates)


def gpu_verified(run: VerifyRun) -> bool:
    """Evidence for CUDA code: on a machine with a GPU, every GPU gate passed and test-backend-ops counted
    cases on a device backend (not the CPU)."""
    gates = {g.name: g for g in run.build.gates}
    ops = (gates["backend-ops"].ops or []) if "backend-ops" in gates else []
    return (bool(run.gpu) and all(n in gates and gates[n].status == PASSED for n in GPU_GATES)
            and any(o.backend != "CPU" and o.total > 0 for o in ops))


def verify_setup(run: VerifyRun) -> str:
    """What verify ran, on what: for the Summary."""
    if ran_on_gpu(run):
        assert run.gpu is not None
        return f"device: {run.gpu.name}, CPU and GPU gates"
    return "device: CPU, GPU gates not run"


def checks_where(run: VerifyRun) -> str:
    """Where the feature checks ran: verify's own `where` when it says, else by the GPU gates."""
    gate = next((g for g in run.build.gates if g.name == "feature-checks"), None)
    where = gate.where if gate else None
    return f"on {where}" if where in ("GPU", "CPU") else ("on GPU" if ran_on_gpu(run) else "on CPU")



def machine_labels(runs: list[VerifyRun]) -> dict[tuple, str]:
    """Short, unique names for machines: the GPU, with the host only where two share a GPU model, and the
    GPU's UUID only where two GPUs of one model share a host (two cells on one machine)."""
    base: dict[tuple, str] = {}
    for run in runs:
        base[run.machine_key] = run.gpu.name if run.gpu else "CPU only"
    for widen in (lambda key, label: f"{label} @{key[0]}",
                  lambda key, label: f"{label} {', '.join(u[:12] for u in key[2]) or 'GPU unknown'}"):
        counts: dict[str, int] = {}
        for label in base.values():
            counts[label] = counts.get(label, 0) + 1
        base = {key: (label if counts[label] == 1 else widen(key, label)) for key, label in base.items()}
    return base


def run_label(run: VerifyRun, labels: dict[tuple, str]) -> str:
    """"BUILD on GPU", with the matrix cell's GPU class when it has one ("BUILD [h200] on GPU")."""
    cls = f" [{run.gpu_class}]" if run.gpu_class else ""
    return f"{run.build.build}{cls} on {labels[run.machine_key]}"


def join_builds(builds: list[str]) -> str:
    return ", ".join(builds)


def row_label(row: BenchRow, rows: list[BenchRow]) -> str:
    """The test name, with the ubatch size when the same test appears more than once (-ub 512,2048)."""
    ub = row.params.get("n_ubatch")
    repeated = sum(r.test == row.test for r in rows) > 1
    return f"{row.test} ub {ub}" if repeated and ub else row.test


def ratio_text(row: BenchRow) -> str:
    if row.ratio is None or row.ci95 is None:
        return "no ratio (insufficient data)"
    lo, hi = row.ci95
    return f"{row.ratio:.3f}× (95% CI {lo:.3f}–{hi:.3f})"


# A pin that conflicts with upstream, by how the build stands to the pin's base (sim's base_relation):
# only a build that contains the base has moved on from it; an older one never carried what the pin needs.
UPSTREAM_CONFLICT = {
    "contains": "no longer applies (conflicts with upstream changes since its base)",
    "older": "does not apply to this older build (it predates the pin's base)",
    "diverged": "does not apply to this build (conflicts with upstream)",
    None: "does not apply to this build (conflicts with upstream)",
}


# --- verdict ----------------------------------------------------------------------------------
def judge(m: Merged) -> Verdict:
    v = Verdict()
    # verify's not-ok is its gates and stops, judged there whatever it finds
    explained = {"sim": _judge_sim(m, v), "verify": _judge_verify(m, v) or True, "kld": _judge_kld(m, v),
                 "pick": _judge_pick(m, v),
                 "blame": True}  # a blame explains why newer builds were passed over; it blocks nothing itself
    bench_explained = _judge_bench(m, v)   # per file: one file's noisy row never excuses another's not-ok
    for f in m.files:  # a producer said "not ok" but nothing above explains it: still block
        if not f.model.ok and not (explained.get(f.kind) or str(f.path) in bench_explained):
            v.blockers.append(f"{f.kind} reported not ok ({f.name})")
    v.not_tested = not_tested(m)
    v.missing = missing_evidence(m)
    return v


# --- evidence -------------------------------------------------------------------------------
# What each pin needs comes from pinset.sim.evidence (rules by the files it touches, or pins.yaml
# `evidence:`); this section only checks the results against it.
def cuda_pins(m: Merged) -> dict[tuple[str, str], str]:
    """(pin, build) -> why the pin needs evidence from a CUDA device on that build (GPU verify; KLD and bench
    on a device where it needs them): it is applied there and its rule asks for `gpu-verify`."""
    return {key: need.why() for key, need in evidence.needs_by_build(m.sim).items() if need.on_device}


def missing_evidence(m: Merged) -> list[str]:
    """What keeps a result without blockers from "ready": a result the pins' evidence rules ask for and no file
    gives, a simulated build nobody verified, and for a pin needing a GPU verify, that verify (and its KLD and
    bench, where it needs them) from a CUDA device."""
    return _results_missing(m) + _device_evidence_missing(m) + _union_evidence_missing(m) + _speed_evidence_missing(m)


def _union_evidence_missing(m: Merged) -> list[str]:
    """A pin applied by add/add unions pinset made itself (pins.yaml `unions:`) is a merge no one reviewed: never
    ready without a verify of that build whose CPU build passed, and, where the pin's files ask for a CUDA device
    (its evidence rule has gpu-verify), whose GPU gates passed on one."""
    needs = evidence.needs_by_build(m.sim)
    items: list[tuple[str, str]] = []
    for b in m.sim.builds if m.sim else []:
        runs = [run for run in m.verify if run.build.build == b.build]
        for p in b.pins:
            if not p.applied_by_union:
                continue
            places = ", ".join(f"{u.file}:{u.line}" for u in p.unions or [])
            built = [run for run in runs if any(g.name == "cpu-build" and g.status == PASSED for g in run.build.gates)]
            need = needs.get((p.id, b.build))
            if not built:
                items.append((f"`{p.id}` applies by unions no person wrote ({places}) but no verify built it "
                              "(CPU gate)", b.build))
            elif need is not None and need.on_device and not any(gpu_verified(run) for run in runs):
                items.append((f"`{p.id}` applies by unions no person wrote ({places}) in code for a CUDA device but "
                              "no verify passed its GPU gates", b.build))
    return _grouped(items)


def _results_missing(m: Merged) -> list[str]:
    """Kinds no file gives that the pins need, results that hold no build, simulated builds nobody verified."""
    out: list[str] = []
    wanted = evidence.wanted_kinds(m.sim)
    absent = [k for k in EVIDENCE_KINDS if k not in m.kinds() and (k in ("sim", "verify") or k in wanted)]
    if absent:
        out.append(f"no {', '.join(absent)} result")
    # a result that holds no build ran nothing: it is no evidence of anything
    out += [f"the {k} result holds no build" for k, empty in (("sim", m.sim and not m.sim.builds),
                                                               ("verify", "verify" in m.kinds() and not m.verify))
            if empty]
    verified = {run.build.build for run in m.verify}
    if m.sim and m.verify:
        out += [f"{b.build} simulated only (no verify result)" for b in m.sim.builds if b.build not in verified]
    return out


def _device_evidence_missing(m: Merged) -> list[str]:
    """For pins whose rule asks for a CUDA device: a GPU verify of each verified build, a KLD and a bench off
    the CPU."""
    out: list[str] = []
    verified = {run.build.build for run in m.verify}
    gpu_builds = {run.build.build for run in m.verify if gpu_verified(run)}
    items = [(f"`{pin}` {why} but no verify passed its GPU gates on a CUDA device", build)
             for (pin, build), why in cuda_pins(m).items() if build in verified and build not in gpu_builds]
    out += _grouped(items, style="()")
    all_needs = evidence.needs_by_build(m.sim)
    kld_pins = [p for (p, b), n in all_needs.items() if n.on_device and evidence.KLD in n.kinds]
    bench_pins = [p for (p, b), n in all_needs.items() if n.on_device and evidence.BENCH in n.kinds]
    if kld_pins and m.kld and not any(s.on_device for s in m.kld):
        out.append(f"KLD ran on the CPU only (device: CPU): no evidence for the CUDA code of {_pin_list(kld_pins)}")
    if bench_pins and m.bench and all(s.device == "CPU" for s in m.bench):
        out.append(f"bench ran on the CPU only (device: CPU): no evidence for the CUDA code of {_pin_list(bench_pins)}")
    return out


def _speed_evidence_missing(m: Merged) -> list[str]:
    """Benches that measured no speed of head: A/A checks only, rows (or whole benches) without enough data."""
    out: list[str] = []
    if m.bench and all(s.result.aa_check for s in m.bench):
        out.append("every bench is an A/A check (the base build against itself): head's speed was not measured")
    for study in m.bench:
        empty = [row_label(r, study.rows) for r in study.rows if r.verdict == INSUFFICIENT_DATA]
        if empty or not study.rows:
            what = ", ".join(empty) if empty else "every test"
            out.append(f"speed of {what} on {study.device} ({study.result.model.name}): {INSUFFICIENT_DATA}")
    return out


def _pin_list(pins: list[str]) -> str:
    return ", ".join(f"`{p}`" for p in dict.fromkeys(pins))


def _grouped(items: list[tuple[str, str]], style: str = "on") -> list[str]:
    """(message, build) pairs -> one message per distinct text, listing its builds in order
    ("TEXT on B1, B2" for blockers, "TEXT (B1, B2)" for the not-tested list)."""
    order: dict[str, list[str]] = {}
    for text, build in items:
        order.setdefault(text, [])
        if build not in order[text]:
            order[text].append(build)
    if style == "on":
        return [f"{text} on {join_builds(builds)}" for text, builds in order.items()]
    return [f"{text} ({join_builds(builds)})" for text, builds in order.items()]


def _judge_sim(m: Merged, v: Verdict) -> bool:
    if not m.sim:
        return False
    blocking: list[tuple[str, str]] = []
    optional: list[tuple[str, str]] = []
    for b in m.sim.builds:
        for p in b.pins:
            text = None
            if p.conflicts:
                with_ = p.conflict_with
                text = (f"`{p.id}` {UPSTREAM_CONFLICT[p.base_relation]}" if with_ in (None, "upstream")
                        else f"`{p.id}` conflicts with `{with_}`")
            elif p.errored:
                text = f"`{p.id}` could not be applied ({p.detail or 'error'})"
            elif p.contract_broken:
                first = p.contract.problems[0] if p.contract.problems else "contract broken"
                text = f"`{p.id}` contract broken ({first})"
            if text:
                (blocking if p.required else optional).append((text, b.build))
    v.blockers += _grouped(blocking)
    v.warnings += [f"optional pin {t}" for t in _grouped(optional)]
    _judge_prs(m.sim, v)
    return bool(blocking or optional)


def _judge_prs(sim, v: Verdict) -> None:
    """The PR pins' pull requests (sim's `prs`): one closed without merge ships code upstream declined, a
    blocker unless the pin is optional or left out (`skip-unless-open`); a pin behind its PR's head, force-pushed
    past, merged, or skipped is a note."""
    if sim is None or sim.prs is None:
        return
    for st in sim.prs.pins:
        text = f"`{st.pin}`: {st.short()} ({st.url})"
        if st.state == "closed" and st.required and not st.skipped:
            v.blockers.append(f"`{st.pin}`: its PR was closed without merge ({st.url}): upstream declined it "
                              "(drop the pin, make it optional, or give it `skip-unless-open: true`)")
        elif st.skipped or st.not_open or st.moved or st.review == "CHANGES_REQUESTED":
            v.warnings.append(text)
    if sim.prs.note:
        v.warnings.append(sim.prs.note)


def _judge_verify(m: Merged, v: Verdict) -> bool:
    labels = machine_labels(m.verify)
    unapplied = _unapplied_in_verify(m)
    red = [text for run in m.verify for text in _red_gates(run, run_label(run, labels))]
    stopped = _stopped(m, labels)
    v.blockers += unapplied + red + stopped
    return bool(unapplied or red or stopped)


def _unapplied_in_verify(m: Merged) -> list[str]:
    """Without a sim result for the build, verify's own pin status is the only word on it."""
    simulated = {b.build for b in m.sim.builds} if m.sim else set()
    return _grouped([(f"`{p.id}` did not apply ({p.status} in verify)", run.build.build)
                     for run in m.verify if run.build.build not in simulated
                     for p in run.build.pins if p.did_not_apply])


def _red_gates(run: VerifyRun, where: str) -> list[str]:
    """Failed gates, op counts and feature checks of one run. Counts are checked even under a gate that says
    "passed": a red cell never ships, and a count that ran nothing (0/0, a "passed" gate or check with no case)
    is no pass either."""
    out = []
    for gate in run.build.gates:
        bad_ops = [f"{o.op}{' /' + o.params + '/' if o.params else ''} {o.passed}/{o.total}"
                   for o in gate.ops or [] if o.passed != o.total or o.total <= 0]
        if gate.name in BACKEND_OP_GATES and gate.status == PASSED and not gate.ops:
            bad_ops.append("no op counted")
        bad_checks = [c for c in gate.checks or []
                      if c.status == FAILED or (c.status == PASSED and c.cases <= 0)]
        if gate.status != FAILED and not bad_ops and not bad_checks:
            continue
        if bad_ops:
            out.append(f"{gate.name} failed on {where}: {', '.join(bad_ops)}")
        for c in bad_checks:
            if c.status == PASSED:
                out.append(f"feature check `{c.pin}` {c.check} ran no case on {where}")
                continue
            out.append(f"feature check `{c.pin}` {c.check} failed on {where}" + (f": {c.detail}" if c.detail else ""))
        if not bad_ops and not bad_checks:
            out.append(f"{gate.name} failed on {where}" + (f": {gate.detail}" if gate.detail else ""))
    return out


def _stopped(m: Merged, labels: dict[tuple, str]) -> list[str]:
    """Runs not ok without a failed gate: gates were stopped (unless another machine ran them)."""
    items = []
    for run in m.verify:
        if run.ok or any(g.status == FAILED for g in run.build.gates):
            continue
        build = run.build.build
        ran_elsewhere = {g.name for other in m.verify if other.build.build == build
                         for g in other.build.gates if g.status == PASSED}
        stopped = [g for g in run.build.gates if g.stopped and g.name not in ran_elsewhere]
        if stopped or not ran_elsewhere:
            reasons = "; ".join(dict.fromkeys(g.detail for g in stopped if g.detail))
            names = ", ".join(g.name for g in stopped) or "no gate passed"
            items.append((f"verify stopped on {labels[run.machine_key]} ({names})"
                          + (f": {reasons}" if reasons else ""), build))
    return _grouped(items)


def pick_passed_over(pick: PickResult) -> list[str]:
    """"BUILD: why" for each build pick tried and passed over, newest first."""
    return [f"{b.build}: " + ("; ".join(r.summary() for r in b.reasons) or b.verdict)
            for b in pick.builds if b.verdict in PASSED_OVER]


def _judge_pick(m: Merged, v: Verdict) -> bool:
    """No green base (picked null) blocks: there is nothing to ship the pin set on."""
    if not m.pick or m.pick.picked is not None:
        return False
    why = pick_passed_over(m.pick)
    v.blockers.append("no green base: pinset pick found no build on which every required pin is fine"
                      + (f" ({'; '.join(why)})" if why else " (no build to consider)"))
    return True


def _judge_kld(m: Merged, v: Verdict) -> bool:
    blocked = False
    for study in m.kld:
        model = study.result.model.name
        for r in study.runs:
            if not r.ok:
                blocked = True
                v.blockers.append(f"KLD run {r.label} ({r.build}, {r.backend}) on {model} failed"
                                  + (f": {r.detail}" if r.detail else ""))
        if study.result.further:
            blocked = True
            verdict = study.result.verdict
            v.blockers.append(f"KLD on {model}: head {verdict.text} ({kld_delta_text(verdict)})")
    return blocked


def _judge_bench(m: Merged, v: Verdict) -> set[str]:
    """Slower rows and failed llama-bench runs (a run without a usable speed included) block; rows too noisy to
    call, or without enough data, explain a bench's not-ok too (listed under Not tested, resp. as missing
    evidence). Returns the bench files whose not-ok is explained, each by its own runs and rows: one file's
    noisy row never excuses another file's not-ok."""
    explained: set[str] = set()
    for study in m.bench:
        gpu = study.device
        failed = []
        for result, path in models_of(m.files, BenchResult):
            if path not in study.sources:
                continue
            runs = result.failed_runs()
            failed += runs
            if runs or not result.rows or any(r.verdict in (SLOWER, TOO_NOISY, INSUFFICIENT_DATA) for r in result.rows):
                explained.add(path)
        if failed:
            v.blockers.append(f"llama-bench failed on {gpu} ({study.result.model.name}): {failed[0]}"
                              + (f" (and {len(failed) - 1} more failed runs)" if len(failed) > 1 else ""))
        for row in study.rows:
            if row.verdict == SLOWER:
                v.blockers.append(f"{row_label(row, study.rows)} slower on {gpu}: {ratio_text(row)}")
    return explained


# --- expected cells -----------------------------------------------------------------------
def unfilled_cells(m: Merged, cells: list[MatrixCell]) -> list[Untested]:
    """One line per cell of a `pinset matrix` without, per kind it runs, a result of its build made as its GPU
    class (--gpu-class) on a GPU: a cell that failed before writing its JSON, was cancelled or never started
    (a report without these lines would simply not show it, and the columns that did arrive would look like the
    whole matrix), and a file that claims the cell but ran on the CPU or on a GPU of other architectures (no
    evidence from the GPU class the cell stands for)."""
    out = []
    for cell in cells:
        if m.pinset and cell.pinset_digest and cell.pinset_digest != m.pinset:
            raise PinsetError(f"expected cell {cell.cell} is of pin set {cell.pinset_digest}, the results are of "
                              f"{m.pinset} (a matrix of another run)")
        gone, off_gpu = [], []
        for kind in cell.kinds:
            whys = _cell_results(m, kind, cell.build, cell.gpu, cell.architectures)
            if not whys:
                gone.append(kind)
            elif all(whys):
                off_gpu.append(f"{kind} {whys[0]}")
        if gone:
            out.append(Untested(f"cell {cell.cell}", f"no {', '.join(gone)} result (the cell failed before "
                                "writing it, was cancelled or never ran; see its job log)"))
        if off_gpu:
            out.append(Untested(f"cell {cell.cell}", f"no result from a GPU of the class ({'; '.join(off_gpu)})"))
    return out


def _cell_results(m: Merged, kind: str, build: str, gpu_class: str, architectures: str | None) -> list[str | None]:
    """Per result of `kind` made as this cell: None when it ran on a GPU (of the class's architectures, where
    both are known), else why it is no evidence from the cell's GPU."""
    if kind == "verify":
        return [_verify_off_gpu(r, architectures) for r in m.verify
                if r.build.build == build and r.gpu_class == gpu_class]
    if kind == "kld":
        klds = [d for d, _ in models_of(m.files, KldResult) if d.gpu_class == gpu_class
                and any(r.label == "head" and r.build == build for r in d.runs)]
        return [None if KldStudy(d, d.runs).on_device else "ran on the CPU" for d in klds]
    benches = [d for d, _ in models_of(m.files, BenchResult) if d.gpu_class == gpu_class
               and build in (d.base.build, d.head.build)]
    return [None if BenchStudy(d, d.rows).device != "CPU" else "ran on the CPU" for d in benches]


def _verify_off_gpu(run: VerifyRun, architectures: str | None) -> str | None:
    gpu = run.gpu
    if not gpu:
        return "ran on a machine without a GPU"
    if not ran_on_gpu(run):
        return "ran no GPU gate"
    cc = str(gpu.compute_capability or "").replace(".", "")
    if architectures and cc and not covers(architectures, [cc]):
        return f"ran on {gpu.name}, compute capability {gpu.compute_capability}, outside architectures {architectures}"
    return None


# --- not tested -------------------------------------------------------------------------------
def not_tested(m: Merged) -> list[Untested]:
    """Everything the results do not show, by concern; rendered to text by Untested.text()."""
    return (_kinds_not_given(m) + _builds_not_verified(m) + grouped(_gates_not_run(m)) + grouped(_verify_items(m))
            + _hardware_not_covered(m) + _speeds_not_called(m))


def _kinds_not_given(m: Merged) -> list[Untested]:
    """A kind of result no file gives (KLD and speed: said so when no pin's evidence rule asks for one)."""
    kinds = m.kinds()
    wanted = evidence.wanted_kinds(m.sim)   # a kind no pin's rule asks for is said so (sim/evidence.py)
    unasked = "; no pin's evidence rule asks for one"
    out = [Untested("Pin set", "not simulated (no sim result)")] if "sim" not in kinds else []
    out += [Untested("Correctness", "not tested (no verify result)")] if "verify" not in kinds else []
    out += [Untested("KLD vs CPU reference", f"not measured (no kld result{'' if 'kld' in wanted else unasked})")
            ] if "kld" not in kinds else []
    out += [Untested("Speed", f"not measured (no bench result{'' if 'bench' in wanted else unasked})")
            ] if "bench" not in kinds else []
    return out


def _builds_not_verified(m: Merged) -> list[Untested]:
    """A picked base or simulated build no verify covers, and builds verified on the CPU only."""
    out = []
    verified_builds = {run.build.build for run in m.verify}
    if m.pick and m.pick.picked and not m.pick.verified and m.pick.picked not in verified_builds:
        out.append(Untested(f"Base {m.pick.picked}", "picked by simulation only (pinset pick without --verify, "
                                                     "and no verify result for it)"))
    if m.sim and m.verify:
        out += [Untested(b.build, "simulated only (no verify result for this build)")
                for b in m.sim.builds if b.build not in verified_builds]
    gpu_builds = {run.build.build for run in m.verify if ran_on_gpu(run)}
    out += [Untested(build, "no GPU run (verified on CPU only)") for build in sorted(verified_builds - gpu_builds)]
    return out


def _gates_not_run(m: Merged) -> list[Untested]:
    """Gates no machine ran for a build, with the reasons given."""
    ran: set[tuple[str, str]] = set()
    reasons: dict[tuple[str, str], list[str]] = {}
    for run in m.verify:
        for g in run.build.gates:
            key = (run.build.build, g.name)
            if g.status != NOT_RUN:
                ran.add(key)
            elif (why := not_run_reason(g.detail)) and why not in reasons.setdefault(key, []):
                reasons[key].append(why)   # the item says "not run" once
            else:
                reasons.setdefault(key, [])
    return [Untested(f"gate `{gate}` not run", "; ".join(why), (build,))
            for (build, gate), why in reasons.items() if (build, gate) not in ran]


def _verify_items(m: Merged) -> list[Untested]:
    """verify's own not-tested items (per machine) and feature checks unchecked or not run (per build, unless
    another machine ran them)."""
    labels = machine_labels(m.verify)
    run_checks = {(run.build.build, c.pin, c.check) for run in m.verify for g in run.build.gates
                  for c in g.checks or [] if c.status in RAN}
    out: list[Untested] = []
    for run in m.verify:
        where = run_label(run, labels)
        out += [Untested(item.what, item.why, (where,)) for item in run.build.not_tested]
        for c in (c for g in run.build.gates for c in g.checks or []):
            if c.status == UNCHECKED:
                out.append(Untested(f"`{c.pin}` has no feature check", c.detail or "", (run.build.build,)))
            elif c.status == NOT_RUN and (run.build.build, c.pin, c.check) not in run_checks:
                out.append(Untested(f"feature check `{c.pin}` {c.check} not run", c.detail or "", (run.build.build,)))
    return out


def _hardware_not_covered(m: Merged) -> list[Untested]:
    """Hardware coverage: the GPUs, backends and CUDA architectures the results do not show."""
    out = []
    gpus = [run.gpu for run in m.verify if run.gpu and ran_on_gpu(run)]
    names = [g.name for g in gpus] + [s.device for s in m.bench if s.result.gpu]
    if m.verify and not gpus:
        out.append(Untested("GPU", "no result (no verify ran its GPU gates)"))
    if names:
        if not any(_is_amd(n) for n in names):
            out.append(Untested("AMD/ROCm", "no result"))
        if all(n.upper().startswith("NVIDIA") for n in names):
            out.append(Untested("Vulkan, Metal, SYCL backends", "no result"))
    ccs = sorted({g.compute_capability for g in gpus if g.compute_capability is not None})
    if ccs:
        archs = sorted({run.build.cuda_architectures for run in m.verify
                        if ran_on_gpu(run) and run.build.cuda_architectures})
        built = f" (built for CMAKE_CUDA_ARCHITECTURES={', '.join(archs)})" if archs else ""
        out.append(Untested(f"CUDA architectures other than {', '.join(ccs)}", f"no result{built}"))
    return out


def _speeds_not_called(m: Merged) -> list[Untested]:
    """Bench rows too noisy to call or without enough data."""
    out = []
    for study in m.bench:
        band = band_name(study.result)
        for row in study.rows:
            if row.verdict in (TOO_NOISY, INSUFFICIENT_DATA):
                spread = f", {band} ±{row.aa_spread:.1%}" if row.aa_spread is not None else ""
                ub = row.params.get("n_ubatch")
                where = f"{study.result.model.name}, {study.device}" + (f", ub {ub}" if ub else "")
                out.append(Untested(f"Speed of {row.test} ({where})", f"{row.verdict}{spread}"))
    return out


def _is_amd(name: str) -> bool:
    upper = name.upper()
    return "AMD" in upper or "RADEON" in upper or "INSTINCT" in upper


# --- headline ---------------------------------------------------------------------------------
def backend_op_totals(run: VerifyRun, gates=BACKEND_OP_GATES) -> tuple[int, int, int]:
    """(passed, total, number of ops) over the backend-op gates of one run."""
    passed = total = 0
    ops = set()
    for g in run.build.gates:
        if g.name in gates and g.status != NOT_RUN:
            for o in g.ops or []:
                passed += o.passed
                total += o.total
                ops.add(o.op)
    return passed, total, len(ops)


def check_totals(run: VerifyRun) -> tuple[int, int]:
    """(passed, run) feature checks of one run; not-run and unchecked ones are not counted as run."""
    passed = ran = 0
    for g in run.build.gates:
        if g.name == "feature-checks":
            for c in g.checks or []:
                if c.status in RAN:
                    ran += 1
                    passed += c.status == PASSED
    return passed, ran
