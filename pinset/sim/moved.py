"""Index of a build's whole tree for the pins' added lines: finds a pin upstream landed in moved code.

Upstream often lands a pin's change in another shape (a file split or renamed), so the same-path
check misses it and the pin shows as a conflict. Only lines some pin adds are indexed ("needles").
Trees and blobs are read in batches (one `git cat-file --batch` per folder level, one for the new
blobs) and cached by object id, so a blob or an unchanged folder is read once per run whatever the number of pins or builds sharing it: consecutive
upstream commits (blame's probes) differ in a few folders only.
"""

from __future__ import annotations

from pinset.sim.changes import MovedMatch, moved_match
from pinset.upstream.mirror import Mirror, parse_tree

MAX_BLOB_BYTES = 1_000_000   # larger files are data (vocabularies, models), not code a pin adds to

Locations = dict[str, dict[str, int]]   # needle -> {path: count}


class TreeLines:
    def __init__(self, mirror: Mirror, needles: set[str]):
        self.mirror = mirror
        self._needles = {n.encode() for n in needles}
        self._blobs: dict[str, dict[str, int]] = {}   # blob -> {needle: count}
        self._trees: dict[str, Locations] = {}        # tree or folder -> locations relative to it
        self._listed: dict[str, list[tuple[bytes, str, str]]] = {}   # tree or folder -> its entries

    def locations(self, tree: str) -> Locations:
        if tree not in self._trees:
            self._read_new_blobs(tree)
            self._trees[tree] = self._locations(tree)
        return self._trees[tree]

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
                        counts[needle.decode()] = lines.count(needle)
            self._blobs[oid] = counts

    def match(self, tree: str, added: dict[str, int], preimage: dict[str, int] | None = None) -> MovedMatch:
        """`added`: the pin's net added lines (line -> count), as the same-path check counts them;
        `preimage`: copies of them the tree the pin was made on had (see moved_match)."""
        return moved_match(added, self.locations(tree), preimage)
