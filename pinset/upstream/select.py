"""Turn build selectors into build names, and order builds from oldest to newest.

The ordering rule (pick walks it newest first, selectors take their newest N by it):
- git builds: by upstream history. A build is newer than every build its commit contains;
  builds that do not contain each other follow `git rev-list --topo-order` (children before
  parents, otherwise newer committer date first), so the order is total and the same every time.
- pypi builds: by PEP 440 version among themselves. Mixed with git builds, a pypi build stands at
  the upstream commit its CHANGELOG names, which must then be in the fetched upstream history.
"""

from __future__ import annotations

import fnmatch
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING

from pinset.config.schema import PYPI_BUILD_RE
from pinset.config.selectors import (
    PypiSelector,
    TagSelector,
    age_seconds,
    age_words,
    looks_like_selector,
    parse_selector,
)
from pinset.errors import PinsetError, UpstreamError
from pinset.redact import redact_url
from pinset.upstream.mirror import Mirror
from pinset.upstream.pypi import index_url, project_releases

if TYPE_CHECKING:
    from packaging.version import Version

PYPI_URL_ENV = "PINSET_PYPI_URL"   # read by pypi.index_url(), the one place that resolves the index
_TAGS = "refs/pinset/upstream/tags/"


def expand_builds(names: list[str], upstream_url: str | None, mirror: Mirror) -> list[str]:
    """Plain names stay; each selector becomes its builds, oldest first. Duplicates keep their first place."""
    out: list[str] = []
    for name in names:
        expanded = [name]
        if looks_like_selector(name):
            try:
                selector = parse_selector(name)
            except ValueError as exc:
                raise PinsetError(f"build selector {name!r}: {exc}") from None
            if isinstance(selector, TagSelector):
                if upstream_url is None:
                    raise PinsetError(f"build selector {name!r} needs an `upstream:` to list tags from")
                expanded = newest_tags(selector, upstream_url, mirror)
            else:
                expanded = pypi_versions(selector)
        out += [n for n in expanded if n not in out]
    return out


def newest_tags(selector: TagSelector, url: str, mirror: Mirror) -> list[str]:
    """The `selector.newest` newest tags matching the glob, by upstream history, oldest first."""
    prefix = selector.pattern.split("*")[0].split("?")[0].split("[")[0]
    result = mirror.fetch(url, [f"+refs/tags/{prefix}*:{_TAGS}{prefix}*"])
    if not result.ok:
        raise UpstreamError(f"tags at {redact_url(url)}: could not list them ({result.tail(1)})")
    listing = mirror.git_ok("for-each-ref", "--format=%(refname)%09%(objecttype)%09%(objectname)%09"
                            "%(*objecttype)%09%(*objectname)", _TAGS)
    tags: dict[str, tuple[str, str]] = {}   # name -> (type, id) of what it points at, one tag peeled
    for line in listing.splitlines():
        ref, kind, oid, peeled_kind, peeled = line.split("\t")
        name = ref[len(_TAGS):]
        if fnmatch.fnmatchcase(name, selector.pattern):
            tags[name] = (peeled_kind, peeled) if kind == "tag" else (kind, oid)
    nested = [oid for kind, oid in tags.values() if kind == "tag"]   # a tag of a tag: peel it whole
    if nested:
        peeled_whole = _object_types(mirror, [f"{oid}^{{}}" for oid in nested])
        tags = {name: peeled_whole.get(f"{oid}^{{}}", ("missing", oid)) if kind == "tag" else (kind, oid)
                for name, (kind, oid) in tags.items()}
    commits = {name: oid for name, (kind, oid) in tags.items() if kind == "commit"}
    skipped = sorted(name for name, (kind, _) in tags.items() if kind != "commit")
    for name in skipped:   # upstream has tags of trees and blobs: no build, and no reason to stop
        print(f"pinset: build selector {selector}: tag {name} skipped (it points at a {tags[name][0]}, not a commit)",
              file=sys.stderr)
    if not commits:
        also = f" ({len(skipped)} matching tags point at no commit: {', '.join(skipped[:3])})" if skipped else ""
        raise UpstreamError(f"build selector {selector}: no tag at {redact_url(url)} matches {selector.pattern!r}{also}")
    rank = topo_rank(mirror, list(commits.values()))
    ordered = sorted(commits, key=lambda n: (rank[commits[n]], n))   # newest first
    if selector.min_age:
        times = _commit_times(mirror, list(commits.values()))
        ordered = _old_enough(selector, ordered, {n: times.get(commits[n]) for n in ordered}, "tag")
    return list(reversed(ordered[:selector.newest]))


def _now() -> float:
    return time.time()


def _commit_times(mirror: Mirror, commits: list[str]) -> dict[str, int]:
    """commit -> its committer time (Unix seconds), from one `git log --no-walk`."""
    out = mirror.git_ok("log", "--no-walk=unsorted", "--format=%H %ct", "--stdin",
                        input="".join(f"{c}\n" for c in dict.fromkeys(commits)))
    return {sha: int(t) for sha, t in (line.split() for line in out.splitlines() if line.strip())}


def _old_enough(selector: TagSelector | PypiSelector, newest_first: list[str], times: dict[str, float | None],
                what: str) -> list[str]:
    """The builds (newest first) at least the selector's min-age old; those newer than the newest of them that
    are younger (or of unknown age) are passed over, said on stderr with their age."""
    assert selector.min_age is not None
    limit, now = age_seconds(selector.min_age), _now()
    kept = [n for n in newest_first if times.get(n) is not None and now - (times[n] or 0) >= limit]
    first_kept = newest_first.index(kept[0]) if kept else len(newest_first)
    young = newest_first[:first_kept]
    if young:
        shown = ", ".join(f"{n} ({age_words(now - t) + ' old' if (t := times.get(n)) is not None else 'age unknown'})"
                          for n in young[:5]) + (f" and {len(young) - 5} more" if len(young) > 5 else "")
        print(f"pinset: build selector {selector}: passed over for age (younger than {selector.min_age}): {shown}",
              file=sys.stderr)
    if not kept:
        known = [t for t in times.values() if t is not None]
        oldest = f"the oldest is {age_words(now - min(known))} old" if known else "none has a known age"
        raise UpstreamError(f"build selector {selector}: no {what} is at least {selector.min_age} old "
                            f"({len(newest_first)} match; {oldest})")
    return kept


def _object_types(mirror: Mirror, revs: list[str]) -> dict[str, tuple[str, str]]:
    """rev -> (type, id) of each rev git can name, from one `cat-file --batch-check`."""
    out = mirror.git("cat-file", "--batch-check=%(objecttype) %(objectname) %(rest)",
                     input="".join(f"{rev} {rev}\n" for rev in revs)).stdout
    types = {}
    for line in out.splitlines():   # "TYPE ID REV", or "REV missing"
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[2] in revs:
            types[parts[2]] = (parts[0], parts[1])
    return types


def not_a_commit(mirror: Mirror, rev: str) -> str | None:
    """The type of what `rev` names when it is an object but not a commit (a tag of a tree: "tree"); else None."""
    kind = _object_types(mirror, [f"{rev}^{{}}"]).get(f"{rev}^{{}}", ("", ""))[0]
    return kind if kind and kind != "commit" else None


def topo_rank(mirror: Mirror, commits: list[str]) -> dict[str, int]:
    """Position of each commit in `rev-list --topo-order` of them all: 0 is the newest."""
    wanted = set(commits)
    rank: dict[str, int] = {}
    out = mirror.git_ok("rev-list", "--topo-order", "--stdin", input="\n".join(sorted(wanted)) + "\n")
    for position, sha in enumerate(out.split()):
        if sha in wanted:
            rank[sha] = position
            if len(rank) == len(wanted):
                break
    return rank


def pypi_versions(selector: PypiSelector) -> list[str]:
    """Versions of the package with an sdist that match the specifiers (newest N), oldest first."""
    from packaging.specifiers import SpecifierSet  # here: `packaging` is 15 ms of every run's imports
    from packaging.version import InvalidVersion, Version

    _, releases = project_releases(selector.package, f"build selector {selector}")
    spec = SpecifierSet(selector.specifier)
    prereleases = spec.prereleases is True   # only when a specifier names one (">=0.4.0rc1")
    versions = []
    uploaded: dict[str, float | None] = {}
    for text, files in releases.items():
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        sdists = [f for f in files if isinstance(f, dict) and f.get("packagetype") == "sdist" and not f.get("yanked")] \
            if isinstance(files, list) else []
        if sdists and spec.contains(version, prereleases=prereleases):
            versions.append(version)
            uploaded[str(version)] = _upload_time(sdists[0])
    versions.sort()
    if not versions:
        raise UpstreamError(f"build selector {selector}: no sdist version of {selector.package} matches "
                            f"{selector.specifier!r} at {index_url()}")
    if selector.min_age:
        names = _old_enough(selector, [str(v) for v in reversed(versions)], uploaded, "sdist version")
        versions = [Version(n) for n in reversed(names)]
    if selector.newest:
        versions = versions[-selector.newest:]
    return [f"pypi:{selector.package}=={v}" for v in versions]


def _upload_time(sdist: dict) -> float | None:
    """The sdist's upload time (Unix seconds) from PyPI's `upload_time_iso_8601` (or `upload_time`, UTC)."""
    for key, suffix in (("upload_time_iso_8601", ""), ("upload_time", "+00:00")):
        text = sdist.get(key)
        if isinstance(text, str) and text:
            try:
                return datetime.fromisoformat(text.replace("Z", "+00:00") + ("" if "+" in text or "Z" in text
                                                                              else suffix)).timestamp()
            except ValueError:
                continue
    return None


def order_oldest_first(builds: list, mirror: Mirror) -> list:
    """`builds` (resolved Build objects) sorted by the rule in this module's docstring."""
    git_builds = [b for b in builds if b.source == "git"]
    pypi_builds = [b for b in builds if b.source != "git"]
    if not git_builds:
        return sorted(builds, key=_pypi_version)
    positions = {}
    for b in pypi_builds:
        sha = mirror.rev_parse(b.commit) if b.commit != "unknown" else None
        if sha is None:
            raise PinsetError(f"cannot order {b.name} among git builds: its llama.cpp commit {b.commit} is not in "
                              "the fetched upstream history (list builds of one kind, or fetch further)")
        positions[b.name] = sha
    for b in git_builds:
        positions[b.name] = b.oid
    rank = topo_rank(mirror, list(positions.values()))
    index = {b.name: i for i, b in enumerate(builds)}
    return sorted(builds, key=lambda b: (-rank[positions[b.name]], _pypi_version(b), index[b.name]))


def _pypi_version(build) -> Version:
    from packaging.version import InvalidVersion, Version

    m = PYPI_BUILD_RE.match(build.name)
    try:
        return Version(m["version"]) if m else Version("0")
    except InvalidVersion:
        return Version("0")
