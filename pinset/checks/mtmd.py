"""test-mtmd-impl output -> its tests and closing counts, and the verdict of an `mtmd` check.

test-mtmd-impl (llama.cpp tests/test-mtmd-impl.cpp with tests/testing.h, in the trees llama-cpp-python 0.3.36
vendors, 0c1e57098) runs libmtmd's internal unit tests, each registered by name, those whose whole name matches
the filter given as an argument (std::regex_match). Per test it prints the name, the failed assertions
("ASSERTION FAILED : msg", "ASSERT EQUAL FAILED : msg"), then a result line padded to column 80:

    test_temporal_merge_grouping (24 assertion(s))                                  [PASS]
    test_x (1 of 5 assertion(s) failed)                                             [FAIL]

and at the end

    tests      : 3
    assertions : 45
    failures   : 0
    exceptions : 0
    skipped    : 0

exiting 1 when an assertion failed. A filter that matches no test prints "tests      : 0" and exits 0 (Unsloth's
feature-checks.json `_doc`: "a probe that exits 0 having run nothing is a failure"). The verdict needs the closing
counts, at least one test run and not skipped, at least one assertion, no failure or exception, a result line per
test, and a clean exit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pinset.checks.text import last_lines, strip_ansi

STATUS_RE = re.compile(r"\s\[(?P<status>PASS|FAIL|SKIP)\]\s*$")   # a result line's end: the status at column 80
COUNT_RE = re.compile(r"^(?P<key>tests|assertions|failures|exceptions|skipped)\s+: (?P<value>\d+)\s*$")
COUNT_KEYS = ("tests", "assertions", "failures", "exceptions", "skipped")


@dataclass
class MtmdTest:
    name: str
    status: str        # PASS | FAIL | SKIP
    details: str = ""  # "24 assertion(s)", "1 of 5 assertion(s) failed", a skip reason


@dataclass
class MtmdOutput:
    tests: list[MtmdTest] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)   # the closing block
    failed_lines: list[str] = field(default_factory=list)  # ASSERTION FAILED / UNHANDLED EXCEPTION lines
    anomalies: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return all(k in self.counts for k in COUNT_KEYS)


def parse_mtmd(text: str) -> MtmdOutput:
    out = MtmdOutput()
    for raw in strip_ansi(text).splitlines():
        line = raw.rstrip()
        count = COUNT_RE.match(line)
        if count:
            if count["key"] in out.counts:
                out.anomalies.append(f"two {count['key']} counts")
            out.counts[count["key"]] = int(count["value"])
            continue
        result = _result(line)
        if result:
            out.tests.append(result)
            continue
        if re.match(r"^\s*(ASSERTION FAILED|ASSERT EQUAL FAILED|UNHANDLED EXCEPTION)\b", line):
            out.failed_lines.append(line.strip())
    return out


def _result(line: str) -> MtmdTest | None:
    """`NAME (DETAILS)   [STATUS]` (testing.h print_result): the details hold parentheses themselves
    ("1 of 5 assertion(s) failed"), a name none (a test's name, or "test #N")."""
    end = STATUS_RE.search(line)
    if end is None:
        return None
    head = line[:end.start()].rstrip()
    name, details = head.strip(), ""
    if head.endswith(")") and " (" in head:
        cut = head.index(" (")
        name, details = head[:cut].strip(), head[cut + 2:-1]
    return MtmdTest(name, end["status"], details) if name else None


@dataclass
class MtmdVerdict:
    ok: bool
    problems: list[str]
    tests: int        # run and not skipped
    assertions: int

    @property
    def detail(self) -> str:
        if self.problems:
            return "; ".join(self.problems)
        return f"{self.tests} test(s), {self.assertions} assertion(s) passed"


def judge_mtmd(output: MtmdOutput, *, returncode: int | None, timed_out: bool = False, signal_name: str | None = None,
               raw_text: str = "") -> MtmdVerdict:
    counts = output.counts
    problems = list(output.anomalies)
    stopped = timed_out or bool(signal_name)
    if timed_out:
        problems.append("timed out")
    elif signal_name:
        problems.append(f"killed by {signal_name}")
    run = counts.get("tests", 0) - counts.get("skipped", 0)
    if not output.complete:
        if not stopped:
            problems.append("no closing counts (cut short, or not test-mtmd-impl's output)")
    elif counts["tests"] == 0:
        problems.append("ran nothing: no test matched the filter")
    elif run <= 0:
        problems.append(f"ran nothing: all {counts['tests']} test(s) skipped")
    elif counts["assertions"] == 0:
        problems.append(f"ran no assertion ({counts['tests']} test(s))")
    else:
        if counts["failures"] or counts["exceptions"]:
            failed = [t.name for t in output.tests if t.status == "FAIL"]
            problems.append(f"{counts['failures']} failure(s), {counts['exceptions']} exception(s)"
                            + (f" in {', '.join(failed[:3])}" if failed else "")
                            + (f": {output.failed_lines[0]}" if output.failed_lines else ""))
        if len(output.tests) != counts["tests"]:
            problems.append(f"{len(output.tests)} result line(s) for {counts['tests']} test(s)")
        if counts["skipped"] != sum(1 for t in output.tests if t.status == "SKIP"):
            problems.append("the skipped count disagrees with the result lines")
    if returncode not in (0, None) and not signal_name and not problems:
        problems.append(f"exit {returncode}")
    if stopped and raw_text:
        problems.append("last output: " + " | ".join(last_lines(raw_text, 4).splitlines()))
    return MtmdVerdict(not problems, problems, max(run, 0), counts.get("assertions", 0))
