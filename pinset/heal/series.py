"""Replacing a pin's patch folder all at once, recoverably.

The new folder is made beside the old one under a name that says it is unfinished (`.NAME.pinset-part-PID-R`: a
copy of everything in it but the `*.patch` files, then the new series and new ledger files), renamed to
`.NAME.pinset-new-PID-R` once whole (PID is HOST-PID: a pid is asked only on its own host; another host's
entries count as dead after a day), and the two are swapped by one `renameat2(RENAME_EXCHANGE)`: a reader, or a
run killed at any moment, sees the old folder or the new one, never a mix. Where the system has no exchange (NFS,
CIFS, vfat), two renames: the old folder to `.NAME.pinset-old-PID-R`, the new one to NAME. The names are the
journal: the next run (`recover`, from every verb that reads pins.yaml, and before every write) finds what a dead
run (PID no longer running) left and finishes it or undoes it:
- NAME missing, `new` and `old` there: killed between the two renames; the new folder is whole, so it goes in
  (completed), the old one goes;
- NAME missing, only `old`: the old folder goes back (rolled back);
- NAME missing, a `part` (a new series' folder that never went in, `rebase --as-series`): it goes;
- NAME there: the swap happened or never began; what is beside it (`part`, `new`, `old`) goes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import socket
import time
import uuid
from pathlib import Path

from pinset.config.ledger import RESOLUTIONS_DIR
from pinset.disk import DiskFull, disk_refusal
from pinset.errors import PinsetError

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_STAGED_RE = re.compile(r"^\.(?P<name>.+)\.pinset-(?P<state>part|new|old)-(?P<host>[A-Za-z0-9]+)-(?P<pid>\d+)"
                        r"-(?P<tag>[0-9a-f]{8})$")
# Another machine's run (a folder on NFS) cannot be asked whether it lives: its entries count as dead this late.
OTHER_HOST_STALE_S = 86400.0


def host_tag() -> str:
    """This machine in a staged name (letters and digits only): a pid means something only on its own host."""
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"


def _staged_name(target: Path, state: str, tag: str) -> Path:
    return target.parent / f".{target.name}.pinset-{state}-{host_tag()}-{os.getpid()}-{tag}"


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


def _drop(path: Path) -> None:
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
        m = _STAGED_RE.match(name)
        if m and _dead(m, Path(folder) / name):
            runs.setdefault((m["name"], m["pid"], m["tag"]), {})[m["state"]] = Path(folder) / name
    done = []
    for (name, pid, _), found in sorted(runs.items()):
        target = Path(folder) / name
        said = None
        if not os.path.lexists(target):
            if "new" in found and "old" in found:   # killed between the two renames: the new folder is whole
                os.rename(found.pop("new"), target)
                said = f"completed the replacement a killed run (pid {pid}) left half-way: the new series is in place"
            elif "old" in found:
                os.rename(found.pop("old"), target)
                said = f"rolled back the replacement a killed run (pid {pid}) left half-way: the old series is back"
            elif "part" in found:   # a folder that never went in (a new series' first write): never whole, it goes
                found = {"part": found["part"]}
            else:
                continue   # no folder and nothing to put back: the user's to judge, left as it is
        for path in found.values():
            _drop(path)
        if said or found:
            done.append(f"{target}: {said or f'removed what a killed run (pid {pid}) left staged beside it'}")
    return done


def stage_new_folder(folder: Path, patches: list[Path]) -> Path:
    """A folder of `patches` alone beside `folder` (not there yet), as `part`: the caller renames it to `folder`
    when the rest of its work is done; a run killed before that leaves a `part` that `recover` removes."""
    part = _staged_name(folder, "part", uuid.uuid4().hex[:8])
    try:
        part.mkdir(parents=True)
        for patch in patches:
            shutil.copyfile(patch, part / patch.name)
    except BaseException as exc:
        shutil.rmtree(part, ignore_errors=True)
        _refused_write(exc, folder)
        raise
    return part


def staged_file_name(path: Path) -> Path:
    """A name beside `path` for a trial copy of it that `recover` removes when the run that made it is dead."""
    return _staged_name(path, "part", uuid.uuid4().hex[:8])


def stage_folder(folder: Path, patches: list[Path], resolutions: dict[str, str] | None = None) -> Path:
    """The new folder beside `folder`: its other files kept, its `*.patch` replaced by `patches`,
    `resolutions` (file name -> text) added to its ledger. Written as `part`, renamed `new` once whole."""
    tag = uuid.uuid4().hex[:8]
    part = _staged_name(folder, "part", tag)
    try:
        shutil.copytree(folder, part, symlinks=True)
        for old in part.glob("*.patch"):
            old.unlink()
        for patch in patches:
            shutil.copyfile(patch, part / patch.name)
        if resolutions:
            (part / RESOLUTIONS_DIR).mkdir(exist_ok=True)
            for name, text in resolutions.items():
                (part / RESOLUTIONS_DIR / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        new = _staged_name(folder, "new", tag)
        os.rename(part, new)
    except BaseException as exc:
        shutil.rmtree(part, ignore_errors=True)
        _refused_write(exc, folder)
        raise
    return new


def _refused_write(exc: BaseException, folder: Path) -> None:
    """A full disk (quota, read-only) while staging: disk.DiskFull naming the path (exit 1), whether it came as
    one OSError or as copytree's list of them (shutil.Error)."""
    failures = exc.args[0] if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) else None
    if failures:
        for item in failures:
            if isinstance(item, tuple) and len(item) == 3 and disk_refusal(str(item[2])):
                raise DiskFull(item[1], str(item[2]).split("] ", 1)[-1].split(":")[0].lower()) from None
    elif isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        raise DiskFull(exc.filename or folder, (exc.strerror or str(exc)).lower()) from None


def swap_in(staged: Path, folder: Path) -> None:
    """Put `staged` at `folder` in one step; the old folder is removed. Without an exchange, two renames that
    `recover` completes when the run dies between them."""
    if _exchange(staged, folder):
        shutil.rmtree(staged, ignore_errors=True)   # now holds the old folder
        return
    m = _STAGED_RE.match(staged.name)
    old = _staged_name(folder, "old", m["tag"] if m else uuid.uuid4().hex[:8])
    os.rename(folder, old)
    os.rename(staged, folder)
    shutil.rmtree(old, ignore_errors=True)


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


def write_folders(items) -> None:
    """Stage every (folder, patches, resolutions) first, then swap each in: a failure while staging
    changes no folder. A pin of one patch file (`patches: x.patch`, or `each: true`) is that file alone,
    replaced by a rename; the folder around it holds other pins' files."""
    items = list(items)
    for parent in sorted({Path(folder).parent for folder, _, _ in items}):
        recover(parent)   # a dead run's half swap of these folders first (the verb said it when it read pins.yaml)
    staged = []
    try:
        for folder, patches, resolutions in items:
            staged.append((stage_file(folder, patches, resolutions) if not folder.is_dir()
                           else stage_folder(folder, patches, resolutions), folder))
    except BaseException:
        for new, _ in staged:
            shutil.rmtree(new, ignore_errors=True) if new.is_dir() else new.unlink(missing_ok=True)
        raise
    for n, (new, folder) in enumerate(staged):
        try:
            if new.is_dir():
                swap_in(new, folder)
            else:
                os.replace(new, folder)
        except BaseException:   # Ctrl-C between two pins: the ones not swapped in yet leave nothing behind
            for later, target in staged[n:]:
                if target.exists():   # (not amid swap_in's two-rename fallback: there `later` is all there is)
                    shutil.rmtree(later, ignore_errors=True) if later.is_dir() else later.unlink(missing_ok=True)
            raise


def stage_file(path: Path, patches: list[Path], resolutions) -> Path:
    """The new text of a one-file pin, beside it (a hidden temp file, renamed over it later)."""
    if len(patches) != 1 or resolutions:
        raise PinsetError(f"{path}: a pin of one patch file takes one patch and no resolutions "
                          f"(got {len(patches)} patches{', resolutions' if resolutions else ''}); nothing written")
    tag = uuid.uuid4().hex[:8]
    part, new = _staged_name(path, "part", tag), _staged_name(path, "new", tag)
    try:
        shutil.copyfile(patches[0], part)
        os.rename(part, new)
    except BaseException as exc:
        part.unlink(missing_ok=True)
        _refused_write(exc, path)
        raise
    return new
