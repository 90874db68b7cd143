"""Helpers shared by the output parsers."""

from __future__ import annotations

import re

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text).replace("\r\n", "\n")


def last_lines(text: str, n: int = 15) -> str:
    return "\n".join(strip_ansi(text).rstrip().splitlines()[-n:])
