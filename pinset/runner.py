"""The one way pinset runs external programs: argv lists, timeouts, logs, never a shell."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from pinset.redact import SECRET_ENV

# The longest timeout a program may get: subprocess waits in poll(2), whose int milliseconds end at
# 24.8 days; a longer one is an OverflowError mid-run, so options and pins.yaml refuse it up front.
MAX_TIMEOUT_S = 1_000_000


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
    input: str | bytes | None = None,
    binary: bool = False,
) -> Completed:
    """Run argv, capture text output, optionally append a log with the command line.

    binary: `input` and stdout are bytes (object contents from git); stderr is still text."""
    args = tuple(str(a) for a in argv)
    full_env = child_env(env, args)
    started = time.monotonic()
    text = {} if binary else {"text": True, "errors": "replace"}
    try:
        proc = _start(args, cwd=cwd, env=full_env, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, **text)
    except OSError as exc:
        result = _not_started(args, exc, started)
    else:
        with _owned(proc):
            try:
                out, err = proc.communicate(input, timeout=timeout)
                result = Completed(args, proc.returncode, out, _text(err), time.monotonic() - started)
            except subprocess.TimeoutExpired:
                out, err = _kill_group(proc)
                result = Completed(args, None, out, _text(err), time.monotonic() - started, timed_out=True)
    if log is not None:
        write_log(log, result, cwd=cwd, env=env)
    return result


def _not_started(args: tuple[str, ...], exc: OSError, started: float) -> Completed:
    """A program that could not be started is a failed run (exit 127 not found, 126 not executable, as a
    shell says), never an exception: a feature check may name a script without its x bit, or a folder."""
    if isinstance(exc, FileNotFoundError):
        return Completed(args, 127, "", f"{args[0]}: command not found", time.monotonic() - started)
    return Completed(args, 126, "", f"{args[0]}: cannot execute: {exc.strerror or exc}", time.monotonic() - started)


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


# SECRET_ENV (pinset.redact: the credentials pinset may hold) is kept from every child.


def child_env(env: Mapping[str, str] | None = None, argv: Sequence[str] = ()) -> dict[str, str]:
    """Our environment with the caller's variables on top, minus SECRET_ENV: every child gets this.

    Git is an input too: no child inherits a repository of the caller's (REPOSITORY_ENV: pinset started by
    a git hook would otherwise read and write the user's index and objects), and a git child also gets
    git's own words (LC_ALL=C) and a neutral configuration (git_env) whatever the user's gitconfig says.
    The caller's `env` is pinset's own word and goes on top."""
    inherited = {k: v for k, v in os.environ.items() if not (k.startswith("GIT_") and _repository_local(k))}
    if argv and _is_git(argv[0]):
        inherited.pop("LANGUAGE", None)
        inherited.pop("LC_MESSAGES", None)
        inherited.update(_git_env(tuple(os.environ.get(k) for k in _CONFIG_PLACES)))
    inherited.update(env or {})
    for secret in SECRET_ENV:
        inherited.pop(secret, None)
    return inherited


# What ties a git to one repository, or changes how it reads one, when set in its environment: `git rev-parse
# --local-env-vars` (what git itself clears for a command run in another repository) and their kin. A git
# hook sets some (GIT_DIR, GIT_INDEX_FILE, GIT_PREFIX...), a user's shell others.
REPOSITORY_ENV = frozenset({
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_QUARANTINE_PATH", "GIT_INDEX_VERSION",
    "GIT_LITERAL_PATHSPECS", "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS",
    "GIT_DEFAULT_HASH", "GIT_ATTR_SOURCE", "GIT_TEMPLATE_DIR", "GIT_DIFF_OPTS", "GIT_EXTERNAL_DIFF",
    "GIT_REFLOG_ACTION",
})


def _repository_local(name: str) -> bool:
    return name in REPOSITORY_ENV or name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))


def _is_git(program: str) -> bool:
    return os.path.basename(str(program)) == "git"


# The configuration every git child runs with. Neither the system nor the global gitconfig is read
# (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null, nor the global attributes file), so nothing in them
# changes what git writes (format.signOff, diff.noprefix, diff.context, format.coverLetter, core.autocrlf,
# i18n.commitEncoding...) or how it reads (apply.ignoreWhitespace, merge.conflictStyle, rerere.enabled...).
# What only lets git reach a repository is kept (KEPT_CONFIG: credentials, url.insteadOf, proxies,
# safe.directory). Every git also gets these values as command-line settings (GIT_CONFIG_COUNT): they hold
# over a repository's own config too (a user checkout `import` reads); an explicit `-c` still goes first.
# Where pinset commits, it sets identity and dates itself (no user.name is needed, none is read).
NEUTRAL_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.autocrlf", "false"), ("core.eol", "lf"), ("core.safecrlf", "false"), ("core.quotePath", "true"),
    ("core.attributesFile", os.devnull), ("core.hooksPath", os.devnull), ("core.fsmonitor", "false"),
    ("core.whitespace", "blank-at-eol,space-before-tab,blank-at-eof"), ("core.abbrev", "auto"),
    ("core.commentChar", "#"),
    ("diff.noprefix", "false"), ("diff.mnemonicPrefix", "false"), ("diff.context", "3"),
    ("diff.interHunkContext", "0"), ("diff.relative", "false"), ("diff.renames", "true"),
    ("diff.algorithm", "myers"), ("diff.indentHeuristic", "true"), ("diff.suppressBlankEmpty", "false"),
    ("diff.srcPrefix", "a/"), ("diff.dstPrefix", "b/"), ("diff.submodule", "short"), ("diff.colorMoved", "false"),
    ("diff.orderFile", os.devnull),
    ("format.signOff", "false"), ("format.coverLetter", "false"), ("format.numbered", "auto"),
    ("format.suffix", ".patch"), ("format.useAutoBase", "false"), ("format.notes", "false"),
    ("format.thread", "false"), ("format.from", "false"), ("format.forceInBodyFrom", "false"),
    ("format.encodeEmailHeaders", "true"), ("format.subjectPrefix", "PATCH"), ("format.noprefix", "false"),
    ("format.pretty", "medium"), ("format.filenameMaxLength", "64"),
    ("am.threeWay", "false"), ("am.keepcr", "false"), ("am.messageId", "false"), ("mailinfo.scissors", "false"),
    ("apply.whitespace", "warn"), ("apply.ignoreWhitespace", "no"),
    ("commit.gpgSign", "false"), ("tag.gpgSign", "false"), ("commit.cleanup", "default"), ("commit.verbose", "false"),
    ("log.showSignature", "false"), ("log.decorate", "no"), ("log.abbrevCommit", "false"), ("log.showRoot", "true"),
    ("log.follow", "false"), ("log.mailmap", "false"), ("log.date", "default"),
    ("color.ui", "false"), ("color.diff", "false"),
    ("i18n.commitEncoding", "UTF-8"), ("i18n.logOutputEncoding", "UTF-8"),
    ("merge.conflictStyle", "merge"), ("merge.renormalize", "false"),
    ("rerere.enabled", "false"), ("rerere.autoUpdate", "false"), ("submodule.recurse", "false"),
    ("init.defaultBranch", "master"),
)
# Settings of the user's system and global gitconfig that git children keep: what reaching a remote or
# trusting a folder needs, nothing that changes what git reads or writes.
KEPT_CONFIG = re.compile(r"safe\.directory|credential\..*|url\..*\.(?:insteadof|pushinsteadof)|http\..*|"
                         r"core\.(?:sshcommand|askpass|gitproxy)|ssh\.variant|protocol\..*")
_CONFIG_PLACES = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "PATH")


def git_env() -> dict[str, str]:
    """The variables a git child gets on top of the inherited ones (see NEUTRAL_CONFIG)."""
    return dict(_git_env(tuple(os.environ.get(k) for k in _CONFIG_PLACES)))


@functools.lru_cache(maxsize=8)
def _git_env(places: tuple[str | None, ...]) -> tuple[tuple[str, str], ...]:
    settings = [*_kept_config(places), *NEUTRAL_CONFIG]
    env = {"LC_ALL": "C", "LANG": "C", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_ATTR_NOSYSTEM": "1", "GIT_CONFIG_COUNT": str(len(settings))}
    for n, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"] = key, value
    return tuple(env.items())


@functools.lru_cache(maxsize=8)
def _kept_config(places: tuple[str | None, ...]) -> tuple[tuple[str, str], ...]:
    """KEPT_CONFIG entries of the user's system and global gitconfig (includes followed), in git's order;
    read once per place. Run here, not by run(): run() asks for this."""
    env = {k: v for k, v in os.environ.items() if not _repository_local(k) and k not in SECRET_ENV}
    env.update(LC_ALL="C", LANG="C")
    args = ("git", "config", "--list", "--show-scope", "--includes", "-z")
    try:   # started and owned as any program (its group dies with pinset), only not through run()
        proc = _start(args, cwd="/", env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL)
    except OSError:
        return ()
    with _owned(proc):
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return ()
    if proc.returncode != 0:
        return ()
    fields = out.decode(errors="surrogateescape").split("\0")
    kept = []
    for scope, entry in zip(fields[0::2], fields[1::2]):
        key, _, value = entry.partition("\n")
        if scope in ("system", "global") and KEPT_CONFIG.fullmatch(key.lower()):
            kept.append((key, value))
    return tuple(kept)


# --- process lifetime -----------------------------------------------------------------------
# Every program runs in its own process group, so one killpg reaches what it started too (ninja's
# compilers, ctest's tests). That group is killed when pinset stops for any reason:
# - a timeout, an exception, Ctrl-C: `_owned` kills the group before the exception goes on;
# - pinset itself SIGKILLed: the direct child has PR_SET_PDEATHSIG=SIGKILL (Linux), and the
#   lifeline, a tiny watcher process started once per run, reads the open groups from a pipe and
#   kills them when the pipe closes, which the kernel does when pinset dies.
# PDEATHSIG follows the thread that forked: `_start` runs in the thread that then waits for the
# child, so that thread cannot end first.
# git's local plumbing is started without PDEATHSIG and without a session of its own. A preexec_fn
# forces a full fork() of pinset (~20 ms a call for a 100 MB process) where Python otherwise uses vfork
# (~2 ms), and sim/blame start hundreds of short git calls. A new session is also a new scheduler
# autogroup on Linux: on a loaded machine each of its wake-ups waits its turn among the groups (a
# `cat-file --batch` round trip: 1.8 ms in a session of its own, 0.2 ms in ours). So it gets a process
# group of its own in pinset's session (killpg still reaches all it starts) and the lifeline alone
# ties it to pinset's life: only a git started in the microseconds before it is registered could
# outlive pinset, and such a git ends on its own once its pipes close. Network commands (fetch,
# clone, ls-remote, push) keep their own session: in our session a prompt on /dev/tty (ssh) would
# stop them (SIGTTIN) instead of failing.

_LIFELINE = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups = set()
for line in sys.stdin:
    (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""
_lifeline: subprocess.Popen | None = None
_lifeline_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _pdeathsig():
    """A preexec_fn that makes the child die with its parent (None off Linux)."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return in_child


def _start(args: tuple[str, ...], **kw) -> subprocess.Popen:
    """Popen in a new process group, tied to pinset's life (see above)."""
    if _local_git(args) and sys.version_info >= (3, 11):
        proc = subprocess.Popen(args, process_group=0, **kw)
    else:
        proc = subprocess.Popen(args, start_new_session=True, preexec_fn=None if _local_git(args) else _pdeathsig(), **kw)
    _tell_lifeline(f"+{proc.pid}")
    return proc


_NETWORK_GIT = {"fetch", "clone", "ls-remote", "push", "pull"}


def _local_git(args: tuple[str, ...]) -> bool:
    """git's local plumbing: short, started by the hundred (see above)."""
    return os.path.basename(args[0]) == "git" and not _NETWORK_GIT.intersection(args[1:])


def _tell_lifeline(message: str) -> None:
    global _lifeline
    with _lifeline_lock:
        try:
            if _lifeline is None or _lifeline.poll() is not None:
                _lifeline = subprocess.Popen([sys.executable, "-I", "-S", "-c", _LIFELINE], stdin=subprocess.PIPE,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             start_new_session=True, text=True, bufsize=1, env=child_env())
            assert _lifeline.stdin is not None   # stdin=PIPE
            _lifeline.stdin.write(message + "\n")
            _lifeline.stdin.flush()
        except OSError:
            pass  # no watcher: PDEATHSIG still ends the direct child


@contextmanager
def _owned(proc: subprocess.Popen):
    """Kill the program's whole group if we leave early (exception, Ctrl-C), and what it left
    running in the background when it ends (nothing a program started outlives it)."""
    try:
        yield
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        _tell_lifeline(f"-{proc.pid}")


def _kill_group(proc: subprocess.Popen) -> tuple[str, str]:
    """SIGKILL the group, reap the child, and return what output it had (bounded wait: a program
    that escaped the group may hold the pipes)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        out, err = proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
        out = err = None
    return out or "", err or ""


class Session:
    """A long-lived program spoken to through its stdin and stdout (`git cat-file --batch`): one
    process for many requests instead of one each. Started, scrubbed and owned like any other
    program (its group dies with pinset); stderr goes to a file, read when something went wrong."""

    def __init__(self, argv: Sequence[str | os.PathLike], *, stderr: Path, cwd: str | os.PathLike | None = None,
                 env: Mapping[str, str] | None = None):
        self.argv = tuple(str(a) for a in argv)
        self._stderr_path = stderr
        self._stderr = stderr.open("w+b")
        try:
            self.proc = _start(self.argv, cwd=cwd, env=child_env(env, self.argv), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=self._stderr)
        except BaseException:
            self._stderr.close()
            raise
        assert self.proc.stdin is not None and self.proc.stdout is not None   # both PIPE
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def stderr_text(self) -> str:
        return self._stderr_path.read_bytes().decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.stdin.close()  # a clean end: EOF
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        _tell_lifeline(f"-{self.proc.pid}")
        for stream in (self.stdin, self.stdout, self._stderr):
            try:
                stream.close()
            except OSError:
                pass


def write_log(log: Path, result: Completed, cwd=None, env=None) -> None:
    """Append the command (as it would be typed), its status and its output to a log file."""
    import shlex

    from pinset.redact import RedactingStream

    log.parent.mkdir(parents=True, exist_ok=True)
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    with log.open("a", encoding="utf-8", errors="surrogateescape") as raw:
        fh = RedactingStream(raw)   # a log is a file pinset writes: no token, no URL credentials
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
    merge_stderr: bool = True,
) -> Completed:
    """Run argv and hand each output line to on_line as it comes (for progress bars of long builds).

    stderr is merged into stdout (a build log reads in order) unless merge_stderr is False (for parsers
    that read the two streams apart; on_line then sees stdout only); on timeout the whole process group
    is killed, so compilers started by ninja go too.
    """
    args = tuple(str(a) for a in argv)
    full_env = child_env(env, args)
    started = time.monotonic()
    try:
        proc = _start(args, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE, text=True, errors="replace",
                      bufsize=1)
    except OSError as exc:
        result = _not_started(args, exc, started)
        if log is not None:
            write_log(log, result, cwd=cwd, env=env)
        return result
    assert proc.stdout is not None   # stdout=PIPE
    lines: list[str] = []
    err_lines: list[str] = []
    live = _open_live_log(log, args, cwd, env)
    live_lock = threading.Lock()

    def pump(stream=None, into=lines, report=True) -> None:
        for line in stream or proc.stdout or ():
            into.append(line)
            if live is not None:
                with live_lock:
                    live.write(line)
                    live.flush()
            if report and on_line is not None:
                try:
                    on_line(line.rstrip("\n"))
                except Exception:  # a broken progress display must not break the build
                    pass

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    err_reader = None
    if not merge_stderr:
        err_reader = threading.Thread(target=pump, args=(proc.stderr, err_lines, False), daemon=True)
        err_reader.start()
    timed_out = False
    with _owned(proc):
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    reader.join(timeout=10)
    if err_reader is not None:
        err_reader.join(timeout=10)
    result = Completed(args, None if timed_out else proc.returncode, "".join(lines), "".join(err_lines),
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
    from pinset.redact import RedactingStream

    log.parent.mkdir(parents=True, exist_ok=True)
    fh = RedactingStream(log.open("a", encoding="utf-8", errors="surrogateescape"))   # no token, no URL credentials in a log
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    fh.write(f"$ {(prefix + ' ') if prefix else ''}{shlex.join(args)}\n")
    if cwd:
        fh.write(f"# cwd: {cwd}\n")
    fh.flush()
    return fh
