"""The one way pinset replaces a folder or file of the user's (a pin's patch folder, `rebase --as-series`'s new
series, `apply --out`'s tree), recoverably, whatever stops the run.

The new folder is made beside the old one under a name that says it is unfinished (`.NAME.pinset-part-PID-R`),
renamed to `.NAME.pinset-new-PID-R` once whole (PID is HOST-PID: a pid is asked only on its own host; another
host's entries count as dead after a day), and the two are swapped by one `renameat2(RENAME_EXCHANGE)`: a
reader, or a run killed at any moment, sees the old folder or the new one, never a mix, and a SIGKILL while the
new one is staged leaves the old one byte-identical. Where the system has no exchange (NFS, CIFS, vfat), two
renames: the old folder to `.NAME.pinset-old-PID-R`, the new one to NAME. Ctrl-C (SIGINT, and SIGTERM, SIGHUP)
never lands between the two: the signals are held (`held_signals`) while a swap's renames run and delivered
when they are done, so an interrupted run exits 130 with the folder swapped or not yet begun, never missing.
The names are the journal: `recover` (called by every reader of pins.yaml, config.schema.load_pinset, and
before every write) finds what a dead run (PID no longer running, a SIGKILL) left and finishes or undoes it:
- NAME missing, `new` and `old` there: killed between the two renames; the new folder is whole, so it goes in
  (completed), the old one goes;
- NAME missing, only `old`: the old folder goes back (rolled back);
- NAME missing, a `part` (a new series' folder that never went in, `rebase --as-series`): it goes;
- NAME there: the swap happened or never began; what is beside it (`part`, `new`, `old`) goes.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
STAGED_RE = re.compile(r"^\.(?P<name>.+)\.pinset-(?P<state>part|new|old)-(?P<host>[A-Za-z0-9]+)-(?P<pid>\d+)"
                       r"-(?P<tag>[0-9a-f]{8})$")
# Another machine's run (a folder on NFS) cannot be asked whether it lives: its entries count as dead this late.
OTHER_HOST_STALE_S = 86400.0
# What a swap holds back until its renames are done: Ctrl-C, a terminal closed, a polite kill.
HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def host_tag() -> str:
    """This machine in a staged name (letters and digits only): a pid means something only on its own host."""
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"


def staged_name(target: Path, state: str, tag: str) -> Path:
    return target.parent / f".{target.name}.pinset-{state}-{host_tag()}-{os.getpid()}-{tag}"


def new_tag() -> str:
    return uuid.uuid4().hex[:8]


@contextmanager
def held_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back for the block (a swap's renames): one that comes meanwhile is delivered
    as the block ends (KeyboardInterrupt, exit 130, after the swap, never between its renames)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _dead(m: re.Match, path: Path) -> bool:
    """Whether the run that made the staged entry `path` (its name matched as `m`) is over."""
    if m["host"] != host_tag():
        try:
            return time.time() - os.lstat(path).st_mtime > OTHER_HOST_STALE_S
        except OSError:
            return False
    return not _pid_alive(int(m["pid"]))


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True   # someone else's live process
    return True


def drop(path: Path) -> None:
    """Remove a staged folder or file (never through a link)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def recover(folder: Path) -> list[str]:
    """Finish or undo what dead runs' swaps left in `folder` (the parent of pins' folders and files); what was
    done, one line each (the caller says it). Live runs' entries are left alone."""
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(".")]
    except OSError:
        return []
    runs: dict[tuple[str, str, str], dict[str, Path]] = {}
    for name in names:
        m = STAGED_RE.match(name)
        if m and _dead(m, Path(folder) / name):
            runs.setdefault((m["name"], m["pid"], m["tag"]), {})[m["state"]] = Path(folder) / name
    done = []
    for (name, pid, _), found in sorted(runs.items()):
        target = Path(folder) / name
        said = None
        if not os.path.lexists(target):
            if "new" in found and "old" in found:   # killed between the two renames: the new folder is whole
                with held_signals():
                    os.rename(found.pop("new"), target)
                said = f"completed the replacement a killed run (pid {pid}) left half-way: the new series is in place"
            elif "old" in found:
                with held_signals():
                    os.rename(found.pop("old"), target)
                said = f"rolled back the replacement a killed run (pid {pid}) left half-way: the old series is back"
            elif "part" in found:   # a folder that never went in (a new series' first write): never whole, it goes
                found = {"part": found["part"]}
            else:
                continue   # no folder and nothing to put back: the user's to judge, left as it is
        for path in found.values():
            drop(path)
        if said or found:
            done.append(f"{target}: {said or f'removed what a killed run (pid {pid}) left staged beside it'}")
    return done


def swap_in(staged: Path, target: Path) -> None:
    """Put `staged` (a whole folder or file beside `target`, named by staged_name) at `target` in one step; the old
    one is removed. Where `target` does not exist (or is an empty folder), one rename. Without an exchange, two
    renames that `recover` completes when the run dies between them; a signal never lands between them."""
    m = STAGED_RE.match(staged.name)
    old = staged_name(target, "old", m["tag"] if m else new_tag())
    gone: Path | None = None
    try:
        with held_signals():
            if not os.path.lexists(target) or _empty_folder(target):
                os.rename(staged, target)   # onto nothing, or onto an empty folder (rename(2) takes its place)
            elif staged.is_dir() == target.is_dir() and _exchange(staged, target):
                gone = staged   # now holds the old one
            elif not staged.is_dir():
                os.replace(staged, target)   # a file: one rename over it
            else:
                os.rename(target, old)
                gone = old
                os.rename(staged, target)
    finally:
        if gone is not None and os.path.lexists(target):
            drop(gone)


def _empty_folder(path: Path) -> bool:
    try:
        return path.is_dir() and not path.is_symlink() and not any(os.scandir(path))
    except OSError:
        return False


def _exchange(a: Path, b: Path) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: no exchange here
        return False
    raise OSError(err, os.strerror(err), str(b))
