"""The tool's cache: the upstream mirror, imported sdists, build dirs, references.

Everything pinset writes outside the paths the user names lives here, never in a user checkout, and
never in /tmp: a killed run leaves its scratch folders in `tmp/` of the cache, where the next run
removes them. Several pinset processes may share one cache at once, so every shared entry is written
whole (temp file + rename) and every step that creates one holds a lock file in `locks/`.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pinset.errors import PinsetError


def default_cache_dir() -> Path:
    if os.environ.get("PINSET_CACHE"):
        return Path(os.environ["PINSET_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, or relative: invalid by the XDG spec (it would put the cache in the cwd)
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pinset"


@dataclass(frozen=True)
class Store:
    root: Path

    @classmethod
    def open(cls, root: str | os.PathLike | None = None) -> "Store":
        path = Path(root).expanduser() if root else default_cache_dir()
        problem: str | None
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a regular file there, a read-only parent...
            problem = "exists and is not a folder" if path.exists() else (exc.strerror or str(exc)).lower()
            raise PinsetError(f"cache {path}: {problem}") from None
        refused = write_problem(path)
        if refused:  # a read-only cache would fail half-way through the first entry it writes
            raise PinsetError(f"cache {path}: cannot write in it ({refused}); give a writable --cache or $PINSET_CACHE")
        return cls(path.resolve())

    @property
    def mirror(self) -> Path:
        return self.root / "mirror.git"

    @property
    def downloads(self) -> Path:
        return self.dir("downloads")

    def dir(self, *parts: str) -> Path:
        path = self.root.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def lock(self, name: str, waiting: str | None = None):
        """An exclusive lock named `name` over the whole cache (see `locked`)."""
        return locked(self.dir("locks") / f"{name}.lock", waiting)

    def scratch(self, prefix: str):
        """A private scratch folder under the cache's tmp/ (see `scratch_dir`); what dead runs left
        there (whatever its name) goes first."""
        clean_scratch(cache_tmp(self.root))
        return scratch_dir(cache_tmp(self.root), prefix)


def write_problem(folder: Path) -> str | None:
    """Why nothing can be created in `folder` ("permission denied"), or None. Really tried (root passes every permission
    check, a read-only mount does not): an unnamed temporary file leaves nothing behind."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    return None


def short_hash(*parts: str, length: int = 12) -> str:
    """Stable key for cache entries built from several strings."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode(errors="surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()[:length]


# --- locks ----------------------------------------------------------------------------------

@contextmanager
def locked(path: Path, waiting: str | None = None) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if needed); the kernel drops it when we die.

    `waiting` is said once on stderr when another process holds the lock, so a second run on a
    busy cache does not look hung.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if waiting:
                print(waiting, file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --- entries written whole ------------------------------------------------------------------

def atomic_write(path: Path, data: bytes) -> None:
    """Write `path` so that a reader (or a run killed half-way) never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def digest_path(path: Path) -> Path:
    """The completion marker of a cache entry: the sha256 of its content, written after it."""
    return path.with_name(path.name + ".sha256")


def write_checked(path: Path, data: bytes) -> None:
    """A cache entry plus its digest marker; `read_checked` takes it only when both agree."""
    atomic_write(path, data)
    atomic_write(digest_path(path), (hashlib.sha256(data).hexdigest() + "\n").encode())


def read_checked(path: Path) -> bytes | None:
    """The entry's content, or None when it is missing, unfinished (no marker) or damaged."""
    try:
        data = path.read_bytes()
        expected = digest_path(path).read_text().strip()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == expected else None


# --- removing inside the cache ----------------------------------------------------------------

def safe_remove(root: Path, path: Path, ignore_errors: bool = False) -> bool:
    """Remove `path` (a file, a folder's whole tree, or a symbolic link) that lies inside `root`, never following a
    link: a link is removed as a link, and an entry reached through a linked folder (`root/builds` a link to
    elsewhere) is not removed at all, since it is not in the cache. Walked with folder descriptors opened without
    following links, so a link swapped in mid-way is not followed either. True when something was removed.
    The one remover of every cache cleaner (cache clean, dead runs' scratch)."""
    root_abs, target = Path(os.path.abspath(root)), Path(os.path.abspath(path))
    try:
        parts = target.relative_to(root_abs).parts
    except ValueError:
        raise ValueError(f"{path} is not inside {root}") from None
    if not parts or ".." in parts:
        raise ValueError(f"{path} is not an entry inside {root}")
    fd = os.open(root_abs, os.O_RDONLY | os.O_DIRECTORY)  # the cache itself may be reached through a link
    try:
        for name in parts[:-1]:
            try:
                inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:  # missing, not a folder, or a link (ELOOP): nothing of the cache to remove there
                return False
            os.close(fd)
            fd = inner
        try:
            st = os.lstat(parts[-1], dir_fd=fd)
        except FileNotFoundError:
            return False
        try:
            if stat.S_ISDIR(st.st_mode) and sys.version_info >= (3, 11):
                shutil.rmtree(parts[-1], dir_fd=fd)  # type: ignore[call-arg]  # fd-based: no link inside is followed
            elif stat.S_ISDIR(st.st_mode):
                shutil.rmtree(target)  # 3.10: the path just walked without links; rmtree follows none inside
            else:
                os.unlink(parts[-1], dir_fd=fd)      # a link goes as a link
        except FileNotFoundError:
            return False
        except OSError:
            if not ignore_errors:
                raise
        return True
    finally:
        os.close(fd)


# --- scratch folders ------------------------------------------------------------------------

def cache_tmp(root: Path) -> Path:
    return Path(root) / "tmp"


class scratch_dir:
    """A new folder `parent/<prefix><pid>-<random>`, removed by close() (or on leaving `with`), or
    by the next run when this process dies first.

    The folder is flock-held while in use: `clean_scratch` removes exactly the folders whose lock
    nobody holds (their run is over, however it ended), never one a live run is using.
    """

    def __init__(self, parent: Path, prefix: str):
        clean_scratch(parent, prefix)
        self._fd: int | None
        self.path, self._fd = _new_held_dir(Path(parent), prefix)

    def close(self) -> None:
        if self._fd is not None:
            safe_remove(self.path.parent, self.path, ignore_errors=True)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc) -> None:
        self.close()


def _new_held_dir(parent: Path, prefix: str) -> tuple[Path, int]:
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        path = parent / f"{prefix}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        path.mkdir()
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # another run's cleaner took it between mkdir and open (not yet held): a new name
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _same_file(fd, path):  # not removed by a cleaner between mkdir and flock
            return path, fd
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def clean_scratch(parent: Path, prefix: str = "") -> list[Path]:
    """Remove the scratch folders (names starting with `prefix`) that dead runs left in `parent`. A `parent` that
    is a symbolic link is not followed (everything in the folder it names would read as dead scratch)."""
    removed: list[Path] = []
    if os.path.islink(parent):
        return removed
    try:
        entries = list(Path(parent).iterdir())
    except OSError:
        return removed
    for path in entries:
        if not path.name.startswith(prefix) or path.is_symlink() or not path.is_dir():
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live run holds it
        try:
            if _same_file(fd, path) and safe_remove(parent, path, ignore_errors=True):
                removed.append(path)
        finally:
            os.close(fd)
    return removed
