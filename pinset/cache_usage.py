"""What the cache holds, by kind, and removing what can be made again (`pinset cache info|clean`).

Build folders are the bulk (a llama.cpp CPU or CUDA build is hundreds of MB). Removal respects the locks
running pinsets hold (store.py): a build folder whose `lock` is held, a download whose lock is held, a
scratch folder of a live run are left alone and said to be in use. Only entries of the cache's own layout
are touched; symbolic links are removed as links, never followed (a kind folder that is a link included: the
link goes, what it names stays), so nothing outside the cache goes (store.safe_remove does every removal).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pinset.store import clean_scratch, safe_remove

# top-level entry -> kind (anything else is "other")
KINDS = {"mirror.git": "mirror", "downloads": "sdists", "builds": "builds", "ccache": "ccache",
         "pins": "results", "kld-ref": "results", "logs": "results", "memo": "memo", "moved": "memo",
         "tmp": "scratch", "locks": "other"}
KIND_ORDER = ("mirror", "sdists", "builds", "ccache", "results", "memo", "scratch", "other")
# sim's remembered answers (sim/memo.py: memo/apply, memo/build, memo/objects; sim/moved.py: moved/): each file
# is an entry, taken whatever its age (a missing or half-gone answer is only a miss: the run works it out again)
MEMO_FOLDERS = ("memo", "moved")
# entries no lock protects (PR diffs, KLD references, logs) are only taken when untouched this long: a
# running kld or verify has written its own within the last minutes
UNLOCKED_MIN_AGE_S = 3600.0


@dataclass
class Usage:
    kind: str
    bytes: int = 0
    files: int = 0
    entries: int = 0  # build folders, sdists, ... (top-level items of the kind's folder)

    def to_json(self) -> dict:
        return {"kind": self.kind, "bytes": self.bytes, "files": self.files, "entries": self.entries}


@dataclass(frozen=True)
class Entry:
    """One removable item: a build folder, an sdist with its marker, a PR diff, a KLD reference..."""

    kind: str
    path: Path
    bytes: int
    mtime: float  # its last use (the newest modification of it or its direct children)
    lock: Path | None = None  # held by a run that uses it

    def to_json(self, root: Path) -> dict:
        return {"kind": self.kind, "path": str(self.path.relative_to(root)), "bytes": self.bytes,
                "age_days": round(max(0.0, time.time() - self.mtime) / 86400, 2)}


def tree_size(path: Path) -> tuple[int, int]:
    """(bytes on disk, files) under `path`, links not followed, each hard-linked inode once."""
    seen: set[tuple[int, int]] = set()
    total = files = 0
    stack = [path]
    while stack:
        p = stack.pop()
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        total += st.st_blocks * 512
        if stat.S_ISDIR(st.st_mode):
            try:
                stack.extend(Path(e.path) for e in os.scandir(p))
            except OSError:
                pass
        else:
            files += 1
    return total, files


def _last_use(path: Path) -> float:
    try:
        newest = os.lstat(path).st_mtime
        if path.is_dir() and not path.is_symlink():
            for e in os.scandir(path):
                try:
                    newest = max(newest, e.stat(follow_symlinks=False).st_mtime)
                except OSError:
                    pass
    except OSError:
        return 0.0
    return newest


def usage(root: Path) -> list[Usage]:
    """Sizes by kind; kinds with nothing in them are listed too (0 bytes)."""
    by_kind = {kind: Usage(kind) for kind in KIND_ORDER}
    if not root.is_dir():
        return list(by_kind.values())
    for e in os.scandir(root):
        kind = KINDS.get(e.name, "other")
        size, files = tree_size(Path(e.path))
        u = by_kind[kind]
        u.bytes += size
        u.files += files
        if e.is_dir(follow_symlinks=False) and kind not in ("mirror", "other"):
            u.entries += sum(1 for c in os.scandir(e.path) if not c.name.startswith(".") and not c.name.endswith(".sha256"))
        elif kind in ("mirror", "other"):
            u.entries += 1
    return list(by_kind.values())


def removable(root: Path, builds_only: bool) -> list[Entry]:
    """The entries `clean` may take: build folders, and unless `builds_only` sdists, PR diffs, KLD
    references and logs. Never the mirror (refetching upstream's history is the slow part) nor ccache
    (ccache bounds its own size)."""
    out: list[Entry] = []
    kinds = ("builds",) if builds_only else ("builds", "downloads", "pins", "kld-ref", "logs", *MEMO_FOLDERS, "tmp")

    def children(folder: str):
        if folder not in kinds or (root / folder).is_symlink():
            return []  # a kind folder that is a link: the link is the entry (below), what it names is not the cache's
        try:
            return sorted(Path(e.path) for e in os.scandir(root / folder))
        except OSError:
            return []

    for folder in kinds:
        if (root / folder).is_symlink():
            out.append(Entry(KINDS[folder], root / folder, tree_size(root / folder)[0], 0.0))
    for path in children("builds"):
        if path.name.startswith(".trash-"):  # a clean that died half-way
            out.append(Entry("builds", path, tree_size(path)[0], 0.0))
        elif path.is_symlink():  # a "build folder" that is a link: removed as a link
            out.append(Entry("builds", path, tree_size(path)[0], 0.0))
        elif path.is_dir():
            out.append(Entry("builds", path, tree_size(path)[0], _last_use(path), path / "lock"))
    if builds_only:
        return out
    for path in children("downloads"):
        if path.name.startswith(".") or path.name.endswith((".sha256", ".part")):
            continue  # locks, markers (they go with their sdist), unfinished downloads (resumed later)
        lock = _download_lock(path)
        out.append(Entry("sdists", path, tree_size(path)[0] + tree_size(_marker(path))[0], _last_use(path), lock))
    for folder in ("pins", "kld-ref", "logs"):
        for path in children(folder):
            if path.name.endswith(".sha256"):
                continue
            out.append(Entry("results", path, tree_size(path)[0] + tree_size(_marker(path))[0], _last_use(path)))
    for folder in MEMO_FOLDERS:
        if (root / folder).is_dir() and not (root / folder).is_symlink():
            for path in _memo_files(root / folder):
                out.append(Entry("memo", path, tree_size(path)[0] + tree_size(_marker(path))[0], _last_use(path)))
    return out


def _memo_files(folder: Path) -> list[Path]:
    """Every answer file under a memo folder (its digest marker goes with it), links not followed (a link is
    an entry of its own, removed as a link); a write in progress (`.NAME.tmp`) is not an answer yet."""
    found: list[Path] = []
    for top, subdirs, files in os.walk(folder):
        links = [d for d in subdirs if os.path.islink(os.path.join(top, d))]
        subdirs[:] = sorted(d for d in subdirs if d not in links)
        found += [Path(top) / name for name in sorted([*files, *links])
                  if not name.startswith(".") and not name.endswith(".sha256")]
    return found


def _prune_empty(root: Path) -> None:
    """The memo's shard folders left empty by a clean (never the memo folders themselves, never through a link)."""
    for folder in MEMO_FOLDERS:
        if not (root / folder).is_dir() or (root / folder).is_symlink():
            continue
        for top, subdirs, _ in os.walk(root / folder, topdown=False):
            for name in subdirs:
                try:
                    os.rmdir(os.path.join(top, name))   # only an empty folder goes (a link: ENOTDIR)
                except OSError:
                    pass


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _download_lock(sdist: Path) -> Path | None:
    """pypi.download_sdist's lock for this file (`.NAME-VERSION.lock`), from the sdist's file name."""
    stem = sdist.name.removesuffix(".tar.gz").removesuffix(".zip")
    name, sep, version = stem.rpartition("-")
    return sdist.parent / f".{name.lower()}-{version}.lock" if sep else None


@dataclass
class CleanResult:
    removed: list[Entry]
    in_use: list[Entry]
    scratch: list[Path]  # what dead runs left in tmp/

    @property
    def freed(self) -> int:
        return sum(e.bytes for e in self.removed)


def clean(root: Path, *, older_than_days: float | None, builds_only: bool, dry_run: bool,
          now: float | None = None) -> CleanResult:
    now = time.time() if now is None else now
    removed, in_use = [], []
    for entry in removable(root, builds_only):
        age = now - entry.mtime
        if older_than_days is not None and age < older_than_days * 86400:
            continue
        if entry.lock is None and entry.kind not in ("builds", "memo") and age < UNLOCKED_MIN_AGE_S:
            in_use.append(entry)  # no lock says whether a run uses it: a fresh one may be in use
            continue
        if dry_run:
            if _held(entry.lock):
                in_use.append(entry)
            else:
                removed.append(entry)
            continue
        if _remove(root, entry):
            removed.append(entry)
        else:
            in_use.append(entry)
    scratch = [] if dry_run or builds_only else clean_scratch(root / "tmp")
    if not dry_run and not builds_only:
        _prune_empty(root)
    return CleanResult(removed, in_use, scratch)


def _held(lock: Path | None) -> bool:
    if lock is None or not lock.exists() or lock.is_symlink():
        return False
    with _try_lock(lock) as taken:
        return not taken


@contextmanager
def _try_lock(lock: Path) -> Iterator[bool]:
    """Take the flock on `lock` without waiting: True while we hold it (until the block ends), False when a
    running pinset holds it."""
    with open(os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)) as fh:  # a lock file is never a link (see _remove)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                yield False
                return
            raise
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove(root: Path, entry: Entry) -> bool:
    """Remove the entry unless a run holds its lock; False when it is in use. A locked entry is renamed
    away while the lock is held (a run that comes next finds no folder, and makes a new one), then deleted."""
    if entry.lock is None or not entry.lock.exists() or entry.lock.is_symlink():
        _delete(root, entry.path)
        _delete(root, _marker(entry.path))
        return True
    with _try_lock(entry.lock) as taken:
        if not taken:
            return False
        if entry.kind == "builds":
            trash = entry.path.with_name(f".trash-{entry.path.name}-{uuid.uuid4().hex[:8]}")
            os.rename(entry.path, trash)
        else:
            trash = entry.path
            _delete(root, _marker(entry.path))
            _delete(root, entry.path)
    _delete(root, trash)
    return True


def _delete(root: Path, path: Path) -> None:
    """store.safe_remove: a link goes as a link, nothing reached through a link goes."""
    safe_remove(root, path)


def human(size: int) -> str:
    n = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"
