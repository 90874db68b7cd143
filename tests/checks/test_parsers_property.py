"""Property-based tests of every program-output parser (issue 12 §2).

For each parser: arbitrary text never passes and never raises anything but pinset's own error; and
mutations of the real captured outputs in tests/fixtures/ (truncated, device line dropped, op name
changed, `not OK` injected, a number replaced by nan/inf) never pass. Examples are kept modest so
the suite stays fast on a small machine.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from pinset.checks.backend_ops import judge_backend_ops, parse_backend_ops
from pinset.checks.ctest import judge_ctest, parse_ctest
from pinset.checks.nvidia_smi import VALUE_RE, parse_nvidia_smi
from pinset.errors import BenchParseError
from pinset.measures.llama_bench import MAX_TOKENS_PER_SECOND, parse_jsonl, run_problem
from pinset.measures.perplexity import base_problem, kld_problem, parse_perplexity
from tests.testing import FIXTURES

FIX = FIXTURES
SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# text that looks like program output: printable and control characters, ANSI escapes, the markers
ARBITRARY = st.text(alphabet=st.characters(codec="utf-8"), max_size=2000) | st.lists(
    st.sampled_from(["OK", "FAIL", "not OK", "  Backend CUDA0: OK", "Backend 1/1: CUDA0", "1/1 backends passed",
                     "  MUL_MAT(type_a=iq1_m): OK", "  1/1 tests passed", "\x1b[1;32mOK\x1b[0m", "Passed", "nan",
                     "100% tests passed, 0 tests failed out of 1", "No tests were found!!!", "Mean    KLD: 0.1 ± 0.01",
                     "====== KL divergence statistics ======", '{"avg_ts": 1e400}', "{", "}", "", "\r", "\t"]),
    max_size=40).map("\n".join)
NON_FINITE = st.sampled_from(["nan", "-nan", "inf", "-inf", "NaN", "INF", "Infinity"])


def load(rel: str) -> str:
    return (FIX / rel).read_text(encoding="utf-8", errors="replace")


def number_spans(text: str, pattern: str) -> list[tuple[int, int]]:
    """Positions of the numbers inside the matches of pattern (multiline)."""
    spans = []
    for m in re.finditer(pattern, text, re.M):
        spans += [(m.start() + n.start(), m.start() + n.end()) for n in re.finditer(r"\d+(?:\.\d+)?", m.group(0))]
    return spans


def cut_before_end(text: str, data) -> str:
    return text[:data.draw(st.integers(0, len(text.rstrip()) - 1), label="cut")]


# --- test-backend-ops ------------------------------------------------------------------------------

# (fixture, backend, op, mode): real runs that pass as they are
BACKEND_OPS_PASSES = [("backend-ops/h200-test-PAD.log", "CUDA0", "PAD", "test"),
                      ("backend-ops/cpu-test-PAD.log", "CPU", "PAD", "test"),
                      ("backend-ops/cpu-test-MUL_MAT-iq1-pass.log", "CPU", "MUL_MAT", "test"),
                      ("backend-ops/h200-perf-mm-iq1_s.log", "CUDA0", "MUL_MAT", "perf")]


def backend_ops_ok(text: str, backend: str, op: str, mode: str, params: str | None = None) -> bool:
    return judge_backend_ops(parse_backend_ops(text), backend, returncode=0, mode=mode, op=op, params=params).ok


@pytest.mark.parametrize("fixture,backend,op,mode", BACKEND_OPS_PASSES)
def test_backend_ops_fixtures_pass_unchanged(fixture, backend, op, mode):
    assert backend_ops_ok(load(fixture), backend, op, mode)


@SETTINGS
@given(text=ARBITRARY, backend=st.sampled_from(["CUDA0", "CPU"]), mode=st.sampled_from(["test", "perf"]))
def test_backend_ops_arbitrary_text_never_passes(text, backend, mode):
    assert not backend_ops_ok(text, backend, "MUL_MAT", mode)


def _case_lines(text: str) -> list[re.Match]:
    return list(re.finditer(r"^(?:\x1b\[[0-9;]*m)?  ([A-Z][A-Z0-9_]*)\((.*)\): (.*)$", text, re.M))


@SETTINGS
@given(case=st.sampled_from(BACKEND_OPS_PASSES), data=st.data())
def test_backend_ops_mutations_never_pass(case, data):
    fixture, backend, op, mode = case
    text = load(fixture)
    cases = _case_lines(text)
    # a case printed twice is legitimate (test-backend-ops has duplicate cases); only the test-mode summary
    # can tell an extra line from a real one
    how = data.draw(st.sampled_from(["truncate", "drop device", "op name", "not OK", "number"]
                                    + (["duplicate case"] if mode == "test" else [])))
    if how == "truncate":
        text = cut_before_end(text, data)
    elif how == "drop device":
        text = re.sub(r"^  Device description: .*\n", "", text, flags=re.M)
    elif how in ("op name", "not OK", "duplicate case"):
        m = data.draw(st.sampled_from(cases))
        if how == "op name":
            other = data.draw(st.from_regex(r"[A-Z][A-Z0-9_]{0,12}", fullmatch=True).filter(lambda o: o != op))
            line = m.group(0).replace(f"  {op}(", f"  {other}(", 1)
        elif how == "not OK":
            line = m.group(0)[:m.start(3) - m.start()] + data.draw(st.sampled_from(["not OK", "OK not", "NOT OK"]))
        else:
            line = m.group(0) + "\n" + m.group(0)
        text = text[:m.start()] + line + text[m.end():]
    else:   # a number of the summary or of a perf measurement
        spans = number_spans(text, r"\d+/\d+ tests passed|\d+/\d+ backends passed|\d+ runs - .*$")
        start, end = data.draw(st.sampled_from(spans))
        text = text[:start] + data.draw(NON_FINITE) + text[end:]
    assert not backend_ops_ok(text, backend, op, mode)


@SETTINGS
@given(value=st.from_regex(r"[a-z0-9_]{1,12}", fullmatch=True), prefix=st.sampled_from(["", "x", "_"]),
       suffix=st.sampled_from(["", "_xyz", "0"]))
def test_backend_ops_params_match_only_the_exact_value(value, prefix, suffix):
    # a case whose type_a merely contains the filter's value (or whose other key carries it) is not counted
    assume(prefix or suffix)
    case = f"  MUL_MAT(type_a={prefix}{value}{suffix},type_b=f32,{prefix or 'x'}type_a={value},m=16): OK"
    text = load("backend-ops/cpu-test-PAD.log")
    text = re.sub(r"^  PAD\(.*\n", "", text, flags=re.M).replace("  34/34 tests passed", f"{case}\n  1/1 tests passed")
    assert backend_ops_ok(text, "CPU", "MUL_MAT", "test") or "\x1b" in text
    assert not backend_ops_ok(text, "CPU", "MUL_MAT", "test", params=f"type_a={value}")


# --- ctest -----------------------------------------------------------------------------------------

CTEST_PASSES = ["ctest/test-chat-pass.log", "ctest/test-chat-pass-h200-cmake4.log"]


@pytest.mark.parametrize("fixture", CTEST_PASSES)
def test_ctest_fixtures_pass_unchanged(fixture):
    assert judge_ctest(parse_ctest(load(fixture)), returncode=0, expected="test-chat").ok


@SETTINGS
@given(text=ARBITRARY, expected=st.sampled_from([None, "test-chat"]), rc=st.sampled_from([0, 1, None]))
def test_ctest_arbitrary_text_never_passes(text, expected, rc):
    assert not judge_ctest(parse_ctest(text), returncode=rc, expected=expected).ok


@SETTINGS
@given(fixture=st.sampled_from(CTEST_PASSES), data=st.data())
def test_ctest_mutations_never_pass(fixture, data):
    text = load(fixture)
    how = data.draw(st.sampled_from(["truncate", "status", "number", "duplicate"]))
    if how == "truncate":
        end = re.search(r"tests passed.*out of \d+", text).end()
        text = text[:data.draw(st.integers(0, end - 1))]
    elif how == "status":
        text = text.replace("   Passed", data.draw(st.sampled_from(["***Failed", "   not Passed", "***Skipped",
                                                                      "   Passed?", "***Not Run"])))
    elif how == "number":
        start, end = data.draw(st.sampled_from(number_spans(text, r"^\d+/\d+ Test|^.*tests passed.*$")))
        text = text[:start] + data.draw(NON_FINITE | st.sampled_from(["0", "2", "99"])) + text[end:]
        assume(text != load(fixture))
    else:
        line = next(l for l in text.splitlines() if "Test #" in l)
        text = text.replace(line, line + "\n" + line)
    assert not judge_ctest(parse_ctest(text), returncode=0, expected="test-chat").ok


# --- nvidia-smi ------------------------------------------------------------------------------------

def _well_formed(gpu) -> bool:
    return all(re.fullmatch(VALUE_RE[c], v) for c, v in (("name", gpu.name), ("driver_version", gpu.driver),
                                                          ("compute_cap", gpu.compute_capability))) \
        and gpu.memory_mib > 0


@SETTINGS
@given(text=ARBITRARY | st.lists(st.lists(st.text(max_size=12) | NON_FINITE, min_size=1, max_size=6)
                                 .map(", ".join), max_size=5).map("\n".join))
def test_nvidia_smi_never_makes_up_a_gpu(text):
    assert all(_well_formed(g) for g in parse_nvidia_smi(text))


@SETTINGS
@given(data=st.data())
def test_nvidia_smi_mutations_give_no_gpu(data):
    line = "NVIDIA H200, 580.159.04, 9.0, 143771"
    how = data.draw(st.sampled_from(["truncate", "number"]))
    if how == "truncate":
        line = line[:data.draw(st.integers(0, len(line) - 1))]
        assume(not re.fullmatch(r"NVIDIA H200, 580\.159\.04, 9\.0, [1-9]\d*", line))  # 14377 is still a memory size
    else:
        start, end = data.draw(st.sampled_from([(m.start(), m.end()) for m in re.finditer(r"\d+", line)
                                                if m.start() > line.index(",")]))
        line = line[:start] + data.draw(NON_FINITE) + line[end:]
    assert parse_nvidia_smi(line) == []


# --- llama-perplexity ------------------------------------------------------------------------------

KLD_OUT, KLD_ERR = load("perplexity/kld-iq1m-vs-f16.stdout"), load("perplexity/kld-iq1m-vs-f16.stderr")
DEVICE = "0.00.412.100 I llama_model_load_from_file_impl: using device CUDA0 (NVIDIA H200) (0000:19:00.0) - 1 MiB free\n"
REF_OUT, REF_ERR = load("perplexity/ref-cpu-f16.stdout"), load("perplexity/ref-cpu-f16.stderr")


def test_perplexity_fixtures_pass_unchanged():
    assert kld_problem(parse_perplexity(KLD_OUT, KLD_ERR + DEVICE), 0, gpu=True) is None
    assert kld_problem(parse_perplexity(KLD_OUT, KLD_ERR), 0, gpu=False) is None
    assert base_problem(parse_perplexity(REF_OUT, REF_ERR), 0) is None


@SETTINGS
@given(stdout=ARBITRARY, stderr=ARBITRARY, gpu=st.booleans())
def test_perplexity_arbitrary_text_never_passes(stdout, stderr, gpu):
    out = parse_perplexity(stdout, stderr)
    assert kld_problem(out, 0, gpu=gpu) is not None and base_problem(out, 0) is not None


@SETTINGS
@given(gpu=st.booleans(), data=st.data())
def test_kld_mutations_never_pass(gpu, data):
    stdout, stderr = KLD_OUT, KLD_ERR + (DEVICE if gpu else "")
    how = data.draw(st.sampled_from(["truncate", "drop device", "number", "wrong device"]))
    if how == "truncate":
        stdout = stdout[:data.draw(st.integers(0, stdout.index("\n", stdout.index("Same top p"))))]
    elif how in ("drop device", "wrong device"):
        stderr = KLD_ERR + ("" if gpu else DEVICE)
    else:
        start, end = data.draw(st.sampled_from(number_spans(stdout, ".+")))
        stdout = stdout[:start] + data.draw(NON_FINITE) + stdout[end:]
    assert kld_problem(parse_perplexity(stdout, stderr), 0, gpu=gpu) is not None


@SETTINGS
@given(data=st.data())
def test_reference_mutations_never_pass(data):
    stdout, stderr = REF_OUT, REF_ERR
    how = data.draw(st.sampled_from(["truncate", "number", "device"]))
    if how == "truncate":
        stderr = stderr[:data.draw(st.integers(0, re.search(r"Final estimate.*", stderr).end()))]
    elif how == "device":
        stderr += DEVICE
    elif data.draw(st.booleans(), label="in stdout"):
        start, end = data.draw(st.sampled_from(number_spans(stdout, ".+")))
        stdout = stdout[:start] + data.draw(NON_FINITE) + stdout[end:]
    else:
        start, end = data.draw(st.sampled_from(number_spans(stderr, "PPL = .*")))
        stderr = stderr[:start] + data.draw(NON_FINITE) + stderr[end:]
    assert base_problem(parse_perplexity(stdout, stderr), 0) is not None


# --- llama-bench -----------------------------------------------------------------------------------

JSONL = load("llama-bench/cpu-tiny-moe-iq1m.jsonl")
JSONL_ARGS = "-r 2 -t 2 -p 64,128 -n 16 -ub 64,128 -b 128 -ngl 0".split()[2:]


def bench_ok(text: str, *, repetitions: int = 2, bench_args=JSONL_ARGS) -> bool:
    try:
        lines = parse_jsonl(text)
    except BenchParseError:
        return False
    for line in lines:   # whatever parses is a physical speed
        assert all(0 < s <= MAX_TOKENS_PER_SECOND for s in (line.avg_ts, *line.samples_ts))
    return run_problem(lines, repetitions=repetitions, bench_args=bench_args, gpu=False) is None


def test_llama_bench_fixture_passes_unchanged():
    assert bench_ok(JSONL)


@SETTINGS
@given(text=ARBITRARY, repetitions=st.integers(1, 5))
def test_llama_bench_arbitrary_text_never_passes(text, repetitions):
    assert not bench_ok(text, repetitions=repetitions, bench_args=[])


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4), max_leaves=8)


@SETTINGS
@given(changes=st.dictionaries(st.sampled_from(["avg_ts", "stddev_ts", "samples_ts", "n_prompt", "n_gen", "n_depth"]),
                               JSON_VALUES, min_size=1))
def test_llama_bench_fields_with_any_json_values_never_give_an_impossible_speed(changes):
    line = json.loads(JSONL.splitlines()[0])
    line.update(changes)
    bench_ok(json.dumps(line))      # raises AssertionError (in bench_ok) on an impossible parsed speed


@SETTINGS
@given(data=st.data())
def test_llama_bench_mutations_never_pass(data):
    text = JSONL
    how = data.draw(st.sampled_from(["truncate", "number", "drop line", "samples"]))
    if how == "truncate":
        text = cut_before_end(text, data)
    elif how == "drop line":
        lines = text.splitlines()
        del lines[data.draw(st.integers(0, len(lines) - 1))]
        text = "\n".join(lines)
    elif how == "number":
        spans = [(m.start(1), m.end(1)) for m in re.finditer(r'"avg_ts": ([\d.]+)', text)]
        for samples in re.finditer(r'"samples_ts": \[([^\]]*)\]', text):
            spans += [(samples.start(1) + m.start(), samples.start(1) + m.end())
                      for m in re.finditer(r"[\d.]+", samples.group(1))]
        start, end = data.draw(st.sampled_from(spans))
        text = text[:start] + data.draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "-1", "0", "1e9", '"x"']))\
            + text[end:]
    else:
        text = text.replace("[ 126.998, 126.953 ]", "[ 126.998, 126.953, 126.9 ]", 1)
    assert not bench_ok(text)

