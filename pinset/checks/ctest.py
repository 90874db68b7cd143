"""ctest's console output -> per-test results, and the verdict.

Green needs at least one result line, every one `Passed`, and ctest's own closing count agreeing:
"100% tests passed, 0 tests failed out of N" with N the result lines read. ctest that found no test
("No tests were found!!!", exit 0), a count of zero, a missing count (cut short) or a count that
disagrees with the lines is red.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pinset.checks.text import strip_ansi

# "1/1 Test #23: test-chat ........................   Passed    5.21 sec"
# "1/1 Test #23: test-chat ........................***Failed    0.12 sec"
# "1/1 Test #2: abort .............................Subprocess aborted***Exception:   0.01 sec"
RESULT_RE = re.compile(   # the definition of a result line; parse_ctest reads it with match_result
    r"^\s*(?P<i>\d+)/(?P<n>\d+) Test\s+#(?P<num>\d+): (?P<name>\S+) \.*\s*(?P<status>.*?)\s+(?P<sec>[\d.]+) sec\s*$")
# CMake 3: "100% tests passed, 0 tests failed out of 1"; CMake 4 drops the zero: "100% tests passed out of 1"
TOTAL_RE = re.compile(r"^(?P<pct>\d+)% tests passed(?:, (?P<failed>\d+) tests? failed)? out of (?P<total>\d+)")
NO_TESTS_RE = re.compile(r"^No tests were found")
_RESULT_HEAD_RE = re.compile(r"^\s*(?P<i>\d+)/(?P<n>\d+) Test\s+#(?P<num>\d+): (?P<name>\S+) ")
_SECONDS_CHARS = frozenset("0123456789.")


def match_result(line: str) -> dict[str, str] | None:
    """What `RESULT_RE.match(line)` finds, in linear time: the regex's lazy status between two runs of
    spaces backtracks cubically on a line that is no result (400 spaces took 0.5 s, 5,000 minutes)."""
    head = _RESULT_HEAD_RE.match(line)
    if head is None:
        return None
    rest = line[head.end():].lstrip(".")
    body = rest.lstrip()
    gave_space = len(body) < len(rest)        # the `\s*` after the dots can give back the `\s+` before sec
    body = body.rstrip()
    if not body.endswith(" sec"):
        return None
    body = body[:-4]
    start = len(body)
    while start > 0 and body[start - 1] in _SECONDS_CHARS:
        start -= 1
    before, sec = body[:start], body[start:]
    if not sec or not (before[-1:].isspace() or (not before and gave_space)):
        return None
    return {**head.groupdict(), "status": before.rstrip(), "sec": sec}
# ctest -V: "8: [chat] All tests passed!" is a line test #8 printed. ctest writes its own header lines under
# the same prefix: these, and the indented variables under "Environment variables:".
VERBOSE_RE = re.compile(r"^(?P<num>\d+): ?(?P<text>.*)$")
HEADER_LINES = ("Test command:", "Working Directory:", "Environment variables:", "Environment variable modifications:",
                "Test timeout computed to be:")


@dataclass
class CtestCase:
    name: str
    status: str        # passed | failed | timeout | crashed | not-run | skipped
    raw_status: str    # ctest's own words ("***Failed", "Subprocess aborted***Exception:")
    seconds: float
    index: int = 0     # the i of "i/N Test #..."
    of: int = 0        # the N
    number: int = 0    # the #num
    printed: int = 0   # non-blank lines the test itself printed (ctest -V), 0 when ctest showed none


@dataclass
class CtestOutput:
    cases: list[CtestCase] = field(default_factory=list)
    total: int | None = None
    failed: int | None = None
    percent: int | None = None
    no_tests: bool = False
    summaries: int = 0   # closing count lines read (one in a real run)


# a test's result as ctest printed it (its own vocabulary, not the gates' statuses), spelled here once
PASSED, SKIPPED, TIMEOUT, NOT_RUN, CRASHED, FAILED = "passed", "skipped", "timeout", "not-run", "crashed", "failed"


def _status(raw: str) -> str:
    text = raw.strip()
    if text == "Passed":
        return PASSED
    if "Skipped" in text:
        return SKIPPED
    if "Timeout" in text:
        return TIMEOUT
    if "Not Run" in text or "Unable to find" in text:
        return NOT_RUN
    if "Exception" in text or "aborted" in text.lower() or "SegFault" in text:
        return CRASHED
    return FAILED


def parse_ctest(text: str) -> CtestOutput:
    out = CtestOutput()
    printed: dict[int, int] = {}
    in_variables: set[int] = set()   # tests whose "Environment variables:" block is being listed
    for line in strip_ansi(text).splitlines():
        m = VERBOSE_RE.match(line)
        if m:
            num, said = int(m["num"]), m["text"]
            if said.startswith(HEADER_LINES):
                (in_variables.add if said.startswith("Environment variable") else in_variables.discard)(num)
            elif num in in_variables and said.startswith(" "):
                pass
            elif said.strip():
                in_variables.discard(num)
                printed[num] = printed.get(num, 0) + 1
            continue
        found = match_result(line)
        if found:
            out.cases.append(CtestCase(found["name"], _status(found["status"]), found["status"].strip(), float(found["sec"]),
                                       int(found["i"]), int(found["n"]), int(found["num"])))
            continue
        m = TOTAL_RE.match(line.strip())
        if m:
            out.total, out.failed, out.percent = int(m["total"]), int(m["failed"] or 0), int(m["pct"])
            out.summaries += 1
            continue
        if NO_TESTS_RE.match(line.strip()):
            out.no_tests = True
    for case in out.cases:
        case.printed = printed.get(case.number, 0)
    return out


@dataclass
class CtestVerdict:
    ok: bool
    cases: int
    problems: list[str]

    @property
    def detail(self) -> str | None:
        return "; ".join(self.problems) if self.problems else None


def judge_ctest(output: CtestOutput, *, returncode: int | None, timed_out: bool = False,
                expected: str | None = None, require_output: bool = False) -> CtestVerdict:
    """Green only when ≥ 1 test ran (the named one, if given) and every test passed; with `require_output`
    (a test known to print, like test-chat), the test must also have printed a line (ctest -V): exit 0
    without a word is a stub or a test that ran nothing."""
    problems: list[str] = []
    if timed_out:
        problems.append("ctest timed out")
    if output.no_tests or not output.cases:
        problems.append(f"no test matched{f' {expected!r}' if expected else ''} (zero tests run)")
    if expected and output.cases and not any(c.name == expected for c in output.cases):
        problems.append(f"test {expected!r} did not run (ran: {', '.join(c.name for c in output.cases)})")
    for case in output.cases:
        if case.status != PASSED:
            problems.append(f"{case.name}: {case.raw_status} ({case.status})")
        elif require_output and not case.printed:
            problems.append(f"{case.name} passed but printed nothing (exit 0 without output: no test seen to run)")
    if output.total is not None and output.total != len(output.cases):
        problems.append(f"ctest counted {output.total} tests but {len(output.cases)} result lines were read")
    if output.summaries == 0 and not output.no_tests and not timed_out:
        problems.append("no `N% tests passed ... out of N` line (ctest did not finish)")
    elif output.summaries > 1:
        problems.append(f"{output.summaries} `tests passed` lines")
    elif output.total is not None and (output.failed or output.percent != 100):
        problems.append(f"ctest says {output.percent}% tests passed, {output.failed} failed out of {output.total}")
    names = [c.name for c in output.cases]
    if len(set(names)) != len(names) or any(c.of != len(output.cases) for c in output.cases) \
            or sorted(c.index for c in output.cases) != list(range(1, len(output.cases) + 1)):
        problems.append("result lines do not add up (a test twice, or `i/N` with another N)")
    if returncode not in (0, None) and not problems:
        problems.append(f"ctest exit {returncode}")
    return CtestVerdict(not problems, len(output.cases), problems)
