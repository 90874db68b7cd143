"""runner.run_streaming, which feeds the build progress bar: lines as they come, timeouts, signals."""

from __future__ import annotations

from pinset.runner import run_streaming


def test_lines_arrive_in_order_with_stderr_merged(tmp_path):
    seen = []
    done = run_streaming(["sh", "-c", "echo '[1/2] one'; echo warn >&2; echo '[2/2] two'"], on_line=seen.append,
                         log=tmp_path / "log")
    assert done.ok and seen == ["[1/2] one", "warn", "[2/2] two"]
    assert done.stdout.splitlines() == seen
    assert "[2/2] two" in (tmp_path / "log").read_text()


def test_timeout_kills_the_whole_process_group():
    done = run_streaming(["sh", "-c", "echo start; sleep 30 & sleep 30; echo never"], timeout=1)
    assert done.timed_out and not done.ok and done.returncode is None
    assert "never" not in done.stdout and done.seconds < 10


def test_signal_and_missing_program():
    done = run_streaming(["sh", "-c", "kill -ABRT $$"])
    assert done.signal_name == "SIGABRT" and not done.ok
    missing = run_streaming(["/nonexistent/ninja"])
    assert missing.returncode == 127 and "not found" in missing.describe() + missing.stderr


def test_a_broken_callback_does_not_break_the_run():
    def boom(_line):
        raise RuntimeError("display failed")
    assert run_streaming(["sh", "-c", "echo x"], on_line=boom).ok


def test_interrupt_stops_the_program_group():
    # what `timeout -s INT` on `pinset verify` does during a build: ninja and its compilers must go too
    import os
    import signal
    import threading

    import pytest

    pids = []

    def on_line(line):
        pids.append(int(line))
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()

    with pytest.raises(KeyboardInterrupt):
        run_streaming(["sh", "-c", "sleep 30 & echo $!; wait"], on_line=on_line, timeout=20)
    assert pids
    import time
    time.sleep(0.3)
    stat = f"/proc/{pids[0]}/stat"
    state = open(stat).read().rsplit(")", 1)[1].split()[0] if os.path.exists(stat) else "gone"
    assert state in ("gone", "Z", "X")   # the grandchild (the "compiler") is dead (a zombie until reaped)
