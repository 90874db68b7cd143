"""test-backend-ops console output -> per-backend, per-op counts, and the verdict with its guards.

The guards exist because test-backend-ops passes falsely in known ways: a backend name that does
not exist only prints `Skipping` for every device and ends with `OK`; a filter that selects nothing
reports `0/0 tests passed`; "not supported" cases are not counted as run; a crash leaves a half
line. The verdict therefore needs the requested backend's own `Backend X: OK` line, a device
description, at least one case run, and a clean exit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pinset.checks.text import last_lines, strip_ansi

# "  MUL_MAT(type_a=f32,...): OK". Text printed before the case line by the comparison callback
# ("[MUL_MAT] ERR = 0.1 > 0.0005 ") ends up on the same line, ahead of the case name.
CASE_RE = re.compile(r"(?:^|(?<=\s))(?P<op>[A-Z][A-Z0-9_]*)\((?P<params>.*)\): ?(?P<result>.*)$")
BACKEND_HEADER_RE = re.compile(r"^Backend (?P<index>\d+)/(?P<count>\d+): (?P<name>\S+)\s*$")
BACKEND_STATUS_RE = re.compile(r"^\s+Backend (?P<name>\S+): (?P<status>OK|FAIL)\s*$")
SUMMARY_RE = re.compile(r"^\s+(?P<passed>\d+)/(?P<total>\d+) tests passed\s*$")
BACKENDS_PASSED_RE = re.compile(r"^(?P<passed>\d+)/(?P<total>\d+) backends passed\s*$")
DESCRIPTION_RE = re.compile(r"^\s+Device description: (?P<text>.*)$")
MEMORY_RE = re.compile(r"^\s+Device memory: (?P<total>\d+) MB \((?P<free>\d+) MB free\)")
CUDA_DEVICE_RE = re.compile(r"^\s*Device (?P<index>\d+): (?P<name>.+?), compute capability (?P<cc>[\d.]+)")
PERF_RE = re.compile(r"^\s*(?P<runs>\d+) runs - +(?P<us>[\d.]+) us/run")
TESTING_RE = re.compile(r"^Testing (?P<count>\d+) devices")
ERROR_TEXT_RE = re.compile(r"\[[A-Z0-9_]+\] (?:ERR|NMSE|MAA) = \S+ > \S+|\[[A-Z0-9_]+\] NaN at index[^)]*\)|"
                           r"\[[A-Z0-9_]+\] inf (?:sign )?mismatch: \S+ \S+|sentinel mismatch: \S+|compare failed")


@dataclass
class Case:
    op: str
    params: str
    status: str           # passed | failed | not-supported | skipped | measured | incomplete
    backend: str | None   # the section it was printed in
    detail: str = ""      # the error text for failures ("[MUL_MAT] ERR = ... > ..."), perf numbers

    @property
    def name(self) -> str:
        return f"{self.op}({self.params})"


@dataclass
class BackendSection:
    name: str
    index: int
    skipped: str | None = None        # "Skipping", "Skipping CPU backend"
    description: str | None = None
    memory_mib: int | None = None
    status: str | None = None         # OK | FAIL from "  Backend NAME: OK"; None when never printed
    summary: tuple[int, int] | None = None  # "  N/M tests passed"
    cases: list[Case] = field(default_factory=list)


@dataclass
class BackendOpsOutput:
    devices: int | None = None
    backends: list[BackendSection] = field(default_factory=list)
    failing_tests: list[str] = field(default_factory=list)
    backends_passed: tuple[int, int] | None = None
    final: str | None = None              # the last OK / FAIL line
    cuda_devices: list[dict] = field(default_factory=list)
    error_lines: list[str] = field(default_factory=list)

    def backend(self, name: str) -> BackendSection | None:
        for section in self.backends:
            if section.name == name:
                return section
        return None

    @property
    def cases(self) -> list[Case]:
        return [c for b in self.backends for c in b.cases]


def _classify(result: str, prefix: str) -> tuple[str, str]:
    text = result.strip()
    if text.startswith("not supported"):
        return "not-supported", text
    if text.startswith("skipping"):
        return "skipped", text
    if PERF_RE.match(text):
        return "measured", text
    if text.endswith("FAIL"):
        detail = " ".join(s for s in (prefix.strip(), text[:-4].strip()) if s)
        first = ERROR_TEXT_RE.search(detail)  # the callback prints one per compared node: keep the first
        return "failed", first.group(0) if first else detail[:200]
    if text == "OK" or text.endswith(" OK"):
        return "passed", text
    if text == "SUPPORTED":
        return "passed", text
    if text == "NOT SUPPORTED":
        return "not-supported", text
    return "incomplete", " ".join(s for s in (prefix.strip(), text) if s)


def _is_result(line: str) -> bool:
    text = line.strip()
    return text in ("OK", "FAIL") or text.startswith("not supported") or bool(PERF_RE.match(text)) \
        or (text.endswith(" FAIL") and ERROR_TEXT_RE.search(text) is not None)


def parse_backend_ops(text: str) -> BackendOpsOutput:
    """Parse the console output (stdout, or stdout+stderr merged) of test-backend-ops test/perf/support."""
    out = BackendOpsOutput()
    current: BackendSection | None = None
    in_failing = False
    for raw in strip_ansi(text).splitlines():
        line = raw.rstrip()
        if in_failing:
            if line.startswith("  ") and line.strip() and not BACKEND_STATUS_RE.match(line):
                out.failing_tests.append(line.strip())
                continue
            in_failing = False
        if line.startswith("Failing tests:"):
            in_failing = True
            continue
        m = TESTING_RE.match(line)
        if m:
            out.devices = int(m["count"])
            continue
        m = BACKEND_HEADER_RE.match(line)
        if m:
            current = BackendSection(m["name"], int(m["index"]))
            out.backends.append(current)
            continue
        m = CUDA_DEVICE_RE.match(line)
        if m and current is None:
            out.cuda_devices.append({"index": int(m["index"]), "name": m["name"], "compute_capability": m["cc"]})
            continue
        m = BACKEND_STATUS_RE.match(line)
        if m:
            section = out.backend(m["name"]) or current
            if section is not None:
                section.status = m["status"]
            continue
        m = BACKENDS_PASSED_RE.match(line)
        if m:
            out.backends_passed = (int(m["passed"]), int(m["total"]))
            current = None
            continue
        if line.strip() in ("OK", "FAIL") and out.backends_passed is not None:
            out.final = line.strip()
            continue
        if current is not None:
            m = DESCRIPTION_RE.match(line)
            if m:
                current.description = m["text"].strip()
                continue
            m = MEMORY_RE.match(line)
            if m:
                current.memory_mib = int(m["total"])
                continue
            m = SUMMARY_RE.match(line)
            if m:
                current.summary = (int(m["passed"]), int(m["total"]))
                continue
            if line.strip().startswith("Skipping") and not current.cases:
                current.skipped = line.strip()
                continue
            m = CASE_RE.search(line)
            if m:
                status, detail = _classify(m["result"], line[:m.start()])
                current.cases.append(Case(m["op"], m["params"], status, current.name, detail))
                if status == "failed" and detail:
                    out.error_lines.append(line.strip())
                continue
            if current.cases and current.cases[-1].status == "incomplete" and _is_result(line):
                # stderr merged into stdout (2>&1) can split a case line: the result comes on the next line
                case = current.cases[-1]
                case.status, case.detail = _classify(line.strip(), "")
                continue
        if re.search(r"\b(ERR|NMSE|MAA) = |NaN at index|inf mismatch|sentinel mismatch", line):
            out.error_lines.append(line.strip())
    return out


@dataclass
class OpCount:
    op: str
    backend: str
    passed: int
    total: int
    not_supported: int
    failures: list[str]
    params: str | None = None   # the -p filter the run used, if any

    def to_json(self) -> dict:
        out = {"op": self.op, "backend": self.backend, "passed": self.passed, "total": self.total,
               "not_supported": self.not_supported, "failures": list(self.failures)}
        if self.params:
            out["params"] = self.params
        return out

    def short(self) -> str:
        return f"{self.op} {self.passed}/{self.total}"


@dataclass
class BackendOpsVerdict:
    ok: bool
    ops: list[OpCount]
    problems: list[str]       # why it is red, one short sentence each
    cases_run: int
    measured: int = 0         # perf mode: cases with timings
    not_supported: int = 0
    device: str | None = None

    @property
    def detail(self) -> str | None:
        return "; ".join(self.problems) if self.problems else None


def count_ops(section: BackendSection, failing_tests: list[str]) -> list[OpCount]:
    """passed/total per op of one backend section; failures from the `Failing tests:` block."""
    by_op: dict[str, OpCount] = {}
    for case in section.cases:
        count = by_op.setdefault(case.op, OpCount(case.op, section.name, 0, 0, 0, []))
        if case.status == "passed":
            count.passed += 1
            count.total += 1
        elif case.status in ("failed", "incomplete"):
            count.total += 1
            if not failing_tests:  # no block (crash): the FAIL lines are all we have
                count.failures.append(case.name + (f": {case.detail}" if case.detail else ""))
        elif case.status == "not-supported":
            count.not_supported += 1
        elif case.status == "measured":
            count.passed += 1
            count.total += 1
    details = {c.name: c.detail for c in section.cases if c.status == "failed"}
    for name in failing_tests:
        op = name.split("(", 1)[0]
        count = by_op.setdefault(op, OpCount(op, section.name, 0, 0, 0, []))
        count.failures.append(name + (f": {details[name]}" if details.get(name) else ""))
    return list(by_op.values())


def judge_backend_ops(output: BackendOpsOutput, backend: str, *, returncode: int | None,
                      signal_name: str | None = None, timed_out: bool = False, raw_text: str = "",
                      mode: str = "test") -> BackendOpsVerdict:
    """Red unless the requested backend really ran, ran at least one case, and nothing failed or crashed."""
    problems: list[str] = []
    section = output.backend(backend)
    if section is None:
        names = ", ".join(b.name for b in output.backends) or "none"
        problems.append(f"backend {backend} not found (devices listed: {names})")
    elif section.skipped:
        problems.append(f"backend {backend} was skipped ({section.skipped})")
    elif not section.description:
        problems.append(f"backend {backend} printed no device description")
    ops = count_ops(section, output.failing_tests) if section is not None else []
    cases = section.cases if section is not None else []
    run = sum(1 for c in cases if c.status in ("passed", "failed", "incomplete", "measured"))
    measured = sum(1 for c in cases if c.status == "measured")
    not_supported = sum(1 for c in cases if c.status == "not-supported")
    failed = sum(1 for c in cases if c.status == "failed")
    if timed_out:
        problems.append("timed out")
    elif signal_name:
        problems.append(f"killed by {signal_name}")
    if section is not None and not section.skipped:
        if run == 0:
            problems.append(f"zero tests run ({not_supported} not supported)" if not_supported else "zero tests run")
        if mode == "test":
            if section.summary is not None:
                passed, total = section.summary
                parsed_passed = sum(c.status == "passed" for c in cases)
                if total != run or passed != parsed_passed:
                    problems.append(f"summary says {passed}/{total} tests passed but {parsed_passed}/{run} case lines were read")
            elif not (timed_out or signal_name):
                problems.append("no `N/M tests passed` summary")
        if failed or output.failing_tests:
            problems.append(f"{max(failed, len(output.failing_tests))} failing tests")
        incomplete = [c for c in cases if c.status == "incomplete"]
        if incomplete:
            problems.append(f"case {incomplete[-1].name} did not finish")
        if section.status is None and not (timed_out or signal_name):
            problems.append(f"no `Backend {backend}: OK` line")
        elif section.status == "FAIL" and not failed and not output.failing_tests:
            problems.append(f"`Backend {backend}: FAIL`")
    if returncode not in (0, None) and not signal_name and not problems:
        problems.append(f"exit {returncode}")
    if (timed_out or signal_name) and raw_text:
        problems.append("last output: " + " | ".join(last_lines(raw_text, 5).splitlines()))
    if (timed_out or signal_name) and ops and not any(c.status == "incomplete" for c in cases):
        # killed between two cases: the counts read so far must not look complete
        last = ops[-1]
        last.total += 1
        last.failures.append(f"run {'timed out' if timed_out else 'killed by ' + signal_name} before finishing")
    device = section.description if section is not None else None
    return BackendOpsVerdict(not problems, ops, problems, run, measured, not_supported, device)
