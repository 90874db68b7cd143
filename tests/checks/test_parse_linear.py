"""The output parsers stay linear in the number of lines (issue #20 §4): counted, not timed.

Each parser runs under `sys.settrace` on a log of n and of 2n lines made from captured output; the number of
Python lines it executes must grow like n (ratio near 2, a quadratic step gives near 4). The count is the same
on every run and every machine, so the test cannot flake on a loaded host. benchmarks/parse_speed.py times a
100,000-case log.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from pinset.checks import backend_ops
from pinset.checks.backend_ops import judge_backend_ops, parse_backend_ops
from pinset.checks.ctest import judge_ctest, parse_ctest
from pinset.measures.llama_bench import parse_jsonl
from pinset.measures.perplexity import parse_perplexity
from tests.testing import FIXTURES

FIX = FIXTURES
LINEAR = 2.3   # events(2n) / events(n): linear code with a constant part stays at or under 2


def traced_lines(fn) -> int:
    """Python lines executed by fn() (every frame, library code included)."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(old)
    return count


def backend_ops_log(cases: int, name: str = "h200-test-MUL_MAT.log") -> str:
    """A log of `cases` case lines repeated from a captured test-backend-ops run (its log lines between
    cases kept), with the captured header, summary and closing lines. Every case differs from the others."""
    lines = (FIX / "backend-ops" / name).read_text(encoding="utf-8").split("\n")
    first = next(i for i, line in enumerate(lines) if backend_ops.CASE_RE.search(line))
    last = max(i for i, line in enumerate(lines) if backend_ops.CASE_RE.search(line))
    body = lines[first:last + 1]
    out, n, rep = [], 0, 0
    while n < cases:
        for line in body:   # each repetition with other sizes: distinct cases, as in a real run
            out.append(re.sub(r"([(,]m=)(\d+)", lambda m: f"{m[1]}{int(m[2]) + 100_000 * rep}", line, count=1))
            if backend_ops.CASE_RE.search(line) and line.rstrip().endswith(("OK", "TFLOPS", "GB/s")):
                n += 1
                if n == cases:
                    break
        rep += 1
    tail = [re.sub(r"^  \d+/\d+ tests passed", f"  {cases}/{cases} tests passed", line) for line in lines[last + 1:]]
    return "\n".join(lines[:first] + out + tail)


def judged(text: str, **kw):
    return lambda: judge_backend_ops(parse_backend_ops(text), "CUDA0", returncode=0, **kw)


@pytest.mark.parametrize("kw", [{}, {"op": "MUL_MAT"}, {"op": "MUL_MAT", "params": "type_a=f16"}],
                         ids=["all", "-o", "-o -p"])
def test_backend_ops_judgement_is_linear(kw):
    small, large = backend_ops_log(1500), backend_ops_log(3000)
    verdict = judged(large, **kw)()
    assert verdict.ok and (verdict.cases_run == 3000 if "params" not in kw else 0 < verdict.cases_run < 3000)
    ratio = traced_lines(judged(large, **kw)) / traced_lines(judged(small, **kw))
    assert ratio <= LINEAR, f"test-backend-ops judgement grows {ratio:.2f}x for 2x the cases"


def test_backend_ops_perf_is_linear():
    small, large = backend_ops_log(1000, "h200-perf-mm-iq1_s.log"), backend_ops_log(2000, "h200-perf-mm-iq1_s.log")
    assert judged(large, mode="perf", op="MUL_MAT")().measured == 2000
    ratio = traced_lines(judged(large, mode="perf", op="MUL_MAT")) / traced_lines(judged(small, mode="perf", op="MUL_MAT"))
    assert ratio <= LINEAR


def test_backend_ops_filter_is_read_once(monkeypatch):
    """The -p filter is split into terms once per judgement, not once per case."""
    calls = []
    real = backend_ops.filter_terms
    monkeypatch.setattr(backend_ops, "filter_terms", lambda regex: calls.append(regex) or real(regex))
    judged(backend_ops_log(500), op="MUL_MAT", params="type_a=f16")()
    assert len(calls) == 1


def test_case_lines_are_never_compared_by_value(monkeypatch):
    """A membership test of a case in a list compares whole dataclasses, one per element: quadratic."""
    compared = []
    monkeypatch.setattr(backend_ops.Case, "__eq__", lambda self, other: compared.append(1) or self is other)
    for kw in ({}, {"op": "MUL_MAT"}, {"op": "MUL_MAT", "params": "type_a=f16"}):
        judged(backend_ops_log(300), **kw)()
    assert not compared


def test_many_sections_are_linear():
    """A hostile log of many backend sections: the second-section check is a set lookup, not a scan."""
    def log(n):
        return "\n".join(f"Backend {i}/{n}: DEV{i}\n  Skipping" for i in range(1, n + 1)) + "\n0/0 backends passed\nOK\n"
    small, large = log(1000), log(2000)
    ratio = traced_lines(lambda: parse_backend_ops(large)) / traced_lines(lambda: parse_backend_ops(small))
    assert ratio <= LINEAR


def test_ctest_is_linear():
    def log(n):
        rows = [f"{i}/{n} Test #{i}: test-{i} ........................   Passed    0.00 sec" for i in range(1, n + 1)]
        return "Test project /tmp/b\n" + "\n".join(rows) + f"\n\n100% tests passed, 0 tests failed out of {n}\n"
    small, large = log(1000), log(2000)
    assert judge_ctest(parse_ctest(large), returncode=0).ok
    ratio = (traced_lines(lambda: judge_ctest(parse_ctest(large), returncode=0))
             / traced_lines(lambda: judge_ctest(parse_ctest(small), returncode=0)))
    assert ratio <= LINEAR


def test_llama_bench_jsonl_is_linear():
    row = json.loads((FIX / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl").read_text().splitlines()[0])
    small, large = "\n".join([json.dumps(row)] * 300), "\n".join([json.dumps(row)] * 600)
    assert len(parse_jsonl(large)) == 600
    assert traced_lines(lambda: parse_jsonl(large)) / traced_lines(lambda: parse_jsonl(small)) <= LINEAR


def test_perplexity_kld_is_linear():
    stdout = (FIX / "perplexity" / "kld-iq1m-vs-f16.stdout").read_text(encoding="utf-8")
    stderr = (FIX / "perplexity" / "kld-iq1m-vs-f16.stderr").read_text(encoding="utf-8")
    rows = [line for line in stdout.splitlines() if re.match(r"^\s+\d+\s+\d", line)]
    at = stdout.index(rows[-1]) + len(rows[-1])

    def log(n):
        return stdout[:stdout.index(rows[0])] + "\n".join(rows[i % len(rows)] for i in range(n)) + stdout[at:]
    small, large = log(2000), log(4000)
    assert parse_perplexity(large, stderr).kld is not None
    ratio = traced_lines(lambda: parse_perplexity(large, stderr)) / traced_lines(lambda: parse_perplexity(small, stderr))
    assert ratio <= LINEAR


def test_case_lines_are_matched_like_the_case_regex():
    """match_case (linear in the line) finds what CASE_RE.search finds, on every captured line and on
    random lines made of the characters that matter."""
    import random

    from pinset.checks.backend_ops import CASE_RE, match_case

    def same(line):
        m, c = CASE_RE.search(line), match_case(line)
        if m is None:
            return c is None
        return c is not None and (m["op"], m["params"], m["result"], m.start()) == (c.op, c.params, c.result, c.start)

    lines = [line for path in sorted((FIX / "backend-ops").glob("*.log")) for line in path.read_text(errors="replace").split("\n")]
    assert len(lines) > 5000 and all(same(line) for line in lines)
    rng = random.Random(20)
    pieces = ["A", "B", "_", "1", "(", ")", ":", " ", "\t", "x", "): ", "OP(", " MUL_MAT(", "=", ",", "\r"]
    for _ in range(20_000):
        line = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert same(line), repr(line)


def test_a_long_line_is_not_read_with_the_backtracking_regex(monkeypatch):
    """CASE_RE.search backtracks over the rest of the line for every candidate op name (a 32,000-character
    line of `A(x ` took 5 s, a megabyte hours): the parser and the progress counter never call it."""
    class Refuse:
        def search(self, *a):
            raise AssertionError("CASE_RE.search used")
    monkeypatch.setattr(backend_ops, "CASE_RE", Refuse())
    line = "  " + "A(x " * 250_000
    out = parse_backend_ops(f"Backend 1/1: CPU\n  Device description: x\n{line}\n  MUL_MAT(k=1): OK\n")
    assert [c.op for c in out.backends[0].cases] == ["MUL_MAT"]

    class Progress:
        def update(self, **kw):
            pass
    backend_ops.case_counter(Progress())(line)


def test_ctest_result_lines_are_matched_like_the_result_regex(monkeypatch):
    """match_result (linear) finds what RESULT_RE.match finds; the parser never runs the regex, whose lazy
    status between two runs of blanks is cubic on a line that is no result (400 spaces: 0.5 s)."""
    import random

    from pinset.checks import ctest
    lines = [line for path in sorted((FIX / "ctest").glob("*.log")) for line in path.read_text(errors="replace").splitlines()]
    rng = random.Random(3)
    pieces = [" ", "\t", ".", "1", "2.5", " sec", "sec", "x", "Passed", "***Failed", "\u00a0", "\x1c"]
    lines += ["1/2 Test #3: name " + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 9))) for _ in range(20_000)]
    for line in lines:
        m = ctest.RESULT_RE.match(line)
        assert ctest.match_result(line) == (m and {k: m[k] for k in ("i", "n", "num", "name", "status", "sec")}), repr(line)

    class Refuse:
        def match(self, *a):
            raise AssertionError("RESULT_RE.match used")
    monkeypatch.setattr(ctest, "RESULT_RE", Refuse())
    out = parse_ctest("Test project /b\n1/1 Test #1: t " + " " * 100_000 + "x\n1/1 Test #1: t ....   Passed    0.01 sec\n")
    assert [c.name for c in out.cases] == ["t"]


def test_perplexity_blank_runs_are_matched_like_before():
    """The statistics patterns were rewritten without two blank runs side by side (`\\s*:?\\s*`, `^\\s*` over blank
    lines: quadratic); they find the same values as the old patterns on random blocks."""
    import random

    from pinset.measures import perplexity as P
    old_end = r"[ \t]*%?[ \t]*(?=\r?\n)"
    rng = random.Random(5)
    pieces = [" ", "\t", "\n", ":", "%", "1.5", "± ", "Mean    KLD", "Maximum KLD", "99.0%   KLD", "x", "\r\n", "\x0c", "-2e3"]
    for _ in range(20_000):
        block = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        old_v = re.findall(rf"^Mean\s+KLD\s*:?\s*{P.NUM}{P.PM}{P.NUM}{old_end}", block, re.M)
        new = P._value_err(block, r"Mean\s+KLD")
        assert (new and (new.value, new.err)) == ((float(old_v[0][0]), float(old_v[0][1])) if len(old_v) == 1 else None)
        old_p = [(P._PCT_KEYS.get(m.group(1), m.group(1).rstrip("%")), float(m.group(2))) for m in
                 re.finditer(rf"^\s*(Maximum|Minimum|Median|\d+\.\d+%)\s+KLD:\s*{P.NUM}{old_end}", block, re.M)]
        expected = {} if len({k for k, _ in old_p}) < len(old_p) else dict(old_p)
        assert P._percentiles(block, "KLD") == expected, repr(block)


def test_llama_archs_is_linear():
    from pinset.checks.llama_archs import judge_llama_archs, parse_llama_archs

    text = (FIX / "llama-archs" / "llama-cpu.stdout").read_text()
    head, rows, tail = text.split("\n")[:2], text.split("\n")[2:4], text.split("\n")[4:]

    def log(n):
        return "\n".join(head + [rows[i % 2] for i in range(n)] + [f"Summary: all {n} test(s) passed", *tail[1:]])

    small, large = log(1000), log(2000)
    assert judge_llama_archs(parse_llama_archs(large), "llama", returncode=0).ran == 2000
    ratio = (traced_lines(lambda: judge_llama_archs(parse_llama_archs(large), "llama", returncode=0))
             / traced_lines(lambda: judge_llama_archs(parse_llama_archs(small), "llama", returncode=0)))
    assert ratio <= LINEAR


def test_mtmd_is_linear():
    from pinset.checks.mtmd import judge_mtmd, parse_mtmd

    def log(n):
        rows = [f"test_{i}\ntest_{i} (3 assertion(s))" + " " * 40 + "[PASS]" for i in range(n)]
        return "\n".join(rows) + f"\n\ntests      : {n}\nassertions : {3 * n}\nfailures   : 0\nexceptions : 0\nskipped    : 0\n"

    small, large = log(1000), log(2000)
    assert judge_mtmd(parse_mtmd(large), returncode=0).ok
    ratio = (traced_lines(lambda: judge_mtmd(parse_mtmd(large), returncode=0))
             / traced_lines(lambda: judge_mtmd(parse_mtmd(small), returncode=0)))
    assert ratio <= LINEAR
