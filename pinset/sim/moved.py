"""Index of a build's whole tree for the pins' added lines: finds a pin upstream landed in moved code.

Upstream often lands a pin's change in another shape (a file split or renamed), so the same-path
check misses it and the pin shows as a conflict. Only lines some pin adds are indexed ("needles").
Trees and blobs are read in batches (one `git cat-file --batch` per folder level, one for the new
blobs) and cached by object id, so a blob or an unchanged folder is read once per run whatever the number of pins or builds sharing it: consecutive
upstream commits (blame's probes) differ in a few folders only.

A tree's index is also kept in the cache (`moved/`), named by the tree id and a digest of the needles:
both fix its content, so a later run with the same pins never reads the tree again (reading and
splitting every blob of a llama.cpp tree is seconds; the stored index is a few kB).
"""

from __future__ import annotations

import hashlib
import json

from pinset.sim.changes import MovedMatch, moved_match
from pinset.sim.memo import code_digest, fits
from pinset.store import read_checked, write_checked
from pinset.upstream.mirror import Mirror, parse_tree

MAX_BLOB_BYTES = 1_000_000   # larger files are data (vocabularies, models), not code a pin adds to
_STORED_FORMAT = "moved-1"   # a change of what an index holds (or of MAX_BLOB_BYTES) gives new names

Locations = dict[str, dict[str, int]]   # needle -> {path: count}


class TreeLines:
    def __init__(self, mirror: Mirror, needles: set[str]):
        self.mirror = mirror
        self._needles = {n.encode(errors="surrogateescape") for n in needles}   # the bytes (changes.patch_text)
        self._blobs: dict[str, dict[str, int]] = {}   # blob -> {needle: count}
        self._trees: dict[str, Locations] = {}        # tree or folder -> locations relative to it
        self._listed: dict[str, list[tuple[bytes, str, str]]] = {}   # tree or folder -> its entries
        # (and the engine's identity: an index another pinset made is not this one's)
        digest = hashlib.sha256(f"{_STORED_FORMAT} {MAX_BLOB_BYTES} {code_digest()}\n".encode())
        for needle in sorted(self._needles):
            digest.update(needle + b"\n")
        self._stored_key = digest.hexdigest()[:24]

    def locations(self, tree: str) -> Locations:
        if tree not in self._trees:
            stored = self._stored(tree)
            if stored is None:
                self._read_new_blobs(tree)
                stored = self._locations(tree)
                self._store(tree, stored)
            self._trees[tree] = stored
        return self._trees[tree]

    def _stored_path(self, tree: str):
        return self.mirror.cache / "moved" / f"{tree}-{self._stored_key}.json"

    def _stored(self, tree: str) -> Locations | None:
        """The index an earlier run stored for this tree and these needles (None: none, or damaged)."""
        data = read_checked(self._stored_path(tree))
        if data is None:
            return None
        try:
            found = json.loads(data)
        except (ValueError, RecursionError):
            return None
        if not fits(found, Locations) or not all(n > 0 for places in found.values() for n in places.values()):
            return None   # not of the shape _store writes: a miss
        return found

    def _store(self, tree: str, found: Locations) -> None:
        path = self._stored_path(tree)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_checked(path, json.dumps(found, separators=(",", ":")).encode())
        except OSError:
            pass  # a cache that cannot take it: the next run reads the tree again

    def _locations(self, tree: str) -> Locations:
        if tree in self._trees:
            return self._trees[tree]
        found: Locations = {}
        for mode, name, oid in self._entries(tree):
            if mode == b"40000":
                for needle, places in self._locations(oid).items():
                    into = found.setdefault(needle, {})
                    for path, count in places.items():
                        into[f"{name}/{path}"] = count
            elif mode in (b"100644", b"100755"):
                for needle, count in self._blobs[oid].items():
                    found.setdefault(needle, {})[name] = count
        self._trees[tree] = found
        return found

    def _entries(self, tree: str) -> list[tuple[bytes, str, str]]:
        """(mode, name, hex id) of a tree object read by _list."""
        if tree not in self._listed:
            self._list([tree])
        return self._listed[tree]

    def _list(self, trees: list[str]) -> None:
        """Read tree objects in one batch, parsed from git's binary tree format."""
        for tree, data in self.mirror.read_objects(trees).items():
            self._listed[tree] = parse_tree(data)

    def _read_new_blobs(self, tree: str) -> None:
        """Index the blobs of `tree` not seen yet: folders level by level, the blobs' sizes in one
        `cat-file --batch-check`, then the text of the small ones in one batch."""
        new: list[str] = []
        level = [tree]
        while level:
            self._list([t for t in level if t not in self._listed])
            below: list[str] = []
            for folder in level:
                for mode, _, oid in self._entries(folder):
                    if mode == b"40000" and oid not in self._trees:
                        below.append(oid)
                    elif mode in (b"100644", b"100755") and oid not in self._blobs:
                        new.append(oid)
            level = list(dict.fromkeys(below))
        if not new:
            return
        sizes = self.mirror.git_ok("cat-file", "--batch-check=%(objectname) %(objectsize)",
                                   input="\n".join(dict.fromkeys(new)) + "\n")
        small = [line.split()[0] for line in sizes.splitlines() if int(line.split()[1]) <= MAX_BLOB_BYTES]
        texts = self.mirror.read_objects(small)
        for line in sizes.splitlines():
            oid = line.split()[0]
            counts: dict[str, int] = {}
            data = texts.get(oid)
            if data is not None:
                if b"\0" not in data[:8000]:   # text only
                    lines = [line.strip() for line in data.splitlines()]
                    for needle in self._needles.intersection(lines):
                        counts[needle.decode(errors="surrogateescape")] = lines.count(needle)
            self._blobs[oid] = counts

    def match(self, tree: str, added: dict[str, int], preimage: dict[str, int] | None = None,
              whole: Locations | None = None) -> MovedMatch:
        """`added`: the pin's net added lines (line -> count), as the same-path check counts them;
        `preimage`: copies of them the tree the pin was made on had; `whole`: copies inside the pin's runs
        found together (see moved_match)."""
        return moved_match(added, self.locations(tree), preimage, whole)
