"""The one reader of git diff text: each file's names, modes and hunks, with git's own rules.

git writes a path with unusual characters C-style quoted (`"a/ggml/src/ggml-cuda/k\\303\\244.cu"`: octal
escapes of the UTF-8 bytes; `\\t`, `\\"`, `\\\\` whatever core.quotePath says), writes a path with spaces
unquoted and ends its `---`/`+++` line with a tab, and names renames on `rename from`/`rename to` lines.
A hunk is exactly as long as its `@@ -a,b +c,d @@` header says, so a removed line that reads `-- x` or
`--- y` is a line of the file, not a header. Every verb that reads file names out of a patch reads them
here (apply_errors, changes, pins): one set of rules, so no reader counts a quoted file's lines against
the file before it. Pure functions over text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
GITLINK_MODE = "160000"


class DiffError(ValueError):
    """Diff text whose file names git's rules cannot read (the message names the line)."""


def unquote_c(text: str, start: int = 0) -> tuple[str, int]:
    """The C-style quoted string at `text[start]` (a `"`) -> (its value, index after the closing quote).

    Octal escapes are bytes, joined with the raw characters (core.quotePath=false leaves UTF-8 as is) and
    read back as UTF-8. Raises DiffError for anything git's unquote_c_style refuses."""
    if text[start:start + 1] != '"':
        raise DiffError("not a quoted name")
    out = bytearray()
    i, n = start + 1, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            return out.decode("utf-8", errors="replace"), i + 1
        if ch != "\\":
            out += ch.encode("utf-8", errors="surrogateescape")
            i += 1
            continue
        esc = text[i + 1:i + 2]
        if esc in _ESCAPES:
            out.append(_ESCAPES[esc])
            i += 2
        elif re.fullmatch(r"[0-3][0-7][0-7]", text[i + 1:i + 4]):
            out.append(int(text[i + 1:i + 4], 8))
            i += 4
        else:
            raise DiffError(f"bad escape \\{esc} in quoted name")
    raise DiffError("quoted name without its closing quote")


def _strip_prefix(name: str) -> str | None:
    """`a/src/x.c` -> `src/x.c` (git apply -p1: up to the first slash); None without one."""
    if name.startswith("/"):
        return None
    slash = name.find("/")
    return name[slash + 1:] if slash >= 0 and slash + 1 < len(name) else None


def header_name(rest: str) -> str | None:
    """The path of `diff --git <rest>` when both sides name the same file (git's git_header_name); None
    when they differ (a rename: its `rename from/to` lines name it) or cannot be told apart."""
    first: str | None
    second: str | None
    if rest.startswith('"'):
        first, end = unquote_c(rest)
        first = _strip_prefix(first)
        second = rest[end:].lstrip(" \t")
        if first is None or not second:
            return None
        other = _strip_prefix(unquote_c(second)[0]) if second.startswith('"') else _strip_prefix(second)
        return first if other == first else None
    name = _strip_prefix(rest)
    if name is None:
        return None
    quote = rest.find('"')
    if quote >= 0:   # the first name is unquoted: a quote starts the second
        other = _strip_prefix(unquote_c(rest, quote)[0])
        first = rest[:quote].rstrip(" \t")
        return other if other is not None and _strip_prefix(first) == other else None
    # both unquoted, maybe with spaces: the split where both halves name the same path
    for i, ch in enumerate(rest):
        if ch in " \t":
            first, second = _strip_prefix(rest[:i]), _strip_prefix(rest[i + 1:])
            if first is not None and first == second:
                return first
    return None


def _line_name(value: str, *, strip: bool) -> str | None:
    """The path of a `--- `/`+++ ` (strip: the a/ b/ prefix, ends at a tab) or `rename from ` line value."""
    if value.startswith('"'):
        name = unquote_c(value)[0]
    else:
        name = value.split("\t", 1)[0] if strip else value
    if strip:
        if name == "/dev/null":
            return None
        return _strip_prefix(name)
    return name


@dataclass
class Hunk:
    header: str
    old_start: int
    lines: list[str] = field(default_factory=list)   # the body, each line with its ' ', '+', '-' or '\\'


@dataclass
class FileDiff:
    """One `diff --git` section: old is None for an added file, new None for a deleted one."""

    old: str | None
    new: str | None
    line: int                                   # 1-based line of its `diff --git` header
    new_file: bool = False
    deleted: bool = False
    modes: set[str] = field(default_factory=set)  # every mode its header lines name (160000: a gitlink)
    binary_without_data: bool = False           # "Binary files ... differ": git can never apply it
    hunks: list[Hunk] = field(default_factory=list)
    blobs: tuple[str, str] | None = None        # its `index <pre>..<post>` ids (abbreviated as written)

    @property
    def path(self) -> str:
        """The file as the patch leaves it (the old name for a deletion)."""
        return self.new if self.new is not None else self.old  # type: ignore[return-value]

    @property
    def names(self) -> list[str]:
        return [n for n in dict.fromkeys((self.old, self.new)) if n is not None]


_MODE_LINE_RE = re.compile(r"^(?:new file mode|deleted file mode|old mode|new mode) (\d+)$")
_INDEX_MODE_RE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+ (\d+)$")
_INDEX_RE = re.compile(r"^index ([0-9a-f]{4,64})\.\.([0-9a-f]{4,64})(?: \d+)?$")


def read_diffs(text: str) -> list[FileDiff]:
    """Every file section of a patch (format-patch mail, a series of them, or `git diff` output).

    Only a newline ends a line (a form feed inside a C file is part of its line). Raises DiffError naming
    the line when a section's file names cannot be read: unknown must never read as "touches nothing"."""
    out: list[FileDiff] = []
    header: dict[str, str] | None = None   # the open section's header lines (kind -> value); None: no header open
    def_name: str | None = None
    old_left = new_left = 0                # lines the current hunk still has
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()                        # the newline that ends the last line starts no line
    for number, line in enumerate(lines, 1):
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
            elif tag != "\\":
                old_left = new_left = 0    # a hunk cut short (hand-made): the line is read as below
            if old_left or new_left or tag in (" ", "", "-", "+", "\\"):
                out[-1].hunks[-1].lines.append(line or " ")
                continue
        if line.startswith("diff --git "):
            if header is not None:
                _finish(out[-1], header, def_name)
            try:
                def_name = header_name(line[len("diff --git "):])
            except DiffError as exc:
                raise DiffError(f"line {number}: {exc}: {line[:120]}") from None
            out.append(FileDiff(None, None, number))
            header = {}
            continue
        if not out:
            continue
        m = _HUNK_RE.match(line)
        if m:
            if header is not None:
                _finish(out[-1], header, def_name)
                header = None
            old_left = int(m[2]) if m[2] is not None else 1
            new_left = int(m[4]) if m[4] is not None else 1
            out[-1].hunks.append(Hunk(line, int(m[1])))
            continue
        if header is None:
            continue
        if line.startswith(("GIT binary patch", "Binary files ")):
            out[-1].binary_without_data = line.startswith("Binary files ")
            _finish(out[-1], header, def_name)
            header = None
            continue
        for key in ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to "):
            if line.startswith(key):
                try:
                    header[key] = _line_name(line[len(key):], strip=key in ("--- ", "+++ ")) or "/dev/null"
                except DiffError as exc:
                    raise DiffError(f"line {number}: {exc}: {line[:120]}") from None
                break
        else:
            ids = _INDEX_RE.match(line)
            if ids:
                out[-1].blobs = (ids[1], ids[2])
            m = _MODE_LINE_RE.match(line) or _INDEX_MODE_RE.match(line)
            if m:
                out[-1].modes.add(m[1])
                out[-1].new_file |= line.startswith("new file mode")
                out[-1].deleted |= line.startswith("deleted file mode")
    if header is not None:
        _finish(out[-1], header, def_name)
    return out


def _finish(diff: FileDiff, header: dict[str, str], def_name: str | None) -> None:
    """The section's names from its header lines, in git's order: rename/copy, then ---/+++, then the
    `diff --git` line itself."""
    old = header.get("rename from ") or header.get("copy from ") or header.get("--- ") or def_name
    new = header.get("rename to ") or header.get("copy to ") or header.get("+++ ") or def_name
    if diff.new_file or old == "/dev/null":
        old, diff.new_file = None, True
    if diff.deleted or new == "/dev/null":
        new, diff.deleted = None, True
    if old is None and new is None:
        raise DiffError(f"line {diff.line}: the file names of this `diff --git` section cannot be read")
    diff.old, diff.new = old, new


def path_problem(diff: FileDiff) -> str | None:
    """Why git cannot apply this section to a tree: a submodule (gitlink) or a path inside `.git`."""
    for name in diff.names:
        parts = name.split("/")
        if any(part.lower() == ".git" for part in parts):
            return f"touches {name}, a path inside a .git folder (git refuses it: not a file of the tree)"
        if any(part in ("", ".", "..") for part in parts):
            return f"touches {name!r}, not a path inside the tree"
    if GITLINK_MODE in diff.modes or any(line[1:].startswith("Subproject commit ") for hunk in diff.hunks
                                         for line in hunk.lines):
        return (f"adds or changes a submodule at {diff.path} (gitlink, mode {GITLINK_MODE}): a pin can only "
                "change files of the tree, pinset cannot fetch or build a submodule commit")
    return None
