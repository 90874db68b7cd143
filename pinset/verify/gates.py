"""The gates of `pinset verify` for one build, in order, stopping at the first red one.

    cpu-build -> cpu-backend-ops -> cpu-test-chat            (cheap: before any GPU time)
    cuda-build -> test-chat -> backend-ops                    (--cuda)
    feature-checks                                            (on the GPU with --cuda, else on the CPU build)

Each gate returns a GateResult; the program output of every step goes to a log file.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from pinset import runner
from pinset.build.cmake import BuildFailed, BuiltTree, cmake_cache_value, configured_compilers, ensure_build
from pinset.build.settings import CPU_BUILD, BuildSettings
from pinset.checks.backend_ops import OpCount, case_counter, judge_backend_ops, parse_backend_ops
from pinset.checks.ctest import judge_ctest, parse_ctest
from pinset.checks.llama_archs import (
    LOST_TAIL_ATTEMPTS,
    LOST_TAIL_WHY,
    arch_filter,
    judge_llama_archs,
    lost_tail,
    parse_llama_archs,
)
from pinset.checks.mtmd import judge_mtmd, parse_mtmd
from pinset.checks.nvidia_smi import gpu_order_env
from pinset.checks.text import last_lines, strip_ansi
from pinset.config.schema import FeatureCheck, PinSet
from pinset.errors import PinsetError, ToolchainError
from pinset.progress import Progress
from pinset.sim.model import ERROR, PinResult
from pinset.verify import plan
from pinset.verify.model import (
    FAILED,
    GATES,
    GPU_GATES,
    INTERRUPTED,
    NOT_RUN,
    PASSED,
    PIN_SET,
    UNCHECKED,
    BuildVerification,
    CheckResult,
    GateResult,
    NotTested,
    PinRef,
    gate_failed_reason,
    not_run_because,
)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a gate, with the build's result so far (Gates.verify)."""

    def __init__(self, result: BuildVerification):
        super().__init__(INTERRUPTED)
        self.result = result


@dataclass
class VerifyOptions:
    cuda: bool
    ops: list[str]
    backend: str = "CUDA0"
    cuda_architectures: str | None = None
    jobs: int | None = None
    op_timeout: float = 1800.0
    op_jobs: int = 1            # test-backend-ops -j (parallel workers, test mode) on the GPU backend
    ctest_timeout: float = 1200.0
    cpu_params: str | None = None
    cuda_flags: list[str] = field(default_factory=list)   # extra CMake flags for the CUDA build only
    log_dir: Path = Path("verify-logs")
    progress: bool = True
    gpu_name: str | None = None   # the GPU the result names (machine.gpu): the GPU gates must have run on it
    settings: BuildSettings | None = None   # the CUDA build's settings whole (check_toolchain); else from the above

    def build_settings(self, cuda: bool) -> BuildSettings:
        """The settings of verify's CPU or CUDA build: the CPU build never takes the CUDA flags."""
        if not cuda:
            return CPU_BUILD
        return self.settings or BuildSettings(True, self.cuda_architectures, None, tuple(self.cuda_flags))


@dataclass
class BuildInput:
    """What the sim stage gives verify for one build."""

    name: str
    commit: str
    tree: str | None
    pins: Mapping[str, PinResult]     # sim's result of each pin on the build, by id
    required_failed: list[str]
    symbols: set[str] = field(default_factory=set)
    touched: list[list[str] | None] | None = None   # per pin carried: its files (None: unknown); scopes the CPU gate


class Gates:
    def __init__(self, pinset: PinSet, store, mirror, options: VerifyOptions, say: Callable[[str], None]):
        self.pinset, self.store, self.mirror, self.options = pinset, store, mirror, options
        self.say = say
        # the pins' checks and the pin set's own (features upstream carries now: run on every build)
        self.checks = [c for p in pinset.pins for c in p.checks] + list(pinset.checks)
        self._cpu: BuiltTree | None = None   # the trees built by this build's gates (verify sets them)
        self._gpu: BuiltTree | None = None

    # --- one build ------------------------------------------------------------------------
    def verify(self, item: BuildInput, stopped: str | None = None) -> BuildVerification:
        """The gates of one build; `stopped`: why none of them runs (verify was interrupted before this build).

        Interrupted (Ctrl-C, SIGTERM) during a gate, it raises Interrupted carrying this build's result so far:
        the gate that was running and the later ones are `not-run`, saying so."""
        o = self.options
        logs = o.log_dir / _slug(item.name)
        try:
            logs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PinsetError(f"logs folder {logs}: {(exc.strerror or str(exc)).lower()} (pass another --logs)") from None
        result = BuildVerification(
            item.name, item.commit,
            [PinRef(p.id, item.pins[p.id].status if p.id in item.pins else ERROR, plan.pin_ref(p)) for p in self.pinset.pins],
            [GateResult(name) for name in GATES], tree=item.tree,
            cuda_architectures=o.cuda_architectures if o.cuda else None)
        if not o.cuda:
            for name in GPU_GATES:
                gate = result.gate(name)
                gate.detail, gate.extra["not_requested"] = "--cuda not given", True
            result.not_tested.append(NotTested("GPU gates (cuda-build, test-chat, backend-ops)", "--cuda not given"))
        if stopped or item.required_failed or item.tree is None:
            why = stopped or (f"required pins not in the tree: {', '.join(item.required_failed)}"
                              if item.required_failed else "the sim produced no tree")
            for gate in result.gates:
                if not gate.extra.get("not_requested"):
                    gate.detail = why
            result.not_tested.append(NotTested("all gates", why))
            return result

        types = plan.pin_types(item.symbols, plan.ggml_type_names(self.mirror.read_blob(item.tree, "ggml/src/ggml.c")))
        check_targets = sorted({t for c in self.checks for t in plan.check_targets(c)})
        cpu_targets = plan.BASE_TARGETS + ([] if o.cuda else check_targets)

        steps = [
            ("cpu-build", lambda g: self._build(g, item, cuda=False, targets=cpu_targets, logs=logs, out=result)),
            ("cpu-backend-ops", lambda g: self._cpu_backend_ops(g, types, logs, item, result)),
            ("cpu-test-chat", lambda g: self._ctest_gate(g, self._cpu, "test-chat", logs / "cpu-test-chat.log")),
        ]
        if o.cuda:
            steps += [
                ("cuda-build", lambda g: self._build(g, item, cuda=True, targets=plan.BASE_TARGETS + check_targets,
                                                     logs=logs, out=result)),
                ("test-chat", lambda g: self._ctest_gate(g, self._gpu, "test-chat", logs / "test-chat.log")),
                ("backend-ops", lambda g: self._gpu_backend_ops(g, logs)),
            ]
        steps.append(("feature-checks", lambda g: self._feature_checks(g, item, logs, result)))

        self._cpu = self._gpu = None
        failed_at = None
        for name, step in steps:
            gate = result.gate(name)
            if failed_at:
                gate.detail = not_run_because(gate_failed_reason(failed_at))
                continue
            self.say(f"[bold]{item.name}[/]: {name} ...")
            started = time.monotonic()
            try:
                step(gate)
            except KeyboardInterrupt:
                self._interrupted(result, name, time.monotonic() - started)
            gate.seconds = time.monotonic() - started
            style = {"passed": "green", "failed": "red"}.get(gate.status, "yellow")
            self.say(f"[bold]{item.name}[/]: {name} [{style}]{gate.status}[/] ({gate.seconds:.0f} s)"
                     + (f" — {gate.detail}" if gate.detail else ""))
            if gate.status == FAILED:
                failed_at = name
        return result

    @staticmethod
    def _interrupted(result: BuildVerification, at: str, seconds: float) -> None:
        """Ctrl-C or SIGTERM during gate `at`: it and the later gates did not run (whatever they had counted
        so far is dropped, since a half-run gate proves nothing); raise with the result so far."""
        later = False
        for gate in result.gates:
            later = later or gate.name == at
            if later and not gate.extra.get("not_requested"):
                gate.status, gate.ops, gate.checks = NOT_RUN, None, None
                gate.detail = INTERRUPTED if gate.name == at else not_run_because(INTERRUPTED)
                gate.seconds = seconds if gate.name == at else 0.0
        result.not_tested.append(NotTested(f"gates from {at} on", INTERRUPTED))
        raise Interrupted(result)

    # --- builds ---------------------------------------------------------------------------
    def _build(self, gate: GateResult, item: BuildInput, *, cuda: bool, targets: list[str], logs: Path,
               out: BuildVerification) -> None:
        o = self.options
        label = f"{item.name} {'cuda' if cuda else 'cpu'}"
        settings = o.build_settings(cuda)
        kwargs: dict[str, Any] = dict(label=label, commit=item.commit, pinset_digest=self.pinset.digest, jobs=o.jobs,
                      progress=o.progress, log_dir=logs,
                      log_name="cuda" if cuda else "cpu")  # docs/verify.md: <logs>/<build>/cpu-build.log
        assert item.tree is not None   # verify() stops before the gates without a tree
        try:
            built = ensure_build(self.store, self.mirror, item.tree, settings, targets, **kwargs)
            extra = self._ctest_targets(built, cuda)
            missing = [t for t in extra if t not in targets]
            if missing:
                again = ensure_build(self.store, self.mirror, item.tree, settings, targets + missing, **kwargs)
                built = BuiltTree(again.source_dir, again.build_dir, again.bin_dir, again.cmake_flags,
                                  built.seconds + again.seconds, built.cached and again.cached)
                targets = targets + missing
        except BuildFailed as exc:
            gate.status = "failed"
            gate.detail = f"{exc} — {exc.stage} log: {exc.log}"
            gate.extra["error"] = exc.tail.splitlines()[:25]
            return
        except ToolchainError as exc:
            # the toolchain was checked before any build, so what is left is this tree's (no CMakeLists.txt):
            # this build's red gate; the other builds are still verified
            gate.status, gate.detail = "failed", str(exc)
            return
        if cuda:
            self._gpu = built
        else:
            self._cpu = built
        if cuda or not o.cuda:
            out.cmake_flags = built.cmake_flags
            out.ccache = cmake_cache_value(built.build_dir, "GGML_CCACHE_FOUND")
        missing_bins = [t for t in targets if not _is_program(built.bin_dir / t)]
        if missing_bins:
            gate.status = "failed"
            gate.detail = f"built, but no program {', '.join(missing_bins)} in {built.bin_dir} (missing or not executable)"
            return
        gate.status = "passed"
        gate.detail = f"{len(targets)} targets, " + ("cached (ninja: no work to do)" if built.cached else "built")
        gate.extra.update({"cached": built.cached, "targets": targets, "build_dir": str(built.build_dir),
                           "cmake_flags": built.cmake_flags, "compilers": configured_compilers(built.build_dir)})

    def _ctest_targets(self, built: BuiltTree, cuda: bool) -> list[str]:
        """Binaries the pins' ctest checks need, read from ctest's own test list."""
        names = [c.name for c in self.checks if c.kind == "ctest" and c.name is not None]
        if not names or (self.options.cuda and not cuda):
            return []
        listing = runner.run(["ctest", "--show-only=json-v1"], cwd=built.build_dir, timeout=120)
        return plan.ctest_targets(listing.stdout, names) if listing.ok else []

    # --- test-backend-ops -----------------------------------------------------------------
    def _backend_ops(self, built: BuiltTree, op: str, backend: str, params: str | None, mode: str, log: Path):
        argv = [str(built.bin_dir / "test-backend-ops"), mode, "-o", op, "-b", backend]
        if params:
            argv += ["-p", params]
        if mode == "test" and backend != "CPU" and self.options.op_jobs > 1:
            argv += ["-j", str(self.options.op_jobs)]
        # Streamed (stderr merged, which the parser reads) so a run of up to 30 min shows its case count.
        with Progress(f"test-backend-ops {mode} {op} on {backend}", unit="cases",
                      enabled=self.options.progress) as shown:
            done = runner.run_streaming(argv, cwd=built.build_dir, timeout=self.options.op_timeout, log=log,
                                        on_line=case_counter(shown), env=gpu_order_env())
        output = parse_backend_ops(done.stdout)
        verdict = judge_backend_ops(output, backend, returncode=done.returncode, signal_name=done.signal_name,
                                    timed_out=done.timed_out, raw_text=done.stdout + "\n" + done.stderr, mode=mode,
                                    op=op, params=params)
        return verdict, done

    def _op_gate(self, gate: GateResult, built: BuiltTree | None, runs: list[tuple[str, str | None]], backend: str,
                 log: Path) -> None:
        assert built is not None   # its build gate passed (a failed gate stops the later ones)
        gate.ops, problems = [], []
        log.unlink(missing_ok=True)
        for op, params in runs:
            verdict, _ = self._backend_ops(built, op, backend, params, "test", log)
            counts = [c for c in verdict.ops if c.op == op] or [OpCount(op, backend, 0, 0, verdict.not_supported, [])]
            for count in counts:
                count.params = params
                gate.ops.append(count)
            if verdict.device:
                gate.extra["device"] = verdict.device
            if not verdict.ok:
                problems.append(f"{op}: {verdict.detail}")
        gate.status = "failed" if problems else "passed"
        summary = ", ".join(c.short() for c in gate.ops)
        gate.detail = summary + (f" — {'; '.join(problems)}" if problems else "")
        gate.extra["log"] = str(log)

    def _cpu_backend_ops(self, gate: GateResult, types: list[str], logs: Path, item: BuildInput,
                         out: BuildVerification) -> None:
        ops, scope = plan.cpu_gate_scope(item.touched, item.symbols)
        runs = plan.cpu_gate_runs(types, self.checks, self.options.cpu_params, ops=ops)
        gate.extra["types"], gate.extra["scope"] = types, scope
        if not runs:   # nothing the pins change runs in test-backend-ops: said, never a pass of 0 cases
            gate.detail, gate.extra["not_requested"] = f"no test-backend-ops case to run: {scope}", True
            out.not_tested.append(NotTested("CPU test-backend-ops cases", scope))
            return
        self._op_gate(gate, self._cpu, runs, "CPU", logs / "cpu-backend-ops.log")

    def _gpu_backend_ops(self, gate: GateResult, logs: Path) -> None:
        self._op_gate(gate, self._gpu, [(op, None) for op in self.options.ops], self.options.backend,
                      logs / "backend-ops.log")
        device, named = gate.extra.get("device"), self.options.gpu_name
        if device and named and not device.startswith(named):   # a MIG slice's name extends its GPU's
            gate.status = "failed"
            gate.detail = (gate.detail or "") + (f" — {self.options.backend} ran on {device}, not on {named} that this result names "
                            "(CUDA_DEVICE_ORDER or CUDA_VISIBLE_DEVICES picks another GPU than nvidia-smi's)")

    # --- ctest ----------------------------------------------------------------------------
    def _ctest(self, built: BuiltTree, name: str, log: Path, require_output: bool = False):
        # -V: the test's own output is in ctest's, so a test that printed nothing can be told apart
        argv = ["ctest", "-R", f"^{plan.ctest_regex_escape(name)}$", "-V", "--output-on-failure",
                "--timeout", str(int(self.options.ctest_timeout))]
        done = runner.run(argv, cwd=built.build_dir, timeout=self.options.ctest_timeout + 60, log=log,
                          env=gpu_order_env())
        return judge_ctest(parse_ctest(done.stdout), returncode=done.returncode, timed_out=done.timed_out,
                           expected=name, require_output=require_output), done

    def _ctest_gate(self, gate: GateResult, built: BuiltTree | None, name: str, log: Path) -> None:
        assert built is not None   # its build gate passed (a failed gate stops the later ones)
        log.unlink(missing_ok=True)
        verdict, done = self._ctest(built, name, log, require_output=True)   # test-chat ends "All tests passed!"
        gate.status = "passed" if verdict.ok else "failed"
        gate.detail = f"{name}: {verdict.cases} test run, passed" if verdict.ok else \
            f"{verdict.detail} — last lines: {' | '.join(last_lines(done.stdout, 4).splitlines())}"
        gate.extra["log"] = str(log)

    # --- feature checks -------------------------------------------------------------------
    def _feature_checks(self, gate: GateResult, item: BuildInput, logs: Path, out: BuildVerification) -> None:
        o = self.options
        built, backend, where = (self._gpu, o.backend, "GPU") if o.cuda else (self._cpu, "CPU", "CPU")
        assert built is not None   # its build gate passed (a failed gate stops the later ones)
        log = logs / "feature-checks.log"
        log.unlink(missing_ok=True)
        gate.checks = []
        for pin in self.pinset.pins:
            if pin.unchecked:
                gate.checks.append(CheckResult(pin.id, "unchecked", "unchecked", 0, pin.unchecked))
                continue
            if not pin.checks:
                out.not_tested.append(NotTested(f"pin {pin.id}", "declares no feature check and no `unchecked:` reason"))
                continue
            sim_pin = item.pins.get(pin.id)
            for check in pin.checks:
                if sim_pin is None or not sim_pin.in_tree:
                    status = sim_pin.status if sim_pin else None
                    gate.checks.append(CheckResult(pin.id, check.describe(), NOT_RUN, 0, f"pin is {status} on this build"))
                    continue
                started = time.monotonic()
                result = self._run_check(pin.id, check, built, backend, log)
                result.seconds = time.monotonic() - started
                gate.checks.append(result)
        for check in self.pinset.checks:   # no pin to be in the tree: the feature comes with the build
            started = time.monotonic()
            result = self._run_check(PIN_SET, check, built, backend, log)
            result.seconds = time.monotonic() - started
            gate.checks.append(result)
        ran = [c for c in gate.checks if c.status != UNCHECKED]
        passed = [c for c in ran if c.status == PASSED]
        unchecked = [c for c in gate.checks if c.status == UNCHECKED]
        gate.extra.update({"where": where, "backend": backend, "log": str(log)})
        if not ran:
            gate.status, gate.extra["not_requested"] = NOT_RUN, True
            gate.detail = "no pin or pin set check declares a feature check" + (
                f" ({len(unchecked)} unchecked)" if unchecked else "")
            out.not_tested.append(NotTested("feature checks", "no pin declares one, nor the pin set"))
            return
        gate.status = "passed" if len(passed) == len(ran) else "failed"
        gate.detail = f"{len(passed)}/{len(ran)} feature checks on {where}"
        if unchecked:
            gate.detail += f"; {len(unchecked)} pin(s) unchecked: " + ", ".join(f"{c.pin} ({c.detail})" for c in unchecked)
        bad = [c for c in ran if c.status != PASSED]
        if bad:
            gate.detail += " — " + "; ".join(f"{c.pin} {c.check}: {c.detail}" for c in bad)

    def _run_check(self, pin_id: str, check: FeatureCheck, built: BuiltTree, backend: str, log: Path) -> CheckResult:
        name = check.describe()
        if check.kind == "backend-op":
            assert check.op is not None   # config.schema: a backend-op check names its op
            verdict, _ = self._backend_ops(built, check.op, backend, check.params, check.mode, log)
            cases = verdict.measured if check.mode == "perf" else verdict.cases_run
            problems = list(verdict.problems)
            if verdict.not_supported and not problems:
                problems.append(f"{verdict.not_supported} matching cases not supported on {backend}")
            if problems:
                return CheckResult(pin_id, name, "failed", cases, "; ".join(problems))
            counts = ", ".join(c.short() for c in verdict.ops)
            return CheckResult(pin_id, name, "passed", cases, f"{counts} on {backend}" if check.mode == "test"
                               else f"{cases} cases measured on {backend}")
        if check.kind == "ctest":
            assert check.name is not None   # config.schema: a ctest check names its test
            verdict, _ = self._ctest(built, check.name, log)
            return CheckResult(pin_id, name, "passed" if verdict.ok else "failed", verdict.cases, verdict.detail)
        if check.kind == "arch":
            assert check.name is not None   # config.schema: an arch check names its architecture
            # -b: the rows of the backend verify tests only (CPU, or the GPU against the CPU), no split-mode rows
            argv = [str(built.bin_dir / plan.CHECK_PROGRAMS["arch"]), "-a", arch_filter(check.name),
                    "-s", str(check.seed), "-b", backend]
            for attempt in range(1, LOST_TAIL_ATTEMPTS + 1):
                done = runner.run(argv, cwd=built.build_dir, timeout=self.options.op_timeout, log=log,
                                  env=gpu_order_env())
                output = parse_llama_archs(done.stdout)
                if not lost_tail(output, done.returncode):
                    break
            arch = judge_llama_archs(output, check.name, returncode=done.returncode, timed_out=done.timed_out,
                                     signal_name=done.signal_name, raw_text=done.stdout + "\n" + done.stderr)
            detail = arch.detail + (f" (run {attempt} times: the first lost the end of their output, {LOST_TAIL_WHY})"
                                    if attempt > 1 else "")
            named = self.options.gpu_name
            elsewhere = sorted({r.device for r in arch.rows if r.ran and named and not r.device.startswith(named)})
            if backend != "CPU" and elsewhere:   # the rows must be the GPU the result names, as backend-ops' device
                return CheckResult(pin_id, name, "failed", arch.ran,
                                   f"{backend} rows ran on {', '.join(elsewhere)}, not on {named} that this result names")
            return CheckResult(pin_id, name, "passed" if arch.ok else "failed", arch.ran, detail)
        if check.kind == "mtmd":
            argv = [str(built.bin_dir / plan.CHECK_PROGRAMS["mtmd"])] + ([check.tests] if check.tests else [])
            done = runner.run(argv, cwd=built.build_dir, timeout=self.options.ctest_timeout, log=log, env=gpu_order_env())
            mtmd = judge_mtmd(parse_mtmd(done.stdout), returncode=done.returncode, timed_out=done.timed_out,
                              signal_name=done.signal_name, raw_text=done.stdout + "\n" + done.stderr)
            detail = mtmd.detail + (f" (libmtmd's own code: test-mtmd-impl uses no {backend})"
                                    if backend != "CPU" and mtmd.ok else "")
            return CheckResult(pin_id, name, "passed" if mtmd.ok else "failed", mtmd.assertions, detail)
        argv = plan.substitute(check.argv, bin_dir=built.bin_dir, build_dir=built.build_dir,
                               source_dir=built.source_dir)
        done = runner.run(argv, cwd=built.source_dir, timeout=check.timeout, log=log, env=gpu_order_env())
        text = strip_ansi(done.stdout + "\n" + done.stderr)
        assert check.expect is not None   # config.schema: a command check has its expect
        matches = count_matches(check.expect, text)
        if not done.ok:
            return CheckResult(pin_id, name, "failed", matches,
                               f"{done.describe()}: {' | '.join(last_lines(text, 4).splitlines())}")
        if matches == 0:
            return CheckResult(pin_id, name, "failed", 0,
                               f"output does not match /{check.expect}/: {' | '.join(last_lines(text, 3).splitlines())}")
        return CheckResult(pin_id, name, "passed", matches, f"{matches} match(es) of /{check.expect}/")


def count_matches(expect: str, text: str) -> int:
    """Non-empty matches of a command check's regex: an `expect` that can match the empty string
    (`x*`, `^`, `a|`) would otherwise "match" any output, an empty one included."""
    return sum(1 for m in re.finditer(expect, text, re.M) if m.group(0).strip())


def _is_program(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")
