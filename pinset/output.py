"""Writing result files and showing tables: shared by every verb."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rich.console import Console

from pinset.errors import PinsetError

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)


def write_json(path: str | Path, data: dict) -> None:
    """Written whole or not at all (a temporary file renamed): a run killed while writing leaves no cut JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_stale(paths) -> None:
    """Remove the result files a measurement is about to write (None entries skipped): an earlier run's result
    under the same name must not stand in for this run when it is interrupted or fails before writing."""
    for path in paths:
        if path is not None and Path(path).is_file():
            Path(path).unlink()


def write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def check_outputs(files: dict[str, str | Path | None], folders: dict[str, str | Path | None] | None = None,
                  inputs: list[str | Path] = ()) -> None:
    """Before any work starts: every output the user named can be written, so a long run does not end
    in an error (and nothing is half-written). `files` and `folders` map an option (`--json`) to its
    path or None; `inputs` are files the command reads, which no output may overwrite."""
    seen: dict[Path, str] = {}
    read = {_absolute(p): str(p) for p in inputs}
    for kind, named in (("file", files), ("folder", folders or {})):
        for flag, value in named.items():
            if value is None:
                continue
            path = Path(value)
            try:
                problem = _file_problem(path) if kind == "file" else _folder_problem(path)
            except OSError as exc:
                problem = (exc.strerror or str(exc)).lower()
            if problem:
                raise PinsetError(f"{flag} {path}: {problem} (nothing was run)")
            key = _absolute(path)
            if key in seen:
                raise PinsetError(f"{seen[key]} and {flag} both name {path}: give each its own path")
            if key in read:
                raise PinsetError(f"{flag} {path}: would overwrite the input file {read[key]}; "
                                  "write the output elsewhere")
            seen[key] = flag


def _absolute(path: str | Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def _file_problem(path: Path) -> str | None:
    if path.is_dir():
        return "is a folder; give a file name"
    if path.exists():
        writable = os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)
        return None if writable else "exists and is not writable"
    return _missing_parent_problem(path)


def _folder_problem(path: Path) -> str | None:
    if path.exists():
        if not path.is_dir():
            return "exists and is not a folder"
        return _can_create_in(path)
    return _missing_parent_problem(path)


def _missing_parent_problem(path: Path) -> str | None:
    """`path` does not exist: its nearest existing ancestor must be a folder we can create entries in."""
    ancestor = path.parent
    while not ancestor.exists():
        if ancestor.is_symlink():
            return f"{ancestor} is a broken symbolic link"
        if ancestor == ancestor.parent:
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is not a folder"
    return _can_create_in(ancestor)


def _can_create_in(folder: Path) -> str | None:
    """Really try (root passes every permission check, a read-only mount does not): an unnamed temporary
    file leaves nothing behind."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"cannot write in {folder} ({(exc.strerror or str(exc)).lower()})"
    return None

