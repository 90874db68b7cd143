"""test-llama-archs output parser and verdict on real runs (tests/fixtures/llama-archs/README.md: how each was
captured): a pass, the false passes Unsloth's feature-checks.json warns of (an architecture the harness skips, a
name it does not know: both exit 0), a real FAIL row, a crash mid-row, and the tail llama.cpp's logger drops at exit."""

from __future__ import annotations

import pytest

from pinset.checks.llama_archs import arch_filter, judge_llama_archs, parse_llama_archs
from tests.testing import FIXTURES

FIX = FIXTURES / "llama-archs"


def run(name: str, arch: str):
    rc = (FIX / f"{name}.rc").read_text().strip()
    stdout = (FIX / f"{name}.stdout").read_text()
    signal = "SIGABRT" if rc == "ABRT" else None
    verdict = judge_llama_archs(parse_llama_archs(stdout), arch, returncode=None if signal else int(rc),
                                signal_name=signal, raw_text=stdout)
    return verdict


def test_a_pass_reads_every_row_of_the_architecture():
    out = parse_llama_archs((FIX / "llama-cpu.stdout").read_text())
    assert out.header and out.summary == (2, 0)
    assert [(r.arch, r.device, r.config, r.nmse, r.value, r.roundtrip) for r in out.rows] == [
        ("llama", "AMD EPYC", "Dense", "OK", "0.00e+00", "OK"), ("llama", "AMD EPYC", "MoE", "OK", "0.00e+00", "OK")]
    verdict = run("llama-cpu", "llama")
    assert verdict.ok and (verdict.ran, verdict.passed) == (2, 2)
    assert verdict.detail == "2/2 decoded and matched the CPU on AMD EPYC"
    one = run("gpt-oss-cpu", "gpt-oss")   # a MoE-only architecture, a name with a dash
    assert one.ok and one.ran == 1


@pytest.mark.parametrize("name,arch,said", [
    ("bert-skip-cpu", "bert", "ran nothing: every bert row is SKIP"),                 # exit 0, "no tests executed"
    ("nosuch-cpu", "nosuch", "no row for architecture 'nosuch'"),                      # exit 0, "no tests executed"
    ("qwen3m-regex-cpu", "qwen3m", "rows of other architectures (qwen3moe)"),           # a regex matched another one
    ("fail-dense-cpu", "llama", "AMD EPYC Dense: NMSE FAIL (0.00e+00), roundtrip OK"),  # exit 1
    ("killed-abrt", "qwen3moe", "killed by SIGABRT"),
    ("llama-cpu-lost-tail", "llama", "MoE row cut short"),                              # exit 0, no Summary
])
def test_what_ran_nothing_failed_or_was_cut_short_is_red(name, arch, said):
    verdict = run(name, arch)
    assert not verdict.ok and said in verdict.detail, verdict.detail


def test_the_exit_code_alone_never_passes():
    # the captured runs that exit 0 and prove nothing
    for name, arch in (("bert-skip-cpu", "bert"), ("nosuch-cpu", "nosuch"), ("llama-cpu-lost-tail", "llama")):
        assert (FIX / f"{name}.rc").read_text().strip() == "0"
        assert not run(name, arch).ok
    lost = run("llama-cpu-lost-tail", "llama")
    assert "no Summary line" in lost.detail and lost.ran == 1   # the complete Dense row counted, not passed whole


def test_a_build_without_the_backend_prints_nothing_and_is_red():
    verdict = run("cuda0-missing", "llama")   # -b CUDA0 on the CPU build: "unknown backend device", exit 1
    assert not verdict.ok and "no row for architecture" in verdict.detail


def test_the_summary_must_agree_with_the_rows():
    text = (FIX / "llama-cpu.stdout").read_text().replace("all 2 test(s) passed", "all 3 test(s) passed")
    verdict = judge_llama_archs(parse_llama_archs(text), "llama", returncode=0)
    assert not verdict.ok and "disagrees with the rows" in verdict.detail
    doubled = (FIX / "llama-cpu.stdout").read_text() + "Summary: all 2 test(s) passed\n"
    assert "two Summary lines" in judge_llama_archs(parse_llama_archs(doubled), "llama", returncode=0).detail


def test_the_filter_is_exact_for_names_with_regex_characters():
    assert arch_filter("gpt-oss") == "^gpt-oss$" and arch_filter("a.b+c") == r"^a\.b\+c$"
