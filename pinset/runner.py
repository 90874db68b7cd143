"""The one way pinset runs external programs: argv lists, timeouts, logs, never a shell."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int | None  # None when killed by our timeout
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def signal_name(self) -> str | None:
        """Name of the signal that killed the program (SIGABRT, SIGSEGV...), if any."""
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None

    def describe(self) -> str:
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        if self.signal_name:
            return f"killed by {self.signal_name}"
        return f"exit {self.returncode}"

    def tail(self, lines: int = 20) -> str:
        text = (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).rstrip()
        return "\n".join(text.splitlines()[-lines:])


def run(
    argv: Sequence[str | os.PathLike],
    *,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    log: Path | None = None,
    input: str | None = None,
) -> Completed:
    """Run argv, capture text output, optionally append a log with the command line."""
    args = tuple(str(a) for a in argv)
    full_env = child_env(env)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            args, cwd=cwd, env=full_env, timeout=timeout, input=input,
            capture_output=True, text=True, errors="replace",
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        result = Completed(args, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        result = Completed(args, None, out, err, time.monotonic() - started, timed_out=True)
    except FileNotFoundError:
        result = Completed(args, 127, "", f"{args[0]}: command not found", time.monotonic() - started)
    if log is not None:
        write_log(log, result, cwd=cwd, env=env)
    return result


# Credentials pinset may hold for `report --post` (and that gh, git credential helpers and CI set).
# No child program needs them: builds, tests, feature checks and llama.cpp programs run the pin set's
# code, so they never see them.
SECRET_ENV = ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_PAT", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Our environment with the caller's variables on top, minus SECRET_ENV: every child gets this."""
    return {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in SECRET_ENV}


def write_log(log: Path, result: Completed, cwd=None, env=None) -> None:
    """Append the command (as it would be typed), its status and its output to a log file."""
    import shlex

    log.parent.mkdir(parents=True, exist_ok=True)
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {(prefix + ' ') if prefix else ''}{shlex.join(result.argv)}\n")
        if cwd:
            fh.write(f"# cwd: {cwd}\n")
        fh.write(f"# {result.describe()} in {result.seconds:.1f} s\n")
        if result.stdout:
            fh.write(result.stdout if result.stdout.endswith("\n") else result.stdout + "\n")
        if result.stderr:
            fh.write("# --- stderr ---\n")
            fh.write(result.stderr if result.stderr.endswith("\n") else result.stderr + "\n")


def run_streaming(
    argv: Sequence[str | os.PathLike],
    *,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    on_line=None,
    log: Path | None = None,
) -> Completed:
    """Run argv and hand each output line to on_line as it comes (for progress bars of long builds).

    stderr is merged into stdout (a build log reads in order); on timeout the whole process group
    is killed, so compilers started by ninja go too.
    """
    import threading

    args = tuple(str(a) for a in argv)
    full_env = child_env(env)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            args, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1, start_new_session=True,
        )
    except FileNotFoundError:
        result = Completed(args, 127, "", f"{args[0]}: command not found", time.monotonic() - started)
        if log is not None:
            write_log(log, result, cwd=cwd, env=env)
        return result
    lines: list[str] = []
    live = _open_live_log(log, args, cwd, env)

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line)
            if live is not None:
                live.write(line)
                live.flush()
            if on_line is not None:
                try:
                    on_line(line.rstrip("\n"))
                except Exception:  # a broken progress display must not break the build
                    pass

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    reader.join(timeout=10)
    result = Completed(args, None if timed_out else proc.returncode, "".join(lines), "",
                       time.monotonic() - started, timed_out=timed_out)
    if live is not None:
        live.write(f"# {result.describe()} in {result.seconds:.1f} s\n")
        live.close()
    return result


def _open_live_log(log: Path | None, args: tuple[str, ...], cwd, env):
    """A log that grows while the program runs (a long build can be followed with tail -f)."""
    import shlex

    if log is None:
        return None
    log.parent.mkdir(parents=True, exist_ok=True)
    fh = log.open("a", encoding="utf-8")
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    fh.write(f"$ {(prefix + ' ') if prefix else ''}{shlex.join(args)}\n")
    if cwd:
        fh.write(f"# cwd: {cwd}\n")
    fh.flush()
    return fh
