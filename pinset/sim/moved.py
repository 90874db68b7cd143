"""Index of a build's whole tree for the pins' added lines: finds a pin upstream landed in moved code.

Upstream often lands a pin's change in another shape (a file split or renamed), so the same-path
check misses it and the pin shows as a conflict. Only lines some pin adds are indexed ("needles"),
per blob, and a blob is read once per run whatever the number of pins or builds sharing it:
consecutive upstream commits (blame's probes) share almost all their blobs.
"""

from __future__ import annotations

from pinset.sim.changes import MovedMatch, moved_match
from pinset.upstream.mirror import Mirror

MAX_BLOB_BYTES = 1_000_000   # larger files are data (vocabularies, models), not code a pin adds to


class TreeLines:
    def __init__(self, mirror: Mirror, needles: set[str]):
        self.mirror = mirror
        self._needles = {n.encode() for n in needles}
        self._blobs: dict[str, dict[str, int]] = {}              # blob -> {needle: count}
        self._trees: dict[str, dict[str, dict[str, int]]] = {}   # tree -> {needle: {path: count}}

    def locations(self, tree: str) -> dict[str, dict[str, int]]:
        if tree not in self._trees:
            found: dict[str, dict[str, int]] = {}
            listing = self.mirror.git_ok("ls-tree", "-r", "-l", "-z", "--full-tree", tree)
            for entry in listing.split("\0"):
                if not entry:
                    continue
                meta, path = entry.split("\t", 1)
                mode, kind, oid, size = meta.split()
                if kind != "blob" or mode == "120000" or size == "-" or int(size) > MAX_BLOB_BYTES:
                    continue
                for needle, count in self._blob(oid).items():
                    found.setdefault(needle, {})[path] = count
            self._trees[tree] = found
        return self._trees[tree]

    def _blob(self, oid: str) -> dict[str, int]:
        if oid not in self._blobs:
            _, _, _, data = self.mirror.repo.git.get_object_data(oid)
            counts: dict[str, int] = {}
            if b"\0" not in data[:8000]:   # text only
                lines = [line.strip() for line in data.splitlines()]
                for needle in self._needles.intersection(lines):
                    counts[needle.decode()] = lines.count(needle)
            self._blobs[oid] = counts
        return self._blobs[oid]

    def match(self, tree: str, added: dict[str, int]) -> MovedMatch:
        """`added`: the pin's net added lines (line -> count), as the same-path check counts them."""
        return moved_match(added, self.locations(tree))
