"""ctest output parser on real ctest runs (tests/fixtures/ctest/README: how each was captured)."""

from __future__ import annotations

import pytest

from pinset.checks.ctest import judge_ctest, parse_ctest
from tests.testing import FIXTURES

FIX = FIXTURES / "ctest"


def load(name: str) -> str:
    return (FIX / name).read_text()


def test_pass():
    out = parse_ctest(load("ctest-pass.log"))
    assert [(c.name, c.status) for c in out.cases] == [("test-pass", "passed")]
    assert (out.total, out.failed) == (1, 0)
    verdict = judge_ctest(out, returncode=0, expected="test-pass")
    assert verdict.ok and verdict.cases == 1


@pytest.mark.parametrize("name,status,words", [
    ("ctest-fail.log", "failed", "***Failed"),
    ("ctest-abort.log", "crashed", "Subprocess aborted"),
    ("ctest-segv.log", "crashed", "SegFault"),
    ("ctest-timeout.log", "timeout", "***Timeout"),
    ("ctest-missing.log", "not-run", "***Not Run"),
])
def test_red_outcomes(name, status, words):
    out = parse_ctest(load(name))
    assert len(out.cases) == 1 and out.cases[0].status == status
    verdict = judge_ctest(out, returncode=8)
    assert not verdict.ok and words in verdict.detail


def test_no_test_matched_is_red_although_ctest_exits_0():
    out = parse_ctest(load("ctest-none.log"))
    assert out.no_tests and not out.cases
    verdict = judge_ctest(out, returncode=0, expected="test-chat")
    assert not verdict.ok and "zero tests run" in verdict.detail


def test_the_named_test_must_be_the_one_that_ran():
    verdict = judge_ctest(parse_ctest(load("ctest-pass.log")), returncode=0, expected="test-chat")
    assert not verdict.ok and "did not run" in verdict.detail


def test_llama_cpp_test_chat_pass():
    out = parse_ctest(load("test-chat-pass.log"))
    assert [(c.name, c.status) for c in out.cases] == [("test-chat", "passed")] and out.total == 1
    assert judge_ctest(out, returncode=0, expected="test-chat").ok


def test_cmake4_summary_line_on_the_h200():
    # ctest of CMake 4.4.3 (the H200 image) writes "100% tests passed out of 1"
    out = parse_ctest(load("test-chat-pass-h200-cmake4.log"))
    assert (out.total, out.failed) == (1, 0) and out.cases[0].name == "test-chat"
    assert judge_ctest(out, returncode=0, expected="test-chat").ok


def test_verbose_output_is_read_per_test():
    # ctest -V: the test's own lines ("8: [chat] All tests passed!"), ctest's header lines not counted
    out = parse_ctest(load("ctest-verbose-test-chat.log"))
    assert [(c.name, c.status, c.printed) for c in out.cases] == [("test-chat", "passed", 1)]
    assert judge_ctest(out, returncode=0, expected="test-chat", require_output=True).ok
    fail = parse_ctest(load("ctest-verbose-fail.log"))
    assert [(c.status, c.printed) for c in fail.cases] == [("failed", 1)]


@pytest.mark.parametrize("name", ["ctest-verbose-silent.log", "ctest-verbose-silent-env.log", "test-chat-pass.log"])
def test_a_test_that_printed_nothing_is_no_pass_where_output_is_required(name):
    # test-chat always prints (its closing "[chat] All tests passed!"); one that exits 0 without a line ran
    # nothing we can see. Without -V (the older captures) ctest shows no test output at all: not readable either.
    out = parse_ctest(load(name))
    assert len(out.cases) == 1 and out.cases[0].status == "passed" and out.cases[0].printed == 0
    verdict = judge_ctest(out, returncode=0, expected=out.cases[0].name, require_output=True)
    assert not verdict.ok and "printed nothing" in verdict.detail
    assert judge_ctest(out, returncode=0, expected=out.cases[0].name).ok   # a feature check's test may be silent
