"""Build selectors: entries of `builds:` / `--builds` that stand for several builds, chosen at run time.

    tags:PATTERN:N                 the N newest upstream tags matching PATTERN (a glob: `tags:b*:3`)
    pypi:PACKAGE SPECIFIERS[:N]    every sdist version of PACKAGE matching PEP 440 SPECIFIERS, or the N
                                   newest of them (`pypi:llama-cpp-python>=0.3.33`, `...>=0.3.30,<0.4:2`)

pins.yaml also takes them as mappings, normalised to the strings above:
`{tags: {match: "b*", newest: 3}}`, `{pypi: {package: llama-cpp-python, versions: ">=0.3.33", newest: 2}}`.
"Newest" of tags follows upstream history (a tag is newer than the tags its commit contains), not
the names; of pypi versions, PEP 440 version order. Pure: parsing and validation only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TAGS_RE = re.compile(r"^tags:(?P<pattern>[^:\s]+)(?::(?P<newest>[^:]*))?$")
PYPI_RANGE_RE = re.compile(r"^pypi:(?P<package>[A-Za-z0-9_.-]+)\s*(?P<spec>(?:~=|===|==|!=|<=|>=|<|>)[^:]*)"
                           r"(?::(?P<newest>[^:]*))?$")
_OPERATOR_RE = re.compile(r"^\s*(?:~=|===|==|!=|<=|>=|<|>)")
_TAG_PATTERN_RE = re.compile(r"^[A-Za-z0-9_.*?\[\]!/+-]+$")


@dataclass(frozen=True)
class TagSelector:
    pattern: str      # glob over tag names
    newest: int

    def __str__(self) -> str:
        return f"tags:{self.pattern}:{self.newest}"


@dataclass(frozen=True)
class PypiSelector:
    package: str
    specifier: str    # PEP 440 specifier set, e.g. ">=0.3.33,<0.4"
    newest: int | None = None

    def __str__(self) -> str:
        return f"pypi:{self.package}{self.specifier}" + (f":{self.newest}" if self.newest else "")


Selector = TagSelector | PypiSelector


def looks_like_selector(text: str) -> bool:
    return text.startswith("tags:") or bool(PYPI_RANGE_RE.match(text)) and not re.match(
        r"^pypi:[A-Za-z0-9_.-]+==[A-Za-z0-9_.+-]+$", text)


def parse_selector(text: str) -> Selector:
    """The selector `text` names; ValueError with a one-line reason when it is malformed."""
    m = TAGS_RE.match(text)
    if m:
        newest = _newest(m["newest"], required=True)
        assert newest is not None   # required: a count or ValueError
        return TagSelector(_pattern(m["pattern"]), newest)
    m = PYPI_RANGE_RE.match(text)
    if m:
        return PypiSelector(m["package"], specifier(m["spec"]), _newest(m["newest"], required=False))
    if text.startswith("tags:"):
        raise ValueError(f"malformed tag selector {text!r} (tags:PATTERN:N, e.g. tags:b*:3)")
    raise ValueError(f"malformed selector {text!r} (tags:PATTERN:N or pypi:PACKAGE>=VERSION)")


def specifier(text: str) -> str:
    """A PEP 440 specifier set, normalised (no spaces); ValueError when invalid."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # here: 15 ms of imports no plain build name needs

    try:
        spec = SpecifierSet(text.replace(" ", ""))
    except InvalidSpecifier:
        raise ValueError(f"malformed version specifier {text.strip()!r} (e.g. >=0.3.33 or >=0.3.30,<0.4)") from None
    if not str(spec):
        raise ValueError("empty version specifier")
    return ",".join(sorted(str(s) for s in spec))


def _pattern(pattern: str) -> str:
    if not _TAG_PATTERN_RE.match(pattern) or ".." in pattern:
        raise ValueError(f"malformed tag pattern {pattern!r} (a glob over tag names, e.g. b*)")
    return pattern


def _newest(text: str | None, *, required: bool) -> int | None:
    if text is None or text == "":
        if required:
            raise ValueError("a tag selector needs how many of the newest tags (tags:PATTERN:N, e.g. tags:b*:3)")
        return None
    if not re.fullmatch(r"[0-9]+", text) or not 1 <= int(text) <= 1000:
        raise ValueError(f"newest: {text!r} is not a count from 1 to 1000")
    return int(text)


def split_builds(text: str) -> list[str]:
    """--builds: comma-separated, where a piece starting with a version operator continues a pypi range."""
    names: list[str] = []
    for piece in text.split(","):
        piece = piece.strip()
        if names and _OPERATOR_RE.match(piece) and PYPI_RANGE_RE.match(names[-1]):
            names[-1] += "," + piece
        elif piece:
            names.append(piece)
    return names
