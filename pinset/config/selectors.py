"""Build selectors: entries of `builds:` / `--builds` that stand for several builds, chosen at run time.

    tags:PATTERN:N[:AGE]           the N newest upstream tags matching PATTERN (a glob: `tags:b*:3`)
    pypi:PACKAGE SPECIFIERS[:N][:AGE]  every sdist version of PACKAGE matching PEP 440 SPECIFIERS, or the N
                                   newest of them (`pypi:llama-cpp-python>=0.3.33`, `...>=0.3.30,<0.4:2`)

AGE is a minimum age (`48h`, `2d`, `90m`, `1w`): only builds at least that old count, measured from the tag's
commit time (committer date) or the sdist's upload time, so a build younger than that is never picked or
shipped (`tags:b*:3:48h`: the 3 newest tags at least 48 hours old; `pypi:llama-cpp-python>=0.3.33:48h`).
pins.yaml also takes them as mappings, normalised to the strings above:
`{tags: {match: "b*", newest: 3, min-age: 48h}}`, `{pypi: {package: llama-cpp-python, versions: ">=0.3.33",
newest: 2, min-age: 2d}}`.
"Newest" of tags follows upstream history (a tag is newer than the tags its commit contains), not
the names; of pypi versions, PEP 440 version order. Pure: parsing and validation only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TAGS_RE = re.compile(r"^tags:(?P<pattern>[^:\s]+)(?::(?P<newest>[^:]*))?(?::(?P<age>[^:]*))?$")
PYPI_RANGE_RE = re.compile(r"^pypi:(?P<package>[A-Za-z0-9_.-]+)\s*(?P<spec>(?:~=|===|==|!=|<=|>=|<|>)[^:]*)"
                           r"(?::(?P<newest>[^:]*))?(?::(?P<age>[^:]*))?$")
AGE_RE = re.compile(r"^(?P<count>[0-9]{1,6})(?P<unit>[mhdw])$")
AGE_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
AGE_RULE = "a whole number and a unit: 90m, 48h, 2d, 1w"


def age_seconds(text: str) -> int:
    """A minimum age (`48h`) in seconds; ValueError naming the rule when it is not one."""
    m = AGE_RE.match(text)
    if not m or int(m["count"]) == 0:
        raise ValueError(f"min-age: {text!r} is not a duration ({AGE_RULE})")
    return int(m["count"]) * AGE_UNITS[m["unit"]]


def age_words(seconds: float) -> str:
    """An age as people say it: `5 h`, `3 d`, `40 min`."""
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{max(seconds, 0) / 60:.0f} min"
_OPERATOR_RE = re.compile(r"^\s*(?:~=|===|==|!=|<=|>=|<|>)")
_TAG_PATTERN_RE = re.compile(r"^[A-Za-z0-9_.*?\[\]!/+-]+$")


@dataclass(frozen=True)
class TagSelector:
    pattern: str      # glob over tag names
    newest: int
    min_age: str | None = None   # "48h": only tags whose commit is at least this old

    def __str__(self) -> str:
        return f"tags:{self.pattern}:{self.newest}" + (f":{self.min_age}" if self.min_age else "")


@dataclass(frozen=True)
class PypiSelector:
    package: str
    specifier: str    # PEP 440 specifier set, e.g. ">=0.3.33,<0.4"
    newest: int | None = None
    min_age: str | None = None   # "48h": only versions whose sdist was uploaded at least this long ago

    def __str__(self) -> str:
        return f"pypi:{self.package}{self.specifier}" + (f":{self.newest}" if self.newest else "") + \
            (f":{self.min_age}" if self.min_age else "")


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
        return TagSelector(_pattern(m["pattern"]), newest, _age(m["age"]))
    m = PYPI_RANGE_RE.match(text)
    if m:
        newest_text, age = m["newest"], m["age"]
        if age is None and newest_text and AGE_RE.match(newest_text):   # pypi:P>=V:48h (no count)
            newest_text, age = None, newest_text
        return PypiSelector(m["package"], specifier(m["spec"]), _newest(newest_text, required=False), _age(age))
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


def _age(text: str | None) -> str | None:
    if text is None:
        return None
    age_seconds(text)
    return text


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
