"""The shared progress display: plain lines on a schedule without a terminal, a live bar on one."""

import io

from rich.console import Console

from pinset.checks.backend_ops import case_counter
from pinset.measures.perplexity import chunk_counter
from pinset.progress import BYTES, COUNT, SPINNER, Progress
from tests.testing import FIXTURES


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def plain(**kw):
    screen = io.StringIO()
    clock = Clock()
    console = Console(file=screen, force_terminal=False, width=200)
    return screen, clock, dict(console=console, clock=clock, ticker=False, **kw)


def test_plain_mode_prints_one_line_every_15_seconds_and_one_at_the_end():
    screen, clock, kw = plain()
    with Progress("test-backend-ops test MUL_MAT on CUDA0", kind=COUNT, unit="cases", **kw) as shown:
        shown.update(done=1, note="MUL_MAT")
        clock.now += 14.9
        shown.update(done=2)
        assert screen.getvalue() == ""            # short so far: nothing printed
        clock.now += 0.1
        shown.update(done=40, total=120)
        clock.now += 5
        shown.update(done=41)                     # 5 s after the last line: nothing new
        clock.now += 10
        shown.tick()                              # the timer's call: a line although no case came
        clock.now += 2
    assert screen.getvalue().splitlines() == [
        "test-backend-ops test MUL_MAT on CUDA0: 40/120 cases (MUL_MAT), 15 s",
        "test-backend-ops test MUL_MAT on CUDA0: 41/120 cases (MUL_MAT), 30 s",
        "test-backend-ops test MUL_MAT on CUDA0: done, 41/120 cases (MUL_MAT), 32 s",
    ]


def test_a_short_step_prints_nothing_without_a_terminal():
    screen, clock, kw = plain()
    with Progress("fetching pull/1/head from https://github.com/x/y", kind=SPINNER, **kw):
        clock.now += 3
    assert screen.getvalue() == ""


def test_spinner_step_says_elapsed_seconds():
    screen, clock, kw = plain()
    with Progress("fetching pull/1/head from https://github.com/x/y", kind=SPINNER, **kw) as shown:
        clock.now += 40
        shown.tick()
    assert screen.getvalue().splitlines() == [
        "fetching pull/1/head from https://github.com/x/y: 40 s",
        "fetching pull/1/head from https://github.com/x/y: done, 40 s",
    ]


def test_download_announces_itself_and_reports_rate():
    screen, clock, kw = plain()
    with Progress("downloading pypi:x==1", kind=BYTES, total=30e6, done=10e6, announce=True,
                  done_as="downloaded pypi:x==1", **kw) as shown:
        clock.now += 15
        shown.advance(15e6)
        clock.now += 5
        shown.advance(5e6)
    assert screen.getvalue().splitlines() == [
        "downloading pypi:x==1 (30.0 MB), resuming at 10.0 MB",
        "downloading pypi:x==1: 25.0/30.0 MB at 1.0 MB/s",
        "downloaded pypi:x==1: 30.0 MB in 20 s (1.0 MB/s)",
    ]


def test_a_failed_step_prints_no_done_line():
    screen, clock, kw = plain()
    try:
        with Progress("build b1", unit="steps", **kw) as shown:
            clock.now += 20
            shown.update(done=3, total=9, note="ops.cpp.o")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert screen.getvalue().splitlines() == ["build b1: 3/9 steps (ops.cpp.o), 20 s"]


def test_disabled_progress_prints_nothing():
    screen, clock, kw = plain()
    with Progress("build b1", enabled=False, **kw) as shown:
        clock.now += 100
        shown.update(done=5)
    assert screen.getvalue() == ""


def test_terminal_shows_a_live_bar_with_counts():
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with Progress("test-backend-ops test ADD on CPU", unit="cases", console=console) as shown:
        shown.update(done=7, total=9, note="ADD")
    text = screen.getvalue()
    assert "test-backend-ops test ADD on CPU" in text and "7/9" in text and "ADD" in text


def test_terminal_spinner_and_download_columns():
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with Progress("downloading pypi:x==1", kind=BYTES, total=2e6, console=console) as shown:
        shown.advance(1e6)
    assert "1.0/2.0 MB" in screen.getvalue()


def test_case_counter_counts_finished_cases_of_a_real_run():

    text = (FIXTURES / "backend-ops/h200-pinned-j4-merged-test-MUL_MAT.log").read_text()
    screen, clock, kw = plain()
    with Progress("ops", unit="cases", **kw) as shown:
        on_line = case_counter(shown)
        for line in text.splitlines():
            on_line(line)
    from pinset.checks.backend_ops import parse_backend_ops

    cases = parse_backend_ops(text).cases
    assert shown.done == len([c for c in cases if c.op]) > 0
    assert shown.note == "MUL_MAT"


def test_chunk_counter_follows_the_kld_table_of_a_real_run():

    text = (FIXTURES / "perplexity/kld-iq1m-vs-f16.stdout").read_text()
    screen, clock, kw = plain()
    with Progress("kld", unit="chunks", total=3, **kw) as shown:
        on_line = chunk_counter(shown)
        for line in text.splitlines():
            on_line(line)
    assert shown.done == 3
