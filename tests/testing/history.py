"""Long upstream histories for tests and benchmarks, written with one `git fast-import` (thousands of
commits in well under a second, instead of one `git commit` process each)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


class FastHistory:
    """Collects commits as a fast-import stream; `write(repo_path)` imports them and returns mark -> sha."""

    def __init__(self, start_time: int = 1_700_000_000):
        self._chunks: list[bytes] = []
        self._marks = 0
        self._time = start_time

    def commit(self, message: str, files: dict[str, str | bytes | None] | None = None, *,
               branch: str = "master", parent: int | None = None, merge: int | None = None,
               at: int | None = None) -> int:
        """A commit on `branch` (after its tip, or after mark `parent`); `merge`: a second parent's mark;
        `at`: its author and committer time (Unix seconds; default a minute after the previous commit's).

        `files` maps paths to new contents (None deletes the path). Returns the commit's mark.
        """
        self._marks += 1
        self._time = at if at is not None else self._time + 60
        who = f"t <t@example.com> {self._time} +0000"
        msg = message.encode()
        out = [f"commit refs/heads/{branch}\nmark :{self._marks}\nauthor {who}\ncommitter {who}\n".encode(),
               f"data {len(msg)}\n".encode(), msg, b"\n"]
        if parent is not None:
            out.append(f"from :{parent}\n".encode())
        if merge is not None:
            out.append(f"merge :{merge}\n".encode())
        for path, text in (files or {}).items():
            if text is None:
                out.append(f"D {path}\n".encode())
                continue
            data = text.encode() if isinstance(text, str) else text
            out += [f"M 100644 inline {path}\ndata {len(data)}\n".encode(), data, b"\n"]
        out.append(b"\n")
        self._chunks.append(b"".join(out))
        return self._marks

    def tag(self, name: str, mark: int) -> None:
        self._chunks.append(f"reset refs/tags/{name}\nfrom :{mark}\n\n".encode())

    def ref(self, ref: str, mark: int) -> None:
        self._chunks.append(f"reset {ref}\nfrom :{mark}\n\n".encode())

    def write(self, repo: Path) -> dict[int, str]:
        """Import into the git repository at `repo` (work tree or bare); return mark -> commit sha."""
        marks = Path(repo) / ".." / f".{Path(repo).name}-marks"
        env = dict(os.environ, **GIT_ENV)
        subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet", f"--export-marks={marks}"],
                       input=b"".join(self._chunks), check=True, env=env, capture_output=True)
        out = {}
        for line in marks.read_text().splitlines():
            mark, sha = line.split()
            out[int(mark[1:])] = sha
        marks.unlink()
        return out
