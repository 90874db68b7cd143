"""test-backend-ops parser and verdict on real captured output (tests/fixtures/backend-ops/README.md)."""

from __future__ import annotations

import pytest

from pinset.checks.backend_ops import judge_backend_ops, parse_backend_ops
from pinset.checks.text import strip_ansi
from tests.testing import FIXTURES

FIX = FIXTURES / "backend-ops"


def load(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8", errors="replace")


def judge(name: str, backend: str, returncode=0, mode="test", **kw):
    text = load(name)
    return judge_backend_ops(parse_backend_ops(text), backend, returncode=returncode, raw_text=text, mode=mode, **kw)


@pytest.mark.parametrize("op,passed,not_supported", [
    ("MUL_MAT", 1304, 385), ("MUL_MAT_ID", 931, 14), ("PAD", 34, 0), ("GET_ROWS", 216, 24)])
def test_h200_passes(op, passed, not_supported):
    out = parse_backend_ops(load(f"h200-test-{op}.log"))
    cuda = out.backend("CUDA0")
    assert cuda.description == "NVIDIA H200" and cuda.status == "OK" and cuda.summary == (passed, passed)
    assert out.backend("CPU").skipped == "Skipping"
    assert out.cuda_devices == [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0"}]
    assert out.backends_passed == (2, 2) and out.final == "OK"
    verdict = judge(f"h200-test-{op}.log", "CUDA0")
    assert verdict.ok, verdict.problems
    assert [(o.op, o.passed, o.total, o.not_supported, o.failures) for o in verdict.ops] == \
        [(op, passed, passed, not_supported, [])]
    assert verdict.device == "NVIDIA H200"


def test_a_backend_that_was_skipped_is_not_a_pass():
    # the same H200 run, asked about CPU: that section only says "Skipping"
    verdict = judge("h200-test-PAD.log", "CPU")
    assert not verdict.ok and "skipped" in verdict.detail and verdict.cases_run == 0


def test_perf_counts_measured_cases():
    verdict = judge("h200-perf-mm-iq1_s.log", "CUDA0", mode="perf")
    assert verdict.ok and verdict.measured == 7 and verdict.ops[0].short() == "MUL_MAT 7/7"


def test_truncated_output_is_not_a_pass():
    # an excerpt that ends before `Backend CUDA0: OK` (the run was cut short)
    verdict = judge("h200-perf-mm-iq2_xs.log", "CUDA0", mode="perf")
    assert not verdict.ok and "no `Backend CUDA0: OK` line" in verdict.detail


def test_timeout_is_red_and_shows_the_last_lines():
    verdict = judge("h200-test-PAD.log", "CUDA0", returncode=None, timed_out=True)
    assert not verdict.ok and "timed out" in verdict.detail and "last output:" in verdict.detail


def test_ansi_codes_are_stripped():
    raw = "  MUL_MAT(type_a=f32): \x1b[1;32mOK\x1b[0m\n"
    assert strip_ansi(raw) == "  MUL_MAT(type_a=f32): OK\n"


# --- CPU captures (this machine's CPU build of 0c1e570, raw output with ANSI colour codes) -------

def test_cpu_pass_with_ansi_codes():
    raw = load("cpu-test-MUL_MAT-iq1-pass.log")
    assert "\x1b[1;32mOK" in raw
    out = parse_backend_ops(raw)
    cpu = out.backend("CPU")
    assert cpu.status == "OK" and cpu.summary == (28, 28) and cpu.description == "AMD EPYC"
    assert {c.params.split(",")[0] for c in cpu.cases} == {"type_a=iq1_s", "type_a=iq1_m"}
    verdict = judge("cpu-test-MUL_MAT-iq1-pass.log", "CPU")
    assert verdict.ok and verdict.ops[0].short() == "MUL_MAT 28/28"


def test_missing_backend_is_red_although_the_program_says_ok():
    # `-b CUDA0` on a CPU-only build: every device "Skipping", "1/1 backends passed", OK, exit 0
    out = parse_backend_ops(load("cpu-build-b-CUDA0-missing-backend.log"))
    assert out.final == "OK" and out.backends_passed == (1, 1)
    verdict = judge("cpu-build-b-CUDA0-missing-backend.log", "CUDA0")
    assert not verdict.ok and "backend CUDA0 not found (devices listed: CPU)" in verdict.detail


def test_zero_cases_is_red_although_the_program_says_ok():
    verdict = judge("cpu-zero-cases.log", "CPU")
    assert not verdict.ok and verdict.cases_run == 0 and "zero tests run" in verdict.detail


def test_not_supported_cases_are_not_run_cases():
    out = parse_backend_ops(load("cpu-not-supported.log"))
    cases = out.backend("CPU").cases
    assert len(cases) == 33 and all(c.status == "not-supported" for c in cases)
    verdict = judge("cpu-not-supported.log", "CPU")
    assert not verdict.ok and verdict.not_supported == 33
    assert "zero tests run (33 not supported)" in verdict.detail
    assert verdict.ops[0].not_supported == 33 and verdict.ops[0].total == 0


def test_abort_before_any_output_reached_the_pipe():
    # an invalid -p regex: std::regex_error -> terminate -> SIGABRT; stdout was still buffered
    stdout, stderr = load("cpu-abort-regex.stdout"), load("cpu-abort-regex.stderr")
    verdict = judge_backend_ops(parse_backend_ops(stdout), "CPU", returncode=-6, signal_name="SIGABRT",
                                raw_text=stdout + "\n" + stderr)
    assert not verdict.ok
    assert "killed by SIGABRT" in verdict.detail and "regex_error" in verdict.detail


def test_killed_mid_run_has_no_summary_and_is_red():
    text = load("cpu-killed-sigabrt.stdout")
    out = parse_backend_ops(text)
    cpu = out.backend("CPU")
    assert cpu.summary is None and cpu.status is None and len(cpu.cases) > 100
    verdict = judge_backend_ops(out, "CPU", returncode=-6, signal_name="SIGABRT", raw_text=text)
    assert not verdict.ok and "killed by SIGABRT" in verdict.detail and "last output:" in verdict.detail


def test_failures_with_err_prefix_and_failing_tests_block():
    # a test-backend-ops whose IQ1_M tolerance was made negative (see README): real ERR/FAIL output
    raw = load("cpu-fail-err-iq1_m.log")
    out = parse_backend_ops(raw)
    cpu = out.backend("CPU")
    assert cpu.summary == (23, 28) and cpu.status == "FAIL" and out.final == "FAIL"
    assert len(out.failing_tests) == 5 and all(t.startswith("MUL_MAT(type_a=iq1_m,") for t in out.failing_tests)
    failed = [c for c in cpu.cases if c.status == "failed"]
    assert [c.name for c in failed] == out.failing_tests          # the ERR text ahead of the name is not the name
    assert failed[0].detail == "[MUL_MAT] ERR = 0.000000000 > -1.000000000"
    verdict = judge("cpu-fail-err-iq1_m.log", "CPU", returncode=1)
    assert not verdict.ok and "5 failing tests" in verdict.detail
    (count,) = verdict.ops
    assert (count.passed, count.total, len(count.failures)) == (23, 28, 5)
    assert count.failures[0].endswith(": [MUL_MAT] ERR = 0.000000000 > -1.000000000")
    assert count.failures[0].startswith("MUL_MAT(type_a=iq1_m,type_b=f32,m=16,n=8,k=256,")


def test_a_killed_run_never_counts_as_complete():
    text = load("cpu-killed-sigabrt.stdout")
    verdict = judge_backend_ops(parse_backend_ops(text), "CPU", returncode=-6, signal_name="SIGABRT", raw_text=text)
    (count,) = verdict.ops
    assert count.passed == count.total - 1 and count.failures == ["run killed by SIGABRT before finishing"]


def test_h200_raw_output_with_stderr_merged_into_a_case_line():
    raw = load("h200-pinned-j4-merged-test-MUL_MAT.log")
    assert "warmup reset\n\x1b[1;32mOK" in raw                   # the split case line
    verdict = judge("h200-pinned-j4-merged-test-MUL_MAT.log", "CUDA0")
    assert verdict.ok, verdict.problems
    assert verdict.ops[0].short() == "MUL_MAT 1364/1364" and verdict.not_supported == 385


def _runs(log: str) -> list[tuple[str, str]]:
    """(command line, stdout) of each run in a pinset log (runner.write_log format)."""
    runs = []
    for block in log.split("\n$ ")[1:] if not log.startswith("$ ") else ("\n" + log).split("\n$ ")[1:]:
        argv, rest = block.split("\n", 1)
        body = "\n".join(line for line in rest.split("\n") if not line.startswith("# ") or line.startswith("# ---"))
        runs.append((argv, body.split("# --- stderr ---")[0]))
    return runs


def test_h200_feature_check_runs_from_verify_itself():
    # verify's own log of the pin set's three checks on the H200 (stdout and stderr kept apart, -j 4)
    runs = _runs(load("h200-verify-feature-checks.log"))
    assert [a.split(" -o ")[1] for a, _ in runs] == ["MUL_MAT -b CUDA0 -p type_a=iq1_m -j 4",
                                                     "MUL_MAT_ID -b CUDA0 -p type_a=iq1_m -j 4",
                                                     "MUL_MAT_ID -b CUDA0 -p type_a=iq1_s -j 4"]
    shorts = []
    for _, stdout in runs:
        verdict = judge_backend_ops(parse_backend_ops(stdout), "CUDA0", returncode=0)
        assert verdict.ok and verdict.not_supported == 0 and verdict.device == "NVIDIA H200"
        shorts += [o.short() for o in verdict.ops]
    assert shorts == ["MUL_MAT 44/44", "MUL_MAT_ID 38/38", "MUL_MAT_ID 38/38"]


# --- odd output never passes (issue 12 §2) ---------------------------------------------------------

def _run_text(cases: str, backend: str = "CUDA0", summary: str | None = None, status: str = "OK") -> str:
    """A complete, well-formed `-b BACKEND` run around the given case lines (the H200 layout)."""
    lines = [c for c in cases.split("\n") if c.strip()]
    n = sum(1 for c in lines if c.endswith(": OK"))
    head = f"Testing 2 devices\n\nBackend 1/2: {backend}\n  Device description: NVIDIA H200\n" \
           f"  Device memory: 143155 MB (142629 MB free)\n\n"
    tail = f"  {summary or f'{n}/{len(lines)}'} tests passed\n  Backend {backend}: {status}\nBackend 2/2: CPU\n" \
           f"  Skipping\n2/2 backends passed\nOK\n"
    return head + "\n".join(lines) + "\n" + tail


MM = "MUL_MAT(type_a=iq1_m,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)"


def _judge(text, op="MUL_MAT", params=None, backend="CUDA0"):
    return judge_backend_ops(parse_backend_ops(text), backend, returncode=0, op=op, params=params)


def test_the_well_formed_synthetic_run_passes():
    verdict = _judge(_run_text(f"  {MM}: OK"), params="type_a=iq1_m")
    assert verdict.ok, verdict.problems
    assert [o.short() for o in verdict.ops] == ["MUL_MAT 1/1"]


def test_cases_of_another_op_are_not_the_op_asked_for():
    verdict = _judge(_run_text("  ADD(type=f32,ne=[10,5,4,3],nr=[1,1,1,1],nf=1): OK"))
    assert not verdict.ok and verdict.cases_run == 0 and verdict.ops == []
    assert "zero tests run of MUL_MAT" in verdict.detail and "other ops in a `-o MUL_MAT` run" in verdict.detail


@pytest.mark.parametrize("result", ["not OK", "OK!", "OK OK", "NOT OK", "OKAY", "ok", "OK (cached)", "passed", "0 OK",
                                    "FAIL OK", "[MUL_MAT] ERR = 1.0 > 0.5 OK"])
def test_only_the_exact_pass_marker_passes(result):
    verdict = _judge(_run_text(f"  {MM}: {result}", summary="1/1"))
    assert not verdict.ok and verdict.problems


def test_error_text_ahead_of_an_ok_with_no_failing_case_is_refused():
    """The case's own OK counts (with -j N the text is another worker's: Trust III), but error text no failing
    case owns is output real test-backend-ops never prints."""
    for line in (f"[MUL_MAT] ERR = 0.9 > 0.0005   {MM}: OK", f"  {MM}: [MUL_MAT] ERR = 1.0 > 0.5 OK"):
        verdict = _judge(_run_text(line, summary="1/1"))
        assert not verdict.ok and "comparison error text on 1 passing case line(s) but no case failed" in verdict.detail


def test_two_case_names_on_one_line_are_unreadable():
    verdict = _judge(_run_text(f"  {MM}: FAIL  {MM}: OK", summary="1/1"))
    assert not verdict.ok


def test_a_line_for_another_backend_is_not_this_backend():
    text = _run_text(f"  {MM}: OK").replace("Backend 2/2: CPU\n  Skipping\n",
                                              f"Backend 2/2: CUDA1\n  Device description: x\n  {MM}: OK\n"
                                              "  1/1 tests passed\n  Backend CUDA1: OK\n")
    verdict = _judge(text)
    assert not verdict.ok and "results for backend CUDA1" in verdict.detail


def test_a_status_line_naming_another_backend_does_not_count():
    text = _run_text(f"  {MM}: OK").replace("  Backend CUDA0: OK\n", "  Backend CUDA1: OK\n")
    verdict = _judge(text)
    assert not verdict.ok and "no `Backend CUDA0: OK` line" in verdict.detail


def test_a_second_section_or_status_line_is_red():
    text = _run_text(f"  {MM}: OK")
    assert not _judge(text.replace("  Backend CUDA0: OK\n", "  Backend CUDA0: FAIL\n  Backend CUDA0: OK\n")).ok
    twice = text.replace("Backend 2/2: CPU", "Backend 2/2: CUDA0")
    assert "a second section for backend CUDA0" in _judge(twice).detail


def test_a_run_that_ends_with_fail_is_red():
    assert not _judge(_run_text(f"  {MM}: OK").replace("2/2 backends passed\nOK", "1/2 backends passed\nFAIL")).ok


def test_a_result_split_by_a_log_line_still_needs_the_exact_marker():
    split = f"  {MM}: ggml_backend_cuda_graph_compute: CUDA graph warmup reset\nOK"
    assert _judge(_run_text(split, summary="1/1")).ok
    assert not _judge(_run_text(f"  {MM}: not\nOK", summary="1/1")).ok
    assert not _judge(_run_text(f"  {MM}: ggml_x: y\nnot OK", summary="1/1")).ok


@pytest.mark.parametrize("params,case_type,ok", [
    ("type_a=iq1_m", "type_a=iq1_m", True),
    ("type_a=iq1_m", "type_a=iq1_m_xyz", False),          # the regex finds it inside a longer value
    ("type_a=iq1_m", "type_a=f32,xtype_a=iq1_m", False),   # ... or inside another key
    ("type_a=iq1_m,", "type_a=iq1_m", True),
    ("type_a=(iq1_m|iq1_s),", "type_a=iq1_s", True),
    ("type_a=(iq1_m|iq1_s),", "type_a=iq1_s_r4", False),
    ("n=1", "type_a=iq1_m", True),
])
def test_feature_check_params_match_exactly_per_key_value(params, case_type, ok):
    case = MM.replace("type_a=iq1_m", case_type)
    verdict = _judge(_run_text(f"  {case}: OK"), params=params)
    assert verdict.ok is ok, verdict.problems
    if not ok:
        assert "zero tests run" in verdict.detail and "exactly" in verdict.detail


def test_filter_terms_and_case_params():
    from pinset.checks.backend_ops import case_params, filter_terms, matches_filter
    assert case_params("type_a=f32,bs=[1,1],nr=[2,3],k=3") == {"type_a": ["f32"], "bs": ["[1,1]"], "nr": ["[2,3]"],
                                                                "k": ["3"]}
    assert not matches_filter("type_a=iq1_m,type_a=f32", "type_a=iq1_m")   # a key twice: each value must match
    assert filter_terms("type_a=iq1_m,.*n_mats=128") == [[("type_a", "iq1_m"), ("n_mats", "128")]]
    assert filter_terms(r"bs=\[1,1\],type_a=[a-z0-9_]+") == [[("bs", r"\[1,1\]"), ("type_a", "[a-z0-9_]+")]]
    assert filter_terms("type_a=q4_0|type_a=q8_0") == [[("type_a", "q4_0")], [("type_a", "q8_0")]]
    assert filter_terms("type_a=iq1_m.*n_mats=128") == [[("type_a", "iq1_m"), ("n_mats", "128")]]
    assert filter_terms("type_a=q4_.*,type_b=f32") == [[("type_a", "q4_.*"), ("type_b", "f32")]]
    assert matches_filter("type_a=q4_K,type_b=f32", "type_a=q4_.*") and not matches_filter("type_a=q8_0", "type_a=q4_.*")
    assert matches_filter("type_a=q8_0,n=16", "type_a=q4_0|type_a=q8_0")
    assert not matches_filter("type_a=q8_0,n=16", "n=1")
    assert matches_filter("type_a=q8_0,n=16", "q8")      # no key=value term: the regex alone decides


def test_perf_lines_must_be_complete_and_positive():
    perf = "MUL_MAT(type_a=iq1_s,m=16):    10 runs -    18.68 us/run - 117.44 MFLOP/run -   6.29 TFLOPS"
    text = _run_text("  " + perf).replace("  0/1 tests passed\n", "")
    assert judge_backend_ops(parse_backend_ops(text), "CUDA0", returncode=0, mode="perf", op="MUL_MAT").ok
    for bad in (perf.replace("10 runs", "0 runs"), perf.replace("18.68 us", "0.00 us"), perf[:-10]):
        text = _run_text("  " + bad).replace("  0/1 tests passed\n", "")
        assert not judge_backend_ops(parse_backend_ops(text), "CUDA0", returncode=0, mode="perf", op="MUL_MAT").ok


@pytest.mark.parametrize("sep", ["\r", "\x1c", "\x85", "\u2028", "\x0b"])
def test_only_a_newline_ends_a_case_line(sep):
    # "FAIL<sep>OK" or "<sep>OK" must not read as a pass whatever a terminal would show
    assert not _judge(_run_text(f"  {MM}: FAIL{sep}OK", summary="1/1")).ok
    assert not _judge(_run_text(f"  {MM}: {sep}OK", summary="1/1")).ok


PERF_LINE = "53676 runs -    18.68 us/run - 117.44 MFLOP/run -   6.29 TFLOPS"


def test_a_result_of_another_mode_is_red():
    # perf mode measures; an `OK` there is a test result, and counted as a case it made a perf check
    # "pass" with zero cases measured. A timing in a test run is no test result either.
    perf_with_ok = _run_text(f"  {MM}: OK").replace("  1/1 tests passed\n", "")
    verdict = judge_backend_ops(parse_backend_ops(perf_with_ok), "CUDA0", returncode=0, mode="perf", op="MUL_MAT")
    assert not verdict.ok and verdict.measured == 0 and "not a perf result" in verdict.detail
    test_with_timing = _run_text(f"  {MM}: {PERF_LINE}", summary="1/1")
    verdict = _judge(test_with_timing)
    assert not verdict.ok and "not a test result" in verdict.detail


@pytest.mark.parametrize("where", ["after the closing OK", "before the first section"])
def test_a_case_line_outside_any_backend_section_is_red(where):
    # the program prints every case inside its backend's section: a FAIL elsewhere must not be dropped
    text = _run_text(f"  {MM}: OK")
    text = text + f"  {MM}: FAIL\n" if where.startswith("after") else f"  {MM}: FAIL\n" + text
    verdict = _judge(text)
    assert not verdict.ok and "outside any backend section" in verdict.detail


def test_j4_failures_whose_error_text_lands_in_other_cases_lines_count_as_the_program_counts():
    """Trust III (H200, -j 4): "summary says 1331/1364 tests passed but 1330/1364 case lines were read". With
    parallel workers the comparison callback's error text (printed outside the output lock) lands in another
    worker's case line: ahead of its name, or between its `): ` and `OK`. The case's own marker decides
    (fixture: README, make_interleaved_failures.py)."""
    raw = load("h200-j4-fail-interleaved-MUL_MAT.log")
    out = parse_backend_ops(raw)
    cuda = out.backend("CUDA0")
    assert cuda.summary == (1360, 1364) and len(out.failing_tests) == 4
    run = [c for c in cuda.cases if c.status in ("passed", "failed", "unreadable", "incomplete", "measured")]
    assert len(run) == 1364 and sum(c.status == "passed" for c in run) == 1360
    assert [c.name for c in cuda.cases if c.status == "failed"] == out.failing_tests
    verdict = judge("h200-j4-fail-interleaved-MUL_MAT.log", "CUDA0", returncode=1)
    assert not verdict.ok and not any("summary says" in p for p in verdict.problems), verdict.problems
    assert "4 failing tests" in verdict.detail
    (count,) = verdict.ops
    assert (count.passed, count.total, len(count.failures)) == (1360, 1364, 4)


@pytest.mark.parametrize("line, status", [
    ("[MUL_MAT] ERR = 0.1 > 0.0005   MUL_MAT(type_a=q4_0,m=1): \x1b[1;32mOK\x1b[0m", "passed"),
    ("  MUL_MAT(type_a=q4_0,m=1): [MUL_MAT] ERR = 0.1 > 0.0005 [NONE] ERR = 0.2 > 0.0005 OK", "passed"),
    ("[MUL_MAT] NaN at index 3 (CUDA0=nan CPU=0.1)   MUL_MAT(type_a=q4_0,m=1): OK", "passed"),
    ("[MUL_MAT] ERR = 0.1 > 0.0005   MUL_MAT(type_a=q4_0,m=1): FAIL", "failed"),
    ("  MUL_MAT(type_a=q4_0,m=1): [MUL_MAT] ERR = 0.1 > 0.0005 FAIL", "failed"),
    ("garbage   MUL_MAT(type_a=q4_0,m=1): OK", "unreadable"),            # other text ahead: still refused
    ("  MUL_MAT(type_a=q4_0,m=1): [MUL_MAT] ERR = 0.1 > 0.0005 OK now", "unreadable"),
    ("  MUL_MAT(type_a=q4_0,m=1): ggml_backend_cuda_graph_compute: CUDA graph warmup reset\n"
     "[MUL_MAT] ERR = 0.1 > 0.0005 \x1b[1;32mOK\x1b[0m", "passed"),       # pushed to the next line, text ahead
    ("  MUL_MAT(type_a=q4_0,m=1): ggml_backend_cuda_graph_compute: CUDA graph warmup reset\n"
     "[MUL_MAT] ERR = 0.1 > 0.0005 FAIL", "failed"),
])
def test_a_case_line_carrying_another_cases_error_text(line, status):
    text = f"Testing 1 devices\n\nBackend 1/1: CUDA0\n  Device description: x\n\n{line}\n"
    (case,) = parse_backend_ops(text).backend("CUDA0").cases
    assert case.status == status, case


@pytest.mark.parametrize("name, summary, failing", [
    ("h100-sabotage-j4-test-MUL_MAT.log", (1331, 1364), 33),
    ("h100-sabotage-j4-test-MUL_MAT_ID.log", (962, 999), 37),
])
def test_real_failing_gpu_output_is_counted_as_the_program_counts(name, summary, failing):
    """Trust III: real test-backend-ops output of the sabotaged IQ1_M series (`+ 3` for `+ 1` in 0001's m1 line) on
    an H100, as `pinset verify --cuda --op-jobs 4` ran it (`-j 4`, stderr merged; reports/trust-iii/): every case is
    counted once by its own marker, so the counts are the program's own summary (f711a24's parser read 1329 and 961
    passed: a failing case's error text in another worker's line made that passing case a failure)."""
    out = parse_backend_ops(load(name))
    cuda = out.backend("CUDA0")
    run = [c for c in cuda.cases if c.status in ("passed", "failed", "unreadable", "incomplete")]
    assert cuda.summary == summary and len(run) == summary[1] and sum(c.status == "passed" for c in run) == summary[0]
    assert len(out.failing_tests) == failing and not any(c.status == "unreadable" for c in run)
    verdict = judge(name, "CUDA0", returncode=1)
    assert not verdict.ok and not any("summary says" in p for p in verdict.problems), verdict.problems
