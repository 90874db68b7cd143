"""The tool's cache: the upstream mirror, imported sdists, build dirs, references.

Everything pinset writes outside the paths the user names lives here, never in a user checkout.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from pinset.errors import PinsetError


def default_cache_dir() -> Path:
    if os.environ.get("PINSET_CACHE"):
        return Path(os.environ["PINSET_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pinset"


@dataclass(frozen=True)
class Store:
    root: Path

    @classmethod
    def open(cls, root: str | os.PathLike | None = None) -> "Store":
        path = Path(root).expanduser() if root else default_cache_dir()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a regular file there, a read-only parent...
            problem = "exists and is not a folder" if path.exists() else (exc.strerror or str(exc)).lower()
            raise PinsetError(f"cache {path}: {problem}") from None
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


def short_hash(*parts: str, length: int = 12) -> str:
    """Stable key for cache entries built from several strings."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:length]
