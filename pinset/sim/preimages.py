"""The preimage blobs a pin's 3-way merge needs, found where `git am -3` finds them, the same on every cache.

`git apply --3way` (and so `git am -3`) builds a patch's merge base from its `index <pre>..<post>` lines: the
blob `pre` of each file, looked up anywhere in the repository. Anywhere in the mirror would depend on what
the cache happens to hold (other builds, sdists, other pin sets' PRs), so here a preimage counts only when,
at the patch's path, one of two histories holds it, where a full clone of upstream has it too:
- the history of the build's own commit (a patch written on an older upstream commit);
- for the preimages that one lacks, the history of upstream's refs: every branch and tag and the default
  branch (a patch written on a newer upstream commit than the build, on a release or side branch, or on an
  sdist build, which has no history of its own).

Upstream's refs are read as this run fetches them (`+refs/heads/*` and `+refs/tags/*` into
`refs/pinset/upstream-refs/<URL key>/`, pruned, and `+HEAD`), once per command (one finder per mirror, `Preimages.of`)
and only when a lookup needs them: never as an earlier run left the refs, so the answer is upstream's as a
clone made now would see it, the same on every cache; unreachable upstream is an UpstreamError then. Not
searched, because a cache holds them or not by its past, not by upstream and the pins: the other builds of
the run (a build's verdict must not depend on the builds beside it: `apply --build X` and `sim`), forks, PR
and forecast refs (a full clone has no `refs/pull/*`), sdist imports, loose objects.

The cost is one question per preimage: one `git cat-file --batch-check` over all of them drops those the
mirror lacks (a fetched commit's history is always whole in the mirror; asked again after the fetch), and
the rest are looked for in one path-limited `git log --raw` per history (memoised per history and path).

A series' later patch often names as preimage a blob its earlier patch creates, which no upstream history
holds: `series_blobs` leaves those out of the question and `replay` makes them, each patch applied on its
own preimages (as the series was written).

Input and output, for the engine and a memo of its results: `Preimages.find(history, wanted)`, history a
commit (None: an sdist), wanted (path, id as the patch writes it) pairs -> {pair: full blob id} of those
available. A memo of an answer that may have used it keys it by `Preimages.key(history)` (the search set's
tips as this run knows them) and keeps no answer whose lookup made the run fetch upstream's refs under the
key made before that fetch (`Preimages.fetched` changed meanwhile).
"""

from __future__ import annotations

import hashlib
import os
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pinset.sim.diffs import DiffError, read_diffs
from pinset.upstream.builds import fetch_upstream_refs
from pinset.upstream.mirror import Mirror


@dataclass(frozen=True)
class FileBlobs:
    """One file of one patch: its path before the patch, the ids its `index` line names, its old mode."""

    path: str
    pre: str
    post: str
    mode: str = "100644"


def series_blobs(texts: list[str]) -> list[list[FileBlobs]]:
    """Per patch of a series, the files whose preimage a 3-way merge needs (not new files)."""
    out: list[list[FileBlobs]] = []
    for text in texts:
        files = []
        try:
            diffs = read_diffs(text)
        except DiffError:
            diffs = []
        for diff in diffs:
            if diff.blobs is None or diff.old is None or not diff.blobs[0].strip("0"):
                continue
            mode = "100755" if "100755" in diff.modes else "100644"
            files.append(FileBlobs(diff.old, diff.blobs[0], diff.blobs[1], mode))
        out.append(files)
    return out


def binary_posts(texts: list[str]) -> list[tuple[str, str]]:
    """(path, postimage id) of each binary change without its data ("Binary files ... differ") whose `index` line
    has full ids: git applies it only where the repository holds that postimage, looked for as a preimage is."""
    out = []
    for text in texts:
        try:
            diffs = read_diffs(text)
        except DiffError:
            continue
        out += [(diff.path, diff.blobs[1]) for diff in diffs
                if diff.binary_without_data and diff.blobs is not None and diff.blobs[1].strip("0")]
    return list(dict.fromkeys(out))


def wanted(series: list[list[FileBlobs]]) -> list[tuple[str, str]]:
    """The (path, preimage) pairs to look for in history: a preimage an earlier patch of the series
    creates at that path is left out (replay makes it)."""
    made: set[tuple[str, str]] = set()
    out: list[tuple[str, str]] = []
    for files in series:
        for f in files:
            if not any(path == f.path and (post.startswith(f.pre) or f.pre.startswith(post)) for path, post in made):
                out.append((f.path, f.pre))
        made |= {(f.path, f.post) for f in files}
    return list(dict.fromkeys(out))


UPSTREAM = "upstream"   # the name of upstream's refs' history in Preimages' memo (a commit id never reads so)


class Preimages:
    """Answers `find` for one mirror (one per mirror: `of`, so every simulator of a command shares its
    fetch of upstream's refs and its memo of each (history, path)'s blob ids)."""

    _of: weakref.WeakKeyDictionary[Mirror, Preimages] = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, mirror: Mirror, upstream: str | None) -> Preimages:
        """The mirror's finder; `upstream`: the URL of upstream (None: a pin set of sdists only)."""
        finder = cls._of.get(mirror)
        if finder is None or finder.upstream != upstream:
            finder = cls._of[mirror] = cls(mirror, upstream)
        return finder

    def __init__(self, mirror: Mirror, upstream: str | None = None):
        self.mirror = mirror
        self.upstream = upstream
        self._walked: dict[tuple[str, str], set[str]] = {}   # (history, path) -> every blob id of path in it
        self._present: dict[str, bool] = {}                   # id as written -> the mirror has an object by that name
        self._trees: dict[str, set[str]] = {}                 # a build's tree -> every blob id it holds (in_tree)
        self._tips: list[str] = []                            # the commits upstream's refs name, as this run fetched them
        self.fetched = False                                  # whether this run fetched them (once, when first needed)

    def key(self, history: str | None) -> tuple[str, ...]:
        """What a memo key of an apply that may use `find(history, ...)` must hold: the search set's tips, as
        far as this run knows them (upstream's refs `unasked` until a lookup needed them: an answer computed
        while they were fetched is not kept under that key, see the engine; then the sha256 of the commits
        they name). Empty: nothing is searched."""
        if history is None and self.upstream is None:
            return ()
        refs = "-" if self.upstream is None else self._tips_digest() if self.fetched else "unasked"
        return ("preimages", history or "-", "upstream-refs", refs)

    def _tips_digest(self) -> str:
        return hashlib.sha256("".join(tip + "\n" for tip in self._tips).encode()).hexdigest() if self._tips else "none"

    def searches(self, history: str | None) -> bool:
        """Whether a lookup for a build of that history (None: an sdist) has anything to search."""
        return history is not None or self.upstream is not None

    def find(self, history: str | None, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """{(path, id): full id} of the pairs whose blob the history of commit `history` (None: none, an
        sdist) or, for those it lacks, the history of upstream's branches and tags holds at `path` (an
        abbreviated id: the one blob of those histories at that path it names)."""
        pairs = list(dict.fromkeys(pairs))
        self._check_present([oid for _, oid in pairs])
        own = [(history, [history])] if history is not None else []
        found = self._match(own, [(path, oid) for path, oid in pairs if self._present[oid]])
        rest = [pair for pair in pairs if pair not in found]
        if rest and self.upstream is not None:
            tips = self.upstream_tips()
            if tips:
                self._check_present([oid for _, oid in rest])
                found.update(self._match([*own, (UPSTREAM, tips)],
                                         [(path, oid) for path, oid in rest if self._present[oid]]))
        return found

    def in_tree(self, tree: str, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """{(path, id): full id} of the pairs whose blob `tree` (a build's) holds at any path: `git am -3` in a
        full clone finds a preimage by its id alone, wherever the build has it (a file upstream copied or
        moved). One `ls-tree -r` per tree, asked only for preimages the histories above lack."""
        if tree not in self._trees:
            listing = self.mirror.git_ok("ls-tree", "-r", "-z", "--full-tree", tree)
            self._trees[tree] = {fields[2] for fields in (entry.split("\t", 1)[0].split() for entry in listing.split("\0"))
                                 if len(fields) == 3 and fields[1] == "blob"}
        blobs = self._trees[tree]
        found = {}
        for path, oid in pairs:
            ids = [full for full in blobs if full.startswith(oid)] if len(oid) < 40 else [oid] if oid in blobs else []
            if len(ids) == 1:
                found[path, oid] = ids[0]
        return found

    def upstream_tips(self) -> list[str]:
        """The commits upstream's branches, tags and default branch name (none: a pin set without upstream, or
        an empty upstream), fetched once per run: the history a full clone made now has. A failed fetch is
        an error (no answer rather than another one)."""
        if not self.fetched and self.upstream is not None:
            self._tips = fetch_upstream_refs(self.upstream, self.mirror, ", needed for the preimages of a 3-way merge")
            self.fetched = True
            self._present = {oid: True for oid, there in self._present.items() if there}   # the fetch may bring some
        return self._tips

    def _match(self, histories: list[tuple[str, list[str]]], pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The pairs whose abbreviated id names exactly one blob of the path in the histories (name, tips)."""
        for name, tips in histories:
            self._walk(name, tips, sorted({path for path, _ in pairs if (name, path) not in self._walked}))
        found = {}
        for path, oid in pairs:
            ids = {full for name, _ in histories for full in self._walked[name, path] if full.startswith(oid)}
            if len(ids) == 1:
                found[path, oid] = ids.pop()
        return found

    def _check_present(self, oids: list[str]) -> None:
        """One `cat-file --batch-check` over the ids not asked before: missing means no history has it."""
        ask = [oid for oid in dict.fromkeys(oids) if oid not in self._present]
        if not ask:
            return
        answer = self.mirror.git_ok("cat-file", "--batch-check", input="".join(oid + "\n" for oid in ask))
        for oid, line in zip(ask, answer.splitlines()):
            self._present[oid] = not line.endswith(" missing")

    def _walk(self, name: str, tips: list[str], paths: list[str]) -> None:
        """Every blob id each path had in the history of the commits `tips` (both sides of every change to it,
        on side branches and in merges too), from one path-limited `git log --raw` (tips on its stdin:
        upstream's may be thousands of tags), kept under `name`."""
        if not paths:
            return
        for path in paths:
            self._walked[name, path] = set()
        log = self.mirror.git_ok("log", "--stdin", "--format=", "--raw", "-z", "--no-abbrev", "--no-renames",
                                 "--full-history", "-m", "--root", "--", *paths, input="".join(t + "\n" for t in tips),
                                 env={"GIT_LITERAL_PATHSPECS": "1"})
        fields = log.split("\0")
        for i, field in enumerate(fields[:-1]):
            meta = field.lstrip("\n")
            if not meta.startswith(":"):
                continue
            parts = meta.split()
            key = (name, fields[i + 1])
            if len(parts) >= 4 and key in self._walked:
                self._walked[key].update(oid for oid in parts[2:4] if oid.strip("0"))


def replay(mirror: Mirror, patches: list[Path], series: list[list[FileBlobs]], found: dict[tuple[str, str], str],
           read: list[Path], index: Path, write: Path) -> None:
    """Write into the object dir `write` the blobs the series creates when each patch is applied on its own
    preimages (those `found`, and those earlier patches made): the preimages its later patches name."""
    made: dict[str, str] = {}   # path -> the blob the last patch that touched it left there
    env = mirror.objects_env(write, read)
    for patch, files in zip(patches, series):
        entries = []
        for f in files:
            oid = found.get((f.path, f.pre)) or (made[f.path] if made.get(f.path, "").startswith(f.pre) else None)
            if oid is None:
                break
            entries.append(f"{f.mode} {oid}\t{f.path}\0")
        else:
            mirror.git_ok("read-tree", "--empty", index=index)
            if entries:
                mirror.git_ok("update-index", "-z", "--index-info", index=index, input="".join(entries))
            if mirror.git("apply", "--cached", "--whitespace=nowarn", str(patch), index=index, env=env).ok:
                listing = mirror.git_ok("ls-files", "-s", "-z", index=index)
                for entry in listing.split("\0"):
                    if entry:
                        info, path = entry.split("\t", 1)
                        made[path] = info.split()[1]


def loose_ids(objects: Path) -> list[str]:
    """Ids of the loose objects in an object dir (what `git apply` wrote there)."""
    out = []
    for sub in sorted(os.listdir(objects)) if objects.is_dir() else []:
        if len(sub) == 2 and (objects / sub).is_dir():
            out += [sub + name for name in sorted(os.listdir(objects / sub)) if len(name) >= 38]
    return out
