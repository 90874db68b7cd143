"""test-backend-ops console output -> per-backend, per-op counts, and the verdict with its guards.

The guards exist because test-backend-ops passes falsely in known ways: a backend name that does
not exist only prints `Skipping` for every device and ends with `OK`; a filter that selects nothing
reports `0/0 tests passed`; "not supported" cases are not counted as run; a crash leaves a half
line. The verdict therefore needs the requested backend's own `Backend X: OK` line, a device
description, at least one case run, and a clean exit.

Odd output never passes: a case's result must be exactly the pass marker `OK` (not `not OK`, not
`OK` with text after or before it), every case counted must be of the op asked for (`-o MUL_MAT`
printing only `ADD(...)` cases is `MUL_MAT 0/0`) and, with a `-p` filter, carry each of the filter's
`key=value` terms exactly (`type_a=iq1_m` is not `type_a=iq1_m_xyz`, nor `type_b=iq1_m`); a second
section, status line or results for a backend other than the one asked for make the run unreadable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pinset.checks.text import last_lines, strip_ansi

# "  MUL_MAT(type_a=f32,...): OK". Text printed before the case line by the comparison callback
# ("[MUL_MAT] ERR = 0.1 > 0.0005 ") ends up on the same line, ahead of the case name. The definition of a
# case line; the parser reads it with match_case (the same match in linear time).
CASE_RE = re.compile(r"(?:^|(?<=\s))(?P<op>[A-Z][A-Z0-9_]*)\((?P<params>.*)\): ?(?P<result>.*)$")
_OP_START_RE = re.compile(r"(?:^|(?<=\s))(?P<op>[A-Z][A-Z0-9_]*)\(")
BACKEND_HEADER_RE = re.compile(r"^Backend (?P<index>\d+)/(?P<count>\d+): (?P<name>\S+)\s*$")
BACKEND_STATUS_RE = re.compile(r"^\s+Backend (?P<name>\S+): (?P<status>OK|FAIL)\s*$")
SUMMARY_RE = re.compile(r"^\s+(?P<passed>\d+)/(?P<total>\d+) tests passed\s*$")
BACKENDS_PASSED_RE = re.compile(r"^(?P<passed>\d+)/(?P<total>\d+) backends passed\s*$")
DESCRIPTION_RE = re.compile(r"^\s+Device description: (?P<text>.*)$")
MEMORY_RE = re.compile(r"^\s+Device memory: (?P<total>\d+) MB \((?P<free>\d+) MB free\)")
CUDA_DEVICE_RE = re.compile(r"^\s*Device (?P<index>\d+): (?P<name>.+?), compute capability (?P<cc>[\d.]+)")
# "    1234 runs -    18.68 us/run - 117.44 MFLOP/run -   6.29 TFLOPS" or "... -   4096 kB/run -  812.50 GB/s"
PERF_RE = re.compile(r"^\s*(?P<runs>\d+) runs - +(?P<us>\d+\.\d+) us/run - +(?:\d+\.\d+ [kMGT]FLOP/run - +"
                     r"\d+\.\d+ [kMGT]FLOPS|\d+ kB/run - +\d+\.\d+ GB/s)$")
# Text a case line may carry between "): " and a result pushed to the next line: a log line of the
# program or the CUDA backend on merged stderr ("ggml_backend_cuda_graph_compute: CUDA graph warmup reset").
LOG_INTERRUPTION_RE = re.compile(r"^[a-z_][a-z0-9_]*: \S")
TESTING_RE = re.compile(r"^Testing (?P<count>\d+) devices")
ERROR_TEXT_RE = re.compile(r"\[[A-Z0-9_]+\] (?:ERR|NMSE|MAA) = \S+ > \S+|\[[A-Z0-9_]+\] NaN at index[^)]*\)|"
                           r"\[[A-Z0-9_]+\] inf (?:sign )?mismatch: \S+ \S+|sentinel mismatch: \S+|compare failed")


@dataclass(frozen=True)
class CaseMatch:
    op: str
    params: str
    result: str
    start: int     # where the op name begins: text before it was printed ahead of the case


def match_case(line: str) -> CaseMatch | None:
    """What `CASE_RE.search(line)` finds, in time linear in the line: its greedy params end at the line's
    last `):`, and its op is the leftmost one before that (the regex backtracks over the whole rest of the
    line for every candidate op: a long line of a broken program took minutes)."""
    end = line.rfind("):")
    if end < 0:
        return None
    m = _OP_START_RE.search(line, 0, end)
    if m is None:
        return None
    result = line[end + 2:]
    return CaseMatch(m["op"], line[m.end():end], result[1:] if result.startswith(" ") else result, m.start())


@dataclass
class Case:
    op: str
    params: str
    status: str           # passed | failed | unreadable | not-supported | skipped | measured | incomplete
    backend: str | None   # the section it was printed in
    detail: str = ""      # the error text for failures ("[MUL_MAT] ERR = ... > ..."), perf numbers

    @property
    def name(self) -> str:
        return f"{self.op}({self.params})"


RUN_STATUSES = ("passed", "failed", "unreadable", "incomplete", "measured")   # the case ran (or began to)


@dataclass
class BackendSection:
    name: str
    index: int
    skipped: str | None = None        # "Skipping", "Skipping CPU backend"
    description: str | None = None
    memory_mib: int | None = None
    status: str | None = None         # OK | FAIL from "  Backend NAME: OK"; None when never printed; FAIL sticks
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
    anomalies: list[str] = field(default_factory=list)   # what real output never shows (a second status line...)

    def backend(self, name: str) -> BackendSection | None:
        for section in self.backends:
            if section.name == name:
                return section
        return None

    @property
    def cases(self) -> list[Case]:
        return [c for b in self.backends for c in b.cases]


def _perf_ok(text: str) -> bool:
    m = PERF_RE.match(text)
    return m is not None and int(m["runs"]) > 0 and float(m["us"]) > 0


def _classify(result: str, prefix: str) -> tuple[str, str]:
    """A case's status from the text after "): " (result) and the text ahead of its name (prefix).

    Only the exact markers count: `OK` (test), `SUPPORTED` (support) or a complete perf line, with
    nothing ahead of the case name; `FAIL` at the end is a failure whatever precedes it. Anything
    else the program could not have printed for a finished case is "unreadable" (red).
    """
    text, prefix = result.strip(" \t"), prefix.strip(" \t")   # a \r or other control character is not blank
    if text.startswith("not supported") or text == "NOT SUPPORTED":
        return "not-supported", text
    if text.startswith("skipping"):
        return "skipped", text
    if text.endswith("FAIL"):
        detail = " ".join(s for s in (prefix, text[:-4].strip()) if s)
        first = ERROR_TEXT_RE.search(detail)  # the callback prints one per compared node: keep the first
        return "failed", first.group(0) if first else detail[:200]
    if prefix and (error := ERROR_TEXT_RE.search(prefix)):
        return "failed", error.group(0)
    if text in ("OK", "SUPPORTED"):
        return ("passed", text) if not prefix else ("unreadable", f"{prefix!r} ahead of the case name")
    if _perf_ok(text):
        return ("measured", text) if not prefix else ("unreadable", f"{prefix!r} ahead of the case name")
    if not text or LOG_INTERRUPTION_RE.match(text):
        return "incomplete", " ".join(s for s in (prefix, text) if s)
    return "unreadable", f"result {text[:80]!r} is not a test-backend-ops result"


def _is_result(text: str) -> bool:
    """A line that finishes a case whose result was pushed to the next line by a log message."""
    return text in ("OK", "FAIL", "SUPPORTED", "NOT SUPPORTED") or text.startswith("not supported") \
        or _perf_ok(text) or (text.endswith(" FAIL") and ERROR_TEXT_RE.search(text) is not None)


# a line with a comparison's error text (counted whether or not it is a case line)
ERROR_LINE_RE = re.compile(r"\b(ERR|NMSE|MAA) = |NaN at index|inf mismatch|sentinel mismatch")


def parse_backend_ops(text: str) -> BackendOpsOutput:
    """Parse the console output (stdout, or stdout+stderr merged) of test-backend-ops test/perf/support."""
    parser = _Parser()
    for raw in strip_ansi(text).split("\n"):   # only a newline ends a line (not \r, \x1c, \u2028...)
        parser.feed(raw.rstrip(" \t"))
    return parser.out


class _Parser:
    """One pass over the lines, one concern per method: each says whether it consumed the line; a line no
    method takes is still searched for error text."""

    def __init__(self) -> None:
        self.out = BackendOpsOutput()
        self.current: BackendSection | None = None
        self.in_failing = False
        self.awaiting_result = False   # the last case line ended in a log message: its result may be on a later line
        self.sections: set[str] = set()  # backend names with a section so far

    def feed(self, line: str) -> None:
        if self._finishes_case(line) or self._failing_test(line) or self._run_line(line) or self._backend_line(line):
            return
        if self.current is not None:
            if self._section_line(line, self.current):
                return
        elif (case := match_case(line)) and case.result.strip():
            # every case is printed inside its backend's section: one elsewhere (after the closing line,
            # before the first section) belongs to no run we can judge
            self.out.anomalies.append(f"a case line outside any backend section: {line.strip()[:120]}")
        if ERROR_LINE_RE.search(line):
            self.out.error_lines.append(line.strip())

    def _finishes_case(self, line: str) -> bool:
        """The result of the last case, pushed to this line by a log message."""
        if not (self.awaiting_result and self.current is not None and self.current.cases):
            return False
        if _is_result(line.strip(" \t")):
            case = self.current.cases[-1]
            case.status, case.detail = _classify(line, "")
            self.awaiting_result = False
            return True
        self.awaiting_result = bool(LOG_INTERRUPTION_RE.match(line.strip()))
        return False

    def _failing_test(self, line: str) -> bool:
        """The `Failing tests:` block: its heading and its indented case names."""
        if self.in_failing:
            if line.startswith("  ") and line.strip() and not BACKEND_STATUS_RE.match(line):
                self.out.failing_tests.append(line.strip())
                return True
            self.in_failing = False
        if line.startswith("Failing tests:"):
            self.in_failing = True
            return True
        return False

    def _run_line(self, line: str) -> bool:
        """Lines about the whole run: the device count, CUDA's device list, the closing count and OK/FAIL."""
        out = self.out
        if m := TESTING_RE.match(line):
            out.devices = int(m["count"])
            return True
        if self.current is None and (m := CUDA_DEVICE_RE.match(line)):
            out.cuda_devices.append({"index": int(m["index"]), "name": m["name"], "compute_capability": m["cc"]})
            return True
        if m := BACKENDS_PASSED_RE.match(line):
            out.backends_passed = (int(m["passed"]), int(m["total"]))
            self.current = None
            return True
        if line.strip(" \t") in ("OK", "FAIL") and out.backends_passed is not None:
            out.final = "FAIL" if "FAIL" in (out.final, line.strip(" \t")) else line.strip(" \t")
            return True
        return False

    def _backend_line(self, line: str) -> bool:
        """A backend section's header (`Backend 1/2: CUDA0`) and its status line (`  Backend CUDA0: OK`)."""
        out, current = self.out, self.current
        if m := BACKEND_HEADER_RE.match(line):
            if m["name"] in self.sections:
                out.anomalies.append(f"a second section for backend {m['name']}")
            self.sections.add(m["name"])
            self.current = BackendSection(m["name"], int(m["index"]))
            out.backends.append(self.current)
            return True
        if m := BACKEND_STATUS_RE.match(line):
            if current is None or m["name"] != current.name:
                where = f"in the section of {current.name}" if current else "outside any backend section"
                out.anomalies.append(f"`Backend {m['name']}: {m['status']}` {where}")
                return True
            if current.status is not None:
                out.anomalies.append(f"a second `Backend {current.name}: ...` line")
            current.status = "FAIL" if "FAIL" in (current.status, m["status"]) else m["status"]
            return True
        return False

    def _section_line(self, line: str, current: BackendSection) -> bool:
        """Inside a backend section: its device, its summary, `Skipping`, and the case lines."""
        if m := DESCRIPTION_RE.match(line):
            current.description = m["text"].strip()
            return True
        if m := MEMORY_RE.match(line):
            current.memory_mib = int(m["total"])
            return True
        if m := SUMMARY_RE.match(line):
            if current.summary is not None:
                self.out.anomalies.append(f"a second `N/M tests passed` line for backend {current.name}")
            current.summary = (int(m["passed"]), int(m["total"]))
            return True
        if line.strip().startswith("Skipping") and not current.cases:
            current.skipped = line.strip()
            return True
        case = match_case(line)
        if not case:
            return False
        if "): " in case.params:
            # two case names on one line: the greedy match cannot say where one ends
            status, detail = "unreadable", "two case names on one line"
        else:
            status, detail = _classify(case.result, line[:case.start])
        current.cases.append(Case(case.op, case.params, status, current.name, detail))
        self.awaiting_result = status == "incomplete"
        if status == "failed" and detail:
            self.out.error_lines.append(line.strip())
        return True


# --- -p filters: exact per key=value -------------------------------------------------------------

KEY_VALUE_RE = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.+)", re.S)
# `.*` / `.+` between two terms ("type_a=iq1_m.*n_mats=128"); one that ends a value stays in it ("type_a=q4_.*")
GAP_BEFORE_KEY_RE = re.compile(r"(\.[*+]\??)(?=[A-Za-z_][A-Za-z0-9_]*=)")


def case_counter(progress):
    """An on_line callback for a streamed run: counts case lines as they come, names the op of the last."""
    seen = {"cases": 0}

    def on_line(line: str) -> None:
        case = match_case(strip_ansi(line))
        if case and case.result.strip():
            seen["cases"] += 1
            progress.update(done=seen["cases"], note=case.op)

    return on_line


def case_params(params: str) -> dict[str, list[str]]:
    """`type_a=f32,ne=[4,5,1,1],k=3` -> {"type_a": ["f32"], "ne": ["[4,5,1,1]"], "k": ["3"]}: commas inside
    brackets stay, and a key printed twice keeps both values (a filter must match each)."""
    out: dict[str, list[str]] = {}
    depth, start = 0, 0
    for i, ch in enumerate(params + ","):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            key, sep, value = params[start:i].partition("=")
            if sep:
                out.setdefault(key.strip(), []).append(value)
            start = i + 1
    return out


def filter_terms(params_regex: str) -> list[list[tuple[str, str]]]:
    r"""The `key=value` terms of a -p regex, one list per top-level alternative.

    Terms are separated by `,`, or by `.*`/`.+` followed by the next `KEY=`, outside groups, character
    classes and escaped brackets (`bs=\[1,1\]` is one term; `type_a=q4_.*` keeps its `.*`); a term is
    `KEY=VALUE` with a literal key, VALUE a regex that must match the case's whole value. Other terms
    (no `=`) are left to the regex itself.
    """
    alternatives: list[list[str]] = [[]]
    term, depth, i, n = "", 0, 0, len(params_regex)
    while i < n:
        ch = params_regex[i]
        if ch == "\\" and i + 1 < n:
            nxt = params_regex[i + 1]
            depth += 1 if nxt == "[" else -1 if nxt == "]" and depth > 0 else 0
            term += params_regex[i:i + 2]
            i += 2
            continue
        if ch == "[":   # a character class: copied whole
            j = i + 1 + (params_regex[i + 1:i + 2] == "^")
            j += params_regex[j:j + 1] == "]"
            while j < n and params_regex[j] != "]":
                j += 2 if params_regex[j] == "\\" else 1
            term += params_regex[i:j + 1]
            i = j + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        gap = GAP_BEFORE_KEY_RE.match(params_regex, i) if ch == "." else None
        if depth == 0 and (ch in ",|" or gap):
            alternatives[-1].append(term)
            term = ""
            if ch == "|":
                alternatives.append([])
            i = gap.end(1) if gap else i + 1
            continue
        term += ch
        i += 1
    alternatives[-1].append(term)
    out = []
    for terms in alternatives:
        pairs = []
        for t in terms:
            m = KEY_VALUE_RE.fullmatch(t.strip().lstrip("^").rstrip("$"))
            if m:
                try:
                    re.compile(m["value"])
                except re.error:
                    continue
                pairs.append((m["key"], m["value"]))
        out.append(pairs)
    return out


def matches_filter(params: str, params_regex: str | None) -> bool:
    """Whether a case's parameters satisfy a -p filter the way its author meant it: the regex finds
    them (as test-backend-ops does) and every `key=value` term of one alternative names a parameter
    of the case and matches its whole value."""
    return case_filter(params_regex)(params)


def case_filter(params_regex: str | None):
    """`matches_filter` for one filter and many cases: the filter is read and compiled once."""
    if not params_regex:
        return lambda params: True
    try:
        search = re.compile(params_regex).search
    except re.error:
        search = None  # std::regex accepted what Python's re does not: the key=value terms still decide
    alternatives = [[(k, re.compile(v)) for k, v in pairs] for pairs in filter_terms(params_regex)]

    def accepts(params: str) -> bool:
        if search is not None and not search(params):
            return False
        values = case_params(params)
        return any(all(k in values and all(v.fullmatch(x) for x in values[k]) for k, v in pairs)
                   for pairs in alternatives)

    return accepts


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


def count_ops(cases: list[Case], backend: str, failing_tests: list[str]) -> list[OpCount]:
    """passed/total per op of the given cases; failures from the `Failing tests:` block."""
    by_op: dict[str, OpCount] = {}
    for case in cases:
        count = by_op.setdefault(case.op, OpCount(case.op, backend, 0, 0, 0, []))
        if case.status in ("passed", "measured"):
            count.passed += 1
            count.total += 1
        elif case.status in ("failed", "incomplete", "unreadable"):
            count.total += 1
            if not failing_tests or case.status != "failed":  # no block (crash): the FAIL lines are all we have
                count.failures.append(case.name + (f": {case.detail}" if case.detail else ""))
        elif case.status == "not-supported":
            count.not_supported += 1
    details = {c.name: c.detail for c in cases if c.status == "failed"}
    for name in failing_tests:
        op = name.split("(", 1)[0]
        count = by_op.setdefault(op, OpCount(op, backend, 0, 0, 0, []))
        count.failures.append(name + (f": {details[name]}" if details.get(name) else ""))
    return list(by_op.values())


def _names(cases: list[Case], n: int = 2) -> str:
    shown = ", ".join(c.name[:120] for c in cases[:n])
    return shown + (f" and {len(cases) - n} more" if len(cases) > n else "")


def judge_backend_ops(output: BackendOpsOutput, backend: str, *, returncode: int | None,
                      signal_name: str | None = None, timed_out: bool = False, raw_text: str = "",
                      mode: str = "test", op: str | None = None, params: str | None = None) -> BackendOpsVerdict:
    """Red unless the requested backend really ran, ran at least one case of `op` whose parameters
    match `params` exactly, and nothing failed, crashed or looked odd."""
    section = output.backend(backend)
    cases = section.cases if section is not None else []
    stopped = bool(timed_out or signal_name)   # the run did not end by itself: what it did not print is no problem
    chosen = _select(cases, op, params)
    problems = [*output.anomalies, *_section_problems(output, backend, section)]
    if timed_out:
        problems.append("timed out")
    elif signal_name:
        problems.append(f"killed by {signal_name}")
    problems += _foreign_problems(cases, chosen.foreign, op, mode)
    if section is not None and not section.skipped:
        problems += _zero_run_problems(chosen, op, params)
        problems += _result_problems(output, section, mode, stopped)
    if not stopped:
        problems += _closing_problems(output)
    if returncode not in (0, None) and not signal_name and not problems:
        problems.append(f"exit {returncode}")
    ops = count_ops(chosen.selected, section.name, [t for t in output.failing_tests if op is None or t.split("(", 1)[0] == op]) \
        if section is not None else []
    if stopped and raw_text:
        problems.append("last output: " + " | ".join(last_lines(raw_text, 5).splitlines()))
    if stopped and ops and not any(c.status == "incomplete" for c in cases):
        # killed between two cases: the counts read so far must not look complete
        last = ops[-1]
        last.total += 1
        last.failures.append(f"run {'timed out' if timed_out else f'killed by {signal_name}'} before finishing")
    device = section.description if section is not None else None
    return BackendOpsVerdict(not problems, ops, problems, chosen.run, chosen.measured, chosen.not_supported, device)


@dataclass
class _Chosen:
    """The section's cases split by what the run asked for (`-o` op, `-p` filter), with the counts of the verdict."""

    foreign: list[Case]     # cases of another op than `-o`
    selected: list[Case]    # of the op, matching the filter exactly
    outside: list[Case]     # of the op, not matching the filter

    @property
    def run(self) -> int:
        return sum(1 for c in self.selected if c.status in RUN_STATUSES)

    @property
    def measured(self) -> int:
        return sum(1 for c in self.selected if c.status == "measured")

    @property
    def not_supported(self) -> int:
        return sum(1 for c in self.selected if c.status == "not-supported")


def _select(cases: list[Case], op: str | None, params: str | None) -> _Chosen:
    # one pass each, no membership test in a list (a 100,000-case log was quadratic: Case compares by value)
    foreign = [c for c in cases if op is not None and c.op != op]
    accepts = case_filter(params)
    selected: list[Case] = []
    outside: list[Case] = []
    for c in cases:
        if op is None or c.op == op:
            (selected if accepts(c.params) else outside).append(c)
    return _Chosen(foreign, selected, outside)


def _section_problems(output: BackendOpsOutput, backend: str, section: BackendSection | None) -> list[str]:
    """The requested backend's section is there, not skipped, with a device; no other backend has results."""
    problems = []
    if section is None:
        names = ", ".join(b.name for b in output.backends) or "none"
        problems.append(f"backend {backend} not found (devices listed: {names})")
    elif section.skipped:
        problems.append(f"backend {backend} was skipped ({section.skipped})")
    elif not section.description:
        problems.append(f"backend {backend} printed no device description")
    for other in output.backends:
        if other.name != backend and (other.cases or other.status or other.summary):
            problems.append(f"results for backend {other.name}, which was not asked for")
    return problems


def _foreign_problems(cases: list[Case], foreign: list[Case], op: str | None, mode: str) -> list[str]:
    """Cases of another op than `-o`, and results of the other mode: neither is this run's."""
    problems = []
    if foreign:
        problems.append(f"{len(foreign)} case(s) of other ops in a `-o {op}` run ({_names(foreign)})")
    # a perf run measures (`N runs - X us/run`), a test run compares (`OK`): the other mode's result
    # is not this run's, and would count as a case that ran
    mode_result = {"test": ("measured", "a test result"), "perf": ("passed", "a perf result")}.get(mode)
    other_mode = [c for c in cases if mode_result and c.status == mode_result[0]]
    if mode_result and other_mode:
        problems.append(f"{len(other_mode)} case result(s) not {mode_result[1]} ({_names(other_mode)}: "
                        f"{other_mode[0].detail[:60]})")
    return problems


def _zero_run_problems(chosen: _Chosen, op: str | None, params: str | None) -> list[str]:
    """No case of the op and filter ran: why, as far as the output tells."""
    if chosen.run:
        return []
    what = "zero tests run" + (f" of {op}" if op else "") + (f" with {params}" if params else "")
    if chosen.not_supported:
        what += f" ({chosen.not_supported} not supported)"
    if any(c.status in RUN_STATUSES for c in chosen.outside):
        what += f"; the cases that ran do not carry each key=value of the filter exactly ({_names(chosen.outside)})"
    return [what]


def _result_problems(output: BackendOpsOutput, section: BackendSection, mode: str, stopped: bool) -> list[str]:
    """The section's own results: its summary agrees with the case lines, nothing failed, every case line has a
    result and finished, and its `Backend X: OK` line is there."""
    problems = []
    cases, backend = section.cases, section.name
    failed = sum(1 for c in cases if c.status == "failed")
    if mode == "test":
        if section.summary is not None:
            passed, total = section.summary
            all_run = sum(c.status in RUN_STATUSES for c in cases)
            parsed_passed = sum(c.status == "passed" for c in cases)
            if total != all_run or passed != parsed_passed:
                problems.append(f"summary says {passed}/{total} tests passed but {parsed_passed}/{all_run} case lines were read")
        elif not stopped:
            problems.append("no `N/M tests passed` summary")
    if failed or output.failing_tests:
        problems.append(f"{max(failed, len(output.failing_tests))} failing tests")
    unreadable = [c for c in cases if c.status == "unreadable"]
    if unreadable:
        problems.append(f"{len(unreadable)} case line(s) without a valid result: {unreadable[0].name[:120]}: "
                        f"{unreadable[0].detail}")
    incomplete = [c for c in cases if c.status == "incomplete"]
    if incomplete:
        problems.append(f"case {incomplete[-1].name} did not finish")
    if section.status is None and not stopped:
        problems.append(f"no `Backend {backend}: OK` line")
    elif section.status == "FAIL" and not failed and not output.failing_tests:
        problems.append(f"`Backend {backend}: FAIL`")
    return problems


def _closing_problems(output: BackendOpsOutput) -> list[str]:
    """A run that ended by itself closes with `N/N backends passed` and `OK`."""
    problems = []
    if output.backends_passed is not None and output.backends_passed[0] != output.backends_passed[1]:
        problems.append(f"{output.backends_passed[0]}/{output.backends_passed[1]} backends passed")
    if output.final == "FAIL":
        problems.append("the run ended with FAIL")
    elif output.final is None:
        problems.append("no closing `N/M backends passed` and `OK` (output cut short)")
    return problems
