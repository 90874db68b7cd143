"""test-mtmd-impl output parser and verdict on real runs (tests/fixtures/mtmd/README.md: how each was captured):
every test, a filter, a filter that matched nothing (exit 0: Unsloth's projector probe on an upstream tree), a
real failing assertion, a run killed mid-test."""

from __future__ import annotations

import pytest

from pinset.checks.mtmd import judge_mtmd, parse_mtmd
from tests.testing import FIXTURES

FIX = FIXTURES / "mtmd"


def run(name: str):
    rc = (FIX / f"{name}.rc").read_text().strip()
    stdout = (FIX / f"{name}.stdout").read_text()
    signal = "SIGABRT" if rc == "ABRT" else None
    return judge_mtmd(parse_mtmd(stdout), returncode=None if signal else int(rc), signal_name=signal, raw_text=stdout)


def test_every_test_passes_with_its_assertions_counted():
    out = parse_mtmd((FIX / "all.stdout").read_text())
    assert [(t.name, t.status, t.details) for t in out.tests] == [
        ("test_image_preprocessor_lfm2", "PASS", "5 assertion(s)"),
        ("test_temporal_merge_grouping", "PASS", "24 assertion(s)"),
        ("test_audio_preprocessor_conformer", "PASS", "6 assertion(s)")]
    assert out.counts == {"tests": 3, "assertions": 35, "failures": 0, "exceptions": 0, "skipped": 0}
    verdict = run("all")
    assert verdict.ok and (verdict.tests, verdict.assertions) == (3, 35)
    assert verdict.detail == "3 test(s), 35 assertion(s) passed"
    assert run("temporal").ok and run("temporal").assertions == 24


def test_a_filter_that_matched_nothing_is_red_though_it_exits_0():
    assert (FIX / "projector-registry-none.rc").read_text().strip() == "0"
    verdict = run("projector-registry-none")
    assert not verdict.ok and verdict.detail == "ran nothing: no test matched the filter"


def test_a_failing_assertion_is_red_naming_it():
    verdict = run("fail-lfm2-tiling")
    assert not verdict.ok
    assert "1 failure(s), 0 exception(s) in test_image_preprocessor_lfm2: ASSERT EQUAL FAILED : tiling for 704x704" \
        in verdict.detail


def test_a_run_cut_short_is_red():
    verdict = run("killed-abrt")
    assert not verdict.ok and "killed by SIGABRT" in verdict.detail
    text = (FIX / "all.stdout").read_text()
    cut = text[:text.index("\ntests ")]
    assert "no closing counts" in judge_mtmd(parse_mtmd(cut), returncode=0).detail


@pytest.mark.parametrize("edit,said", [
    (("tests      : 3", "tests      : 4"), "4 test(s)"),                 # a count the lines do not show
    (("assertions : 35", "assertions : 0"), "ran no assertion"),
    (("skipped    : 0", "skipped    : 3"), "all 3 test(s) skipped"),
])
def test_counts_that_contradict_the_lines_are_red(edit, said):
    text = (FIX / "all.stdout").read_text().replace(*edit)
    verdict = judge_mtmd(parse_mtmd(text), returncode=0)
    assert not verdict.ok and said in verdict.detail, verdict.detail
