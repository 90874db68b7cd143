"""Result files as the report tests read and edit them, and `pinset report` run in-process."""

from __future__ import annotations

import json
from pathlib import Path

from pinset.cli import main


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def dump(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def report(argv, tmp_path, name="out.md"):
    out = tmp_path / name
    rc = main(["report", *map(str, argv), "--markdown", str(out)])
    return rc, (out.read_text(encoding="utf-8") if out.exists() else None)
