"""A full disk (or quota, or a read-only file system) named as such, wherever a program says it.

git reports ENOSPC in its own words ("fatal: unable to write loose object file: No space left on device",
"fatal: unable to write new index file", "error: file write error"); read as a plain failed fetch it became
"no such tag" (exit 2, as if the input were wrong). The system refused a write: exit 1 naming the path.
"""

from __future__ import annotations

import re

from pinset.errors import RuntimeFailure

# Lines of git (and other programs) that say the local disk refused a write; `remote:` lines are the
# server's own trouble, not ours.
_FULL_RE = re.compile(r"^(?!remote:)(?:.*(?:no space left on device|disk quota exceeded)|"
                      r"(?:fatal|error): .*(?:read-only file system|unable to write (?:loose object|new index file|file|"
                      r"sha1 file)|file write error|unable to create temporary file))", re.MULTILINE | re.IGNORECASE)


class DiskFull(RuntimeFailure):
    """The system refused a write under `path` (disk full, quota, read-only): exit 1, the path named."""

    def __init__(self, path, detail: str):
        self.path = str(path)
        super().__init__(f"{self.path}: the system refused a write ({detail}); free space there (or point "
                         "--cache/$PINSET_CACHE elsewhere) and run again")


def disk_refusal(output: str) -> str | None:
    """The line of a program's output that says the local disk refused a write, None when there is none."""
    m = _FULL_RE.search(output or "")
    return m.group(0).strip() if m else None


def check_disk(path, output: str) -> None:
    """Raise DiskFull when `output` (a failed program's stderr) says the disk under `path` refused a write."""
    line = disk_refusal(output)
    if line:
        raise DiskFull(path, line)
