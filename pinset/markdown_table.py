"""The one GitHub-flavoured markdown table writer of every verb's --markdown and of the PR comment.

A cell's text comes from programs and people (a git subject, a test's last output line, a pin id):
a `|` in it would start a new column and a newline would end the table, so every cell, header
included, is escaped here rather than by each caller (or forgotten by one).
"""

from __future__ import annotations


def cell(text) -> str:
    """One cell: `|` escaped, line breaks as spaces."""
    return str(text).replace("|", "\\|").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def table(header: list[str], rows: list[list]) -> list[str]:
    """The lines of a table: header, `|---|` rule, one line per row."""
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines
