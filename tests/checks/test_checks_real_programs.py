"""The arch and mtmd parsers on the real programs of the CI build (scripts/build_test_tools.py builds
test-llama-archs into $PINSET_TEST_LLAMA_BIN, and test-mtmd-impl with --mtmd): what they print today still reads
as the fixtures do, and what runs nothing is still red. The runs go through pinset's runner, as verify's do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinset import runner
from pinset.checks.llama_archs import LOST_TAIL_ATTEMPTS, arch_filter, judge_llama_archs, lost_tail, parse_llama_archs
from pinset.checks.mtmd import judge_mtmd, parse_mtmd

LLAMA_BIN = os.environ.get("PINSET_TEST_LLAMA_BIN")
pytestmark = pytest.mark.slow


def _program(name: str):
    return pytest.mark.skipif(not (LLAMA_BIN and (Path(LLAMA_BIN) / name).exists()),
                              reason=f"PINSET_TEST_LLAMA_BIN has no {name} (scripts/build_test_tools.py builds it"
                                     + (" with --mtmd)" if name == "test-mtmd-impl" else ")"))


# verify runs a clean exit without its Summary again up to LOST_TAIL_ATTEMPTS times (llama.cpp's logger thread is
# not joined at exit: ggml-org/llama.cpp#22142); a CI worker under load lost the whole output of all five once, so
# this test, which checks what the program prints and not the retry policy, tries longer (each run takes ms)
ATTEMPTS = 5 * LOST_TAIL_ATTEMPTS


def archs(arch: str):
    for _ in range(ATTEMPTS):   # as verify: a run that lost its tail at exit is run again
        done = runner.run([str(Path(LLAMA_BIN or "") / "test-llama-archs"), "-a", arch_filter(arch), "-s", "1234",
                           "-b", "CPU"], timeout=600)
        output = parse_llama_archs(done.stdout)
        if not lost_tail(output, done.returncode):
            break
    return judge_llama_archs(output, arch, returncode=done.returncode, timed_out=done.timed_out,
                             signal_name=done.signal_name)


@_program("test-llama-archs")
@pytest.mark.parametrize("arch,ok,said", [("llama", True, "2/2 decoded and matched the CPU"),
                                          ("bert", False, "ran nothing"), ("nosuch", False, "no row")])
def test_test_llama_archs(arch, ok, said):
    verdict = archs(arch)
    if arch == "bert" and "cut short" in verdict.detail:
        # a skipped architecture exits at once, and under CI's load its logger thread printed nothing on every
        # try: the output is lost, never a pass (what matters: running nothing is red either way)
        assert not verdict.ok and "no table printed" in verdict.detail, verdict.detail
        return
    assert verdict.ok == ok and said in verdict.detail, verdict.detail


@_program("test-mtmd-impl")
@pytest.mark.parametrize("args,ok,said", [([], True, "3 test(s), 35 assertion(s) passed"),
                                          (["test_projector_registry"], False, "ran nothing")])
def test_test_mtmd_impl(args, ok, said):
    done = runner.run([str(Path(LLAMA_BIN or "") / "test-mtmd-impl"), *args], timeout=600)
    verdict = judge_mtmd(parse_mtmd(done.stdout), returncode=done.returncode)
    assert verdict.ok == ok and said in verdict.detail, verdict.detail
