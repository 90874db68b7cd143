"""From a path to YAML nodes, safely: every way a file can be unreadable or hostile is one ConfigError.

The class boundary for bad pins.yaml input: the bytes are read only from a regular file of sane size,
decoded as strict UTF-8 (a UTF-16 or Latin-1 file is named as such, not half-read with replacement
characters), and composed with a nesting limit (PyYAML's composer recurses: 10,000 `[` end in a
RecursionError, and its scanner slows down quadratically long before that) and a limit on the size
after expanding aliases (a "billion laughs" file is small but expands to billions of nodes for anything
that walks it).
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

import yaml

from pinset.errors import ConfigError

MAX_BYTES = 1 << 20     # a pin set is a few KB; anything this large is not one
MAX_DEPTH = 32          # the schema nests 8 deep at most (pins -> pin -> checks -> check -> argv)
MAX_NODES = 100_000     # nodes after expanding aliases

_BOMS = [  # UTF-32 first: its little-endian BOM starts with UTF-16's
    (codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),
]


def read_regular_file(path: Path, what: str = "file") -> bytes:
    """The bytes of a regular file, or ConfigError saying why not (never blocks on a FIFO)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise ConfigError(path, 0, None, f"broken symbolic link (to {os.readlink(path)})") from None
        raise ConfigError(path, 0, None, "no such file") from None
    except NotADirectoryError:
        raise ConfigError(path, 0, None, "no such file (a part of the path is not a folder)") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(path, 0, None, f"cannot read: {_reason(exc)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(path, 0, None, f"is a folder, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(path, 0, None, f"not a regular file (a FIFO, socket or device), not a {what}")
    if st.st_size > MAX_BYTES:
        raise ConfigError(path, 0, None, f"{st.st_size} bytes: too large for a {what} (limit {MAX_BYTES})")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(path, 0, None, f"cannot read: {_reason(exc)}") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(path, 0, None, f"too large for a {what} (limit {MAX_BYTES} bytes)")
    return data


def decode_utf8(path: Path, data: bytes) -> str:
    """Strict UTF-8 (a UTF-8 byte-order mark is allowed); other encodings are named, with the line."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise ConfigError(path, 0, None, f"encoded as {name} (it starts with a {name} byte-order mark); "
                                             "pinset reads UTF-8: convert it, e.g. with iconv -t UTF-8")
    if b"\0" in data:
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
        raise ConfigError(path, line, None, "contains NUL bytes: not UTF-8 text (UTF-16 without a "
                                            "byte-order mark, or a binary file?)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if data.startswith(codecs.BOM_UTF8) else 0)
        line = data.count(b"\n", 0, start) + 1
        column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        raise ConfigError(path, line, None, f"not UTF-8: byte 0x{data[start]:02x} in column {column} "
                                            "(Latin-1 or another encoding?); save the file as UTF-8") from None


def compose(path: Path, text: str):
    """The YAML node tree of `text` (None for an empty document), or ConfigError with the line."""
    loader = None
    try:
        loader = _LimitedLoader(text, path)  # checks every character: may raise ReaderError
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = "; ".join(p for p in (exc.context, exc.problem) if p)
        raise ConfigError(path, mark.line + 1 if mark else 0, None, f"not valid YAML: {what}") from None
    except yaml.YAMLError as exc:  # ReaderError: a character YAML does not allow
        position = getattr(exc, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else 0
        raise ConfigError(path, line, None, f"not valid YAML: {str(exc).splitlines()[0]}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if root is not None:
        _check_expanded_size(path, root)
    return root


class _LimitedLoader(yaml.SafeLoader):
    def __init__(self, stream, path: Path):
        super().__init__(stream)
        self._path = path
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(self._path, mark.line + 1, None,
                                  f"nested more than {MAX_DEPTH} levels deep (a pin set needs at most 8)")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_expanded_size(path: Path, root) -> None:
    """Count the nodes a walk would visit with aliases expanded; refuse cycles and alias bombs.

    Iterative, memoised per node: linear in the composed (unexpanded) graph. `active` holds the nodes
    on the path from the root to the one being walked: a child among them is a cycle."""
    size: dict[int, int] = {}
    active: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            active.discard(key)
            total = 1 + sum(size[id(c)] for c in _children(node))
            if total > MAX_NODES:
                raise ConfigError(path, node.start_mark.line + 1, None,
                                  f"more than {MAX_NODES} values once aliases (*name) are expanded")
            size[key] = total
            continue
        if key in size:
            continue
        active.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in active:
                raise ConfigError(path, child.start_mark.line + 1, None,
                                  "an alias (*name) refers to a node that contains it")
            if id(child) not in size:
                stack.append((child, False))


def _children(node):
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _reason(exc: BaseException) -> str:
    return (exc.strerror or str(exc)).lower() if isinstance(exc, OSError) else str(exc)
