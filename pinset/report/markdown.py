"""The PR comment: merged results -> GitHub-flavoured markdown, byte-for-byte deterministic.

Nothing here reads the clock, the environment or file paths: the same results give the same bytes,
so a re-run that changes nothing does not re-post a comment, and golden files can pin the format.
"""

from __future__ import annotations

from pinset.cells import device_text
from pinset.markdown_table import table
from pinset.measures.bench_model import FASTER, INSUFFICIENT_DATA, NO_CHANGE, SLOWER, TOO_NOISY, ExclusionKind
from pinset.measures.bench_render import band_name, row_speeds, speed_stat
from pinset.measures.perplexity import ValueErr
from pinset.nightly.markdown import blame_markdown, pick_markdown
from pinset.nightly.model import PickResult
from pinset.report.load import kld_delta_text
from pinset.report.merge import Merged, VerifyRun, op_key
from pinset.report.verdict import (
    BACKEND_OP_GATES,
    Verdict,
    backend_op_totals,
    check_totals,
    checks_where,
    cuda_pins,
    machine_labels,
    pick_passed_over,
    row_label,
    run_label,
    verify_setup,
)
from pinset.result_parts import MachineRecord
from pinset.sim.evidence import evidence_lines
from pinset.sim.markdown import cell as sim_cell, sim_markdown
from pinset.sim.model import BuildResult, PinResult, SimResult
from pinset.verify.model import FAILED, NOT_RUN, PASSED, RAN, UNCHECKED, GateResult

GATE_ICON = {PASSED: "✅", FAILED: "❌", NOT_RUN: "⏭️", UNCHECKED: "➖"}
VERDICT_ICON = {FASTER: "🚀", SLOWER: "🐢", NO_CHANGE: "🟰", TOO_NOISY: "〰️", INSUFFICIENT_DATA: "❔"}


def marker(digest: str) -> str:
    """Hidden line that finds this pin set's comment again when updating it."""
    return f"<!-- pinset:{digest} -->"


def render(m: Merged, verdict: Verdict, pins_info: dict[str, dict] | None = None,
           description: str | None = None) -> str:
    """pins_info: pin id -> {"description", "required", "unchecked"} from pins.yaml, when given."""
    labels = machine_labels(m.verify)
    out: list[str] = []
    if m.pinset:
        out += [marker(m.pinset)]
    out += [f"## pinset report{f' — pin set `{m.pinset}`' if m.pinset else ''}", "", verdict.line(), ""]
    out += _summary(m, verdict, labels, pins_info or {}, description)
    out += _correctness(m, labels)
    out += _speed(m)
    out += _pinset(m)
    out += _base_and_blame(m)
    out += ["### Not tested", ""]
    # blocked: the verdict line names the blockers only, so the missing evidence is listed here
    not_tested = verdict.not_tested_lines()
    missing = [f"Not enough evidence: {item}" for item in verdict.missing
               if item not in not_tested] if verdict.blockers else []
    out += [f"- {item}" for item in missing + not_tested] or ["Everything the pin set declares was tested."]
    out += [""]
    out += _provenance(m, labels)
    return "\n".join(out).rstrip("\n") + "\n"


# --- summary ----------------------------------------------------------------------------------
def _pin_ids(m: Merged) -> list[tuple[str, bool | None]]:
    ids: dict[str, bool | None] = {}
    if m.sim:
        for b in m.sim.builds:
            for p in b.pins:
                ids.setdefault(p.id, p.required)
    for run in m.verify:
        for vp in run.build.pins:
            ids.setdefault(vp.id, None)
    return list(ids.items())


def _summary(m: Merged, verdict: Verdict, labels, pins_info, description) -> list[str]:
    pins = _pin_ids(m)
    out = ["### Summary", "", *_overview(m, pins, pins_info, description)]
    out += [f"- {h}" for h in _headlines(m, pins, labels)]
    out += [f"- ⚠️ {w}" for w in verdict.warnings]
    return out + [""]


def _overview(m: Merged, pins: list[tuple[str, bool | None]], pins_info, description) -> list[str]:
    """How many pins on which builds, and the pins (described from pins.yaml when given)."""
    builds = list(m.sim.builds) if m.sim else []
    build_names = [b.build for b in builds] or sorted({r.build.build for r in m.verify})
    what = description or "This pin set"
    out = [f"{what.rstrip('.')}: {len(pins)} pin{'s' if len(pins) != 1 else ''} on "
           f"{len(build_names)} build{'s' if len(build_names) != 1 else ''} "
           f"({', '.join(build_names) if build_names else 'none reported'}).", ""]
    if pins and any(pins_info.get(pid, {}).get("description") for pid, _ in pins):
        rows = []
        for pin_id, required in pins:
            info = pins_info.get(pin_id, {})
            req = info.get("required", required)
            rows.append([f"`{pin_id}`" + (" (optional)" if req is False else ""), info.get("description") or "—"])
        out += table(["pin", "what it does"], rows) + [""]
    elif pins:
        out += ["Pins: " + ", ".join(f"`{pid}`" + (" (optional)" if req is False else "") for pid, req in pins)
                + " (pass `-c pins.yaml` for their descriptions).", ""]
    return out


def _headlines(m: Merged, pins: list[tuple[str, bool | None]], labels) -> list[str]:
    """One line per result: base, blame, pin set, correctness per run, KLD and speed per study."""
    head: list[str] = []
    if m.pick:
        head.append(base_line(m.pick))
    for blame in m.blame:
        broke = [f"`{p.id}` {p.summary()}" for p in blame.pins if p.first_bad]
        head.append(f"**Blame {blame.good.build} → {blame.bad.build}:** "
                    + ("; ".join(broke) if broke else "no pin broke or landed upstream") + ".")
    if m.sim:
        head.append(_sim_headline(m.sim, m, pins))
    head += [_verify_headline(run, labels) for run in m.verify]
    cpu_note = " — CPU against CPU: no evidence for a CUDA path" if cuda_pins(m) else ""
    for study in m.kld:
        v, device = study.result.verdict, study.device
        head.append(f"**KLD vs CPU ({study.result.model.name}; device: {device}{cpu_note if 'CPU' in device.split(', ') else ''}):** "
                    + (f"head {v.text} ({kld_delta_text(v)})." if v.head_minus_base_kld is not None
                       else f"{v.text}."))
    for bench in m.bench:
        device = bench.device
        calls = [f"{row_label(r, bench.rows)} " + (f"{r.ratio:.3f}× " if r.ratio is not None else "")
                 + f"({r.verdict})" for r in bench.rows] or ["no result (every run failed)"]
        head.append(f"**Speed ({bench.result.model.name}; device: {device}"
                    f"{'; A/A check: base against itself' if bench.result.aa_check else ''}"
                    f"{' — no evidence for a CUDA path' if device == 'CPU' and cpu_note else ''}):** "
                    f"head/base {', '.join(calls)}.")
    return head


def _sim_headline(sim: SimResult, m: Merged, pins: list[tuple[str, bool | None]]) -> str:
    n_builds = len(sim.builds)
    everywhere = [pid for pid, _ in pins if all(_applies(b, pid) for b in sim.builds)]
    retire = _retire_everywhere(m)
    on = "the build" if n_builds == 1 else "both builds" if n_builds == 2 else f"all {n_builds} builds"
    text = f"{len(everywhere)} of {len(pins)} pins apply cleanly on {on}"
    if retire:
        text += f"; {len(retire)} already upstream everywhere (retire: {', '.join(f'`{r}`' for r in retire)})"
    return f"**Pin set:** {text}."


def _verify_headline(run: VerifyRun, labels) -> str:
    passed, total, n_ops = backend_op_totals(run)
    parts = []
    if total:
        parts.append(f"test-backend-ops {passed}/{total} cases passed ({n_ops} op{'s' if n_ops != 1 else ''})")
    cp, cr = check_totals(run)
    if cr:
        parts.append(f"feature checks {cp}/{cr} {checks_where(run)}")
    gates = [g for g in run.build.gates if g.status != NOT_RUN]
    green = sum(g.status == PASSED for g in gates)
    parts.append(f"{green}/{len(gates)} gates passed")
    return f"**Correctness on {run_label(run, labels)}** ({verify_setup(run)}): {', '.join(parts)}."


def _sim_pin(build: BuildResult, pin_id: str) -> PinResult | None:
    return next((p for p in build.pins if p.id == pin_id), None)


def _applies(build: BuildResult, pin_id: str) -> bool:
    """The pin applied (or is upstream) on the build with its contract kept (PinResult.ok)."""
    pin = _sim_pin(build, pin_id)
    return bool(pin and pin.ok)


def _retires(build: BuildResult, pin_id: str) -> bool:
    pin = _sim_pin(build, pin_id)
    return bool(pin and pin.retire)


def _retire_everywhere(m: Merged) -> list[str]:
    if not m.sim or not m.sim.builds:
        return []
    first = m.sim.builds[0].pins
    return [p.id for p in first if all(_retires(b, p.id) for b in m.sim.builds)]


# --- correctness ------------------------------------------------------------------------------
def _correctness(m: Merged, labels) -> list[str]:
    out = ["### Correctness", ""]
    runs = m.verify
    if not runs:
        out += ["_No verify result._", ""]
    else:
        cols = [run_label(r, labels) for r in runs]
        gate_names = _ordered(g.name for r in runs for g in r.build.gates)
        rows = []
        for name in gate_names:
            row = [f"`{name}`"]
            for r in runs:
                g = next((g for g in r.build.gates if g.name == name), None)
                row.append(_gate_cell(g))
            rows.append(row)
        out += ["**Gates**", ""] + table(["gate", *cols], rows) + [""]
        out += _backend_ops(runs, cols)
        out += _feature_checks(runs, cols)
    out += _kld(m)
    return out


def _ordered(items) -> list:
    return list(dict.fromkeys(items))


def _gate_cell(g: GateResult | None) -> str:
    if g is None:
        return "—"
    text = f"{GATE_ICON[g.status]} {g.status}"
    if g.status != NOT_RUN:
        text += f" ({g.seconds:.0f} s)"
    return text


def _with(runs, cols, has):
    """The runs (and their column names) that have at least one gate for which has(gate) holds."""
    keep = [(r, c) for r, c in zip(runs, cols) if any(has(g) for g in r.build.gates)]
    return [r for r, _ in keep], [c for _, c in keep]


def _backend_ops(runs: list[VerifyRun], cols: list[str]) -> list[str]:
    keys = _ordered((g.name, *op_key(o)) for r in runs for g in r.build.gates
                    if g.name in BACKEND_OP_GATES for o in g.ops or [])
    if not keys:
        return []
    runs, cols = _with(runs, cols, lambda g: g.name in BACKEND_OP_GATES and g.ops)
    rows, failures = [], []
    for key in sorted(keys, key=lambda k: (BACKEND_OP_GATES.index(k[0]), *k[1:])):
        gate, op, backend, params = key
        row = [f"`{op}`" + (f" `/{params}/`" if params else ""), backend]
        for r, col in zip(runs, cols):
            o = next((o for g in r.build.gates if g.name == gate for o in g.ops or []
                      if op_key(o) == (op, backend, params)), None)
            if o is None:
                row.append("—")
                continue
            icon = "✅" if o.passed == o.total else "❌"
            text = f"{icon} {o.passed}/{o.total}"
            if o.not_supported:
                text += f" ({o.not_supported} not supported)"
            row.append(text)
            for case in o.failures[:5]:
                failures.append(f"- {op} on {col}: `{case}`")
            if len(o.failures) > 5:
                failures.append(f"- {op} on {col}: … and {len(o.failures) - 5} more failing cases")
        rows.append(row)
    out = ["**test-backend-ops** (cases passed per op, `/filter/` where one was used)", ""]
    out += table(["op", "backend", *cols], rows) + [""]
    if failures:
        out += ["Failing cases:", "", *failures, ""]
    return out


def _feature_checks(runs: list[VerifyRun], cols: list[str]) -> list[str]:
    keys = _ordered((c.pin, c.check) for r in runs for g in r.build.gates
                    if g.name == "feature-checks" for c in g.checks or [])
    if not keys:
        return []
    runs, cols = _with(runs, cols, lambda g: g.name == "feature-checks" and g.checks)
    lines = []
    for r, col in zip(runs, cols):
        passed, ran = check_totals(r)
        if ran:
            lines.append(f"- {col}: {passed}/{ran} {checks_where(r)}")
    rows = []
    for pin, check in keys:
        row = [f"`{pin}`", check]
        for r in runs:
            c = next((c for g in r.build.gates if g.name == "feature-checks" for c in g.checks or []
                      if c.pin == pin and c.check == check), None)
            if c is None:
                row.append("—")
            elif c.status in RAN:
                row.append(f"{GATE_ICON[c.status]} {c.status} ({c.cases} case{'s' if c.cases != 1 else ''})")
            else:
                row.append(f"{GATE_ICON[c.status]} {c.status}")
        rows.append(row)
    return ["**Feature checks**", "", *lines, ""] + table(["pin", "check", *cols], rows) + [""]


def _kld(m: Merged) -> list[str]:
    out = []
    for study in m.kld:
        d = study.result
        ref = d.reference
        out += [f"**KLD vs CPU reference** — {d.model.name}, ctx {d.ctx}, {d.chunks} chunks; "
                f"reference: {ref.backend} on {ref.build} (`{ref.commit[:9]}`)"
                + (", cached logits" if ref.cached else "") + _ran_on(d.device_key, d.gpu_class), ""]
        rows = []
        for r in study.runs:
            k = r.kld
            rows.append([r.label, f"{r.build} (`{r.commit[:9]}`)", r.backend, _pm(r.ppl, ".4f"),
                         _pm(k.mean_err if k else None, ".6f"),
                         *(_num(x, ".6f") for x in ((k.median, k.p99, k.p99_9, k.max) if k else (None,) * 4)),
                         _pm(r.same_top_p, ".3f", " %"), _pm(r.rms_dp, ".3f", " %"),
                         "✅" if r.ok else f"❌ {r.detail or ''}".rstrip()])
        out += table(["run", "build", "backend", "PPL", "mean KLD", "median", "p99", "p99.9", "max",
                      "same top p", "RMS Δp", "ok"], rows) + [""]
        v = d.verdict
        out += [f"Verdict: head {v.text} ({kld_delta_text(v)})." if v.head_minus_base_kld is not None
                else f"Verdict: {v.text}.", ""]
    return out


def _ran_on(key: tuple, cls: str | None) -> str:
    """"; ran on HOST, GPU UUID (cell h200)" for a kld/bench that recorded where it ran, else nothing."""
    if not key:
        return ""
    return f"; ran on {device_text(key)}" + (f" (cell of GPU class {cls})" if cls else "")


def _num(x, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def _pm(stat: ValueErr | None, spec: str, unit: str = "") -> str:
    """value ± err of a statistic, "—" where it was not measured."""
    return "—" if not stat else f"{stat.value:{spec}} ± {stat.err:{spec}}{unit}"


# --- speed ------------------------------------------------------------------------------------
def _tps(value: float | None, values: list[float]) -> str:
    if value is None:
        return "—"
    return f"**{value:.2f}** ({', '.join(f'{x:.2f}' for x in values)})"


def _speed(m: Merged) -> list[str]:
    out = ["### Speed", ""]
    if not m.bench:
        return out + ["_Not measured (no bench result)._", ""]
    for study in m.bench:
        d = study.result
        warm = d.warmup_rounds
        out += [f"**{d.model.name}, device: {study.device}** — base {d.base.build} "
                f"(`{d.base.commit[:9]}`) vs head {d.head.build} (`{d.head.commit[:9]}`); "
                f"{d.rounds} rounds × {d.repetitions} repetitions, alternating order, {warm} warm-up "
                f"round{'s' if warm != 1 else ''} discarded{_ran_on(d.device_key, d.gpu_class)}. t/s: {speed_stat(d)}; "
                "in brackets each kept round's.", ""]
        rows = []
        for r in study.rows:
            p = "—" if r.p_value is None else f"{r.p_value:.3g}"
            aa = "—" if r.aa_spread is None else f"±{r.aa_spread:.2%}"  # bench JSON: a fraction
            ci = "—" if r.ci95 is None else f"{r.ci95[0]:.3f}–{r.ci95[1]:.3f}"
            base, head = row_speeds(r)
            rows.append([row_label(r, study.rows), _tps(base, r.base_tps), _tps(head, r.head_tps),
                         "—" if r.ratio is None else f"{r.ratio:.3f}×", ci, p, aa,
                         f"{VERDICT_ICON.get(r.verdict, '')} {r.verdict}"])
        out += table(["test", "base t/s", "head t/s", "head/base", "95% CI", "p", band_name(d), "verdict"], rows)
        out += [""]
        noisy = [f"- {row_label(r, study.rows)}: {e}" for r in study.rows for e in r.excluded
                 if e.kind == ExclusionKind.NOISE]
        dropped = [f"- {row_label(r, study.rows)}: {e}" for r in study.rows for e in r.excluded
                   if e.kind == ExclusionKind.FAILED]
        out += ["Excluded as noisy:", "", *noisy, ""] if noisy else ["Nothing was excluded as noisy.", ""]
        if dropped:
            out += ["Rounds without a result (not used):", "", *dropped, ""]
    return out


# --- pin set ----------------------------------------------------------------------------------
def _pinset(m: Merged) -> list[str]:
    out = ["### Pin set", ""]
    if not m.sim:
        return out + ["_Not simulated (no sim result)._", ""]
    out += sim_markdown(m.sim).rstrip("\n").split("\n") + [""]
    out += evidence_lines(m.sim)   # which evidence rule applied to each pin (sim/evidence.py)
    conflicts = []
    for b in m.sim.builds:
        for p in b.pins:
            if p.did_not_apply:
                files = ", ".join(f"`{f}`" for f in p.files) or "—"
                cause = f" — {p.detail}" if p.detail else ""
                conflicts.append(f"- **{b.build}** `{p.id}`: {sim_cell(p)} in {files}{cause}")
    if conflicts:
        out += ["Conflicts and errors (cause):", "", *conflicts, ""]
    out += refresh_lines(m.sim)
    retire = []
    for pin_id in _ordered(p.id for b in m.sim.builds for p in b.pins):
        up = [b.build for b in m.sim.builds if _retires(b, pin_id)]
        if not up:
            continue
        still = [b.build for b in m.sim.builds if b.build not in up]
        text = f"- `{pin_id}`: already upstream on {', '.join(up)}"
        text += f"; still needed on {', '.join(still)}" if still else "; retire it"
        retire.append(text)
    out += ["Pins to retire:", "", *retire, ""] if retire else ["No pin is upstream yet.", ""]
    return out


def refresh_lines(sim: SimResult) -> list[str]:
    """One line per pin that applies but not exactly (offset, 3-way): it needs a `pinset refresh`."""
    lines = []
    for pin_id in _ordered(p.id for b in sim.builds for p in b.pins):
        loose = [f"{b.build} ({p.apply_mode})" for b in sim.builds for p in b.pins
                 if p.id == pin_id and p.needs_refresh]
        if loose:
            lines.append(f"- `{pin_id}` needs a refresh: applies but not exactly on {', '.join(loose)} "
                         f"(`pinset refresh {pin_id} --onto BUILD`)")
    return [*lines, ""] if lines else []


# --- base and blame -------------------------------------------------------------------------------
def base_line(pick: PickResult) -> str:
    """The Summary's base: which build pick chose and why each newer one was passed over."""
    skipped = [text.replace(": ", " skipped: ", 1) for text in pick_passed_over(pick)]
    if pick.picked is None:
        return "**Base:** no build is green" + (f" ({'; '.join(skipped)})" if skipped else "") + "."
    confirmed = " (confirmed by pinset verify)" if pick.verified else ""
    return f"**Base:** picked {pick.picked}{confirmed}" + "".join(f"; {s}" for s in skipped) + "."


def _base_and_blame(m: Merged) -> list[str]:
    if not m.pick and not m.blame:
        return []
    out = ["### Base and blame", ""]
    if m.pick:
        out += pick_markdown(m.pick).splitlines()[2:] + [""]
    for b in m.blame:
        out += blame_markdown(b).splitlines() + [""]
    return out


# --- provenance -------------------------------------------------------------------------------
def _provenance(m: Merged, labels) -> list[str]:
    out = ["<details><summary>Provenance</summary>", ""]
    out += table(["build", "commit"], [[b, f"`{c}`"] for b, c in sorted(m.commits.items())]) + [""]
    if m.verify:
        out += _machines(m.verify, labels) + _builds_verified(m.verify, labels)
    for kld in m.kld:
        k = kld.result
        out += [f"KLD: model `{k.model.name}` ({k.model.size_bytes} bytes), text sha256 "
                f"`{k.text.sha256[:16]}`, ctx {k.ctx}, {k.chunks} chunks.", ""]
    for bench in m.bench:
        d = bench.result
        gpu = f"{d.gpu.name}, driver {d.gpu.driver}" if d.gpu else "no GPU"
        clocks = d.gpu_clocks_mhz
        clock = "" if not clocks else f"; GPU clock {clocks[0]} MHz" if len(clocks) == 1 \
            else f"; GPU clock {clocks[0]}–{clocks[-1]} MHz"
        out += [f"Bench: model `{d.model.name}` on {gpu}; llama-bench "
                + " ".join(f"`{a}`" for a in d.llama_bench_args)
                + f"; round orders {' '.join(d.round_orders)}{clock}.", ""]
    out += ["Inputs:", ""]
    out += [f"- `{f.name}` ({f.kind}, sha256 `{f.sha256[:12]}`)" for f in m.files]
    out += ["", "</details>"]
    return out


def _machines(runs: list[VerifyRun], labels) -> list[str]:
    machines: dict[tuple, MachineRecord] = {}
    for r in runs:
        machines.setdefault(r.machine_key, r.machine)
    rows = []
    for key, mach in machines.items():
        gpu = mach.gpu
        rows.append([labels[key], mach.hostname, gpu.name if gpu else "—", gpu.compute_capability if gpu else "—",
                     f"{gpu.memory_mib} MiB" if gpu else "—", gpu.driver if gpu else "—",
                     mach.cuda_version or "—", mach.compiler or "—", mach.cmake or "—"])
    return ["Machines:", "", *table(["machine", "host", "GPU", "compute capability", "memory", "driver", "CUDA",
                                     "compiler", "cmake"], rows), ""]


def _builds_verified(runs: list[VerifyRun], labels) -> list[str]:
    rows = []
    for r in runs:
        pins = ", ".join(f"`{p.id}`@`{p.ref[:12]}` ({p.status})" for p in r.build.pins) or "—"
        flags = " ".join(f"`{f}`" for f in r.build.cmake_flags) or "—"
        rows.append([run_label(r, labels), f"`{r.build.commit[:12]}`", r.build.cuda_architectures or "—",
                     flags, pins])
    return ["Builds verified:", "", *table(["run", "commit", "CUDA architectures", "cmake flags", "pins (ref)"], rows), ""]
