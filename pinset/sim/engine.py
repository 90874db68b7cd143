"""Apply the pin set onto each build without a work tree.

Each build gets one temporary index in the mirror; every pin is a `git apply --cached --3way` onto
it, rolled back (read-tree) when it fails. Conflicts are then attributed by replaying on the bare
build: the pin fails there too -> `upstream`; otherwise the earlier pin it collides with.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pinset.config.schema import PinSet
from pinset.sim.changes import MovedMatch, PinChange, line_counts
from pinset.sim.model import BuildResult, Contract, PinResult, SimResult
from pinset.sim.moved import TreeLines
from pinset.sim.pins import PreparedPin
from pinset.upstream.builds import Build
from pinset.upstream.mirror import Mirror

CARRIED_THRESHOLD = 0.95

_CONFLICT_PATTERNS = [
    re.compile(r"^U (.+)$"),
    re.compile(r"^error: patch failed: (.+):\d+$"),
    re.compile(r"^error: (.+): does not exist in index$"),
    re.compile(r"^error: (.+): already exists in index$"),
    re.compile(r"^error: (.+): patch does not apply$"),
    re.compile(r"^Applied patch to '(.+)' with conflicts\.$"),
]


@dataclass
class ApplyOutcome:
    ok: bool
    conflict_files: list[str] = field(default_factory=list)
    message: str = ""


@dataclass
class _Applied:
    pin_id: str
    change: PinChange


class Simulator:
    def __init__(self, pinset: PinSet, mirror: Mirror, prepared: dict[str, PreparedPin]):
        self.pinset = pinset
        self.mirror = mirror
        self.prepared = prepared
        self._scratch = mirror.temp_path("scratch-index")
        self._blob_cache: dict[tuple[str, str], dict[str, int]] = {}
        # The indexes we apply to hold only the paths some pin names: `git apply` then reads and
        # writes a few entries instead of the whole tree (thousands), which is most of its cost.
        touched = [prep.change.touched for prep in prepared.values() if prep.change is not None]
        self._paths = None if any(t is None for t in touched) else sorted(set().union(*touched))
        self._loaded: dict[str, tuple[bytes, set[str]]] = {}  # tree -> (index bytes, paths in it)
        self._moved = TreeLines(mirror, {line for prep in prepared.values() if prep.change is not None
                                         for fc in prep.change.files.values() for line in fc.added})
        # Blame's probes need each pin's state only: they may turn off the whole-tree search for moved
        # code (a pin that does not apply stays a conflict) and the attribution of conflicts.
        self.look_for_moved_code = True
        self.attribute_conflicts = True

    # --- git primitives -------------------------------------------------------------------
    def _load(self, index: Path, tree: str) -> None:
        """Fill `index` with `tree`'s entries (only those under the pins' paths, see __init__)."""
        if self._paths is None:
            self.mirror.git_ok("read-tree", tree, index=index)
            return
        if tree not in self._loaded:
            self.mirror.git_ok("read-tree", "--empty", index=index)
            listing = self.mirror.git_ok("ls-tree", "-r", "-z", "--full-tree", tree, "--", *self._paths,
                                         env={"GIT_LITERAL_PATHSPECS": "1"}) if self._paths else ""
            if listing:
                self.mirror.git_ok("update-index", "-z", "--index-info", index=index, input=listing)
            paths = {entry.split("\t", 1)[1] for entry in listing.split("\0") if entry}
            self._loaded[tree] = (index.read_bytes(), paths)
        else:
            index.write_bytes(self._loaded[tree][0])

    def _merged_tree(self, base_tree: str, index: Path) -> str:
        """The full tree: `base_tree` with the entries of the (partial) index laid over it."""
        if self._paths is None:
            return self.mirror.write_tree(index)
        entries = self.mirror.git_ok("ls-files", "-s", "-z", index=index)
        now = {entry.split("\t", 1)[1] for entry in entries.split("\0") if entry}
        gone = "".join(f"0 {'0' * 40}\t{path}\0" for path in sorted(self._loaded[base_tree][1] - now))
        full = self.mirror.new_index(base_tree)
        self.mirror.git_ok("update-index", "-z", "--index-info", index=full, input=entries + gone)
        return self.mirror.write_tree(full)

    def _apply(self, index: Path, change: PinChange) -> ApplyOutcome:
        for patch in change.patches:
            result = self.mirror.git("apply", "--cached", "--3way", "--whitespace=nowarn", str(patch), index=index)
            if not result.ok:
                output = result.stdout + "\n" + result.stderr
                files = _conflict_files(output)
                return ApplyOutcome(False, files or sorted(change.files), _first_error(output, patch.name))
        return ApplyOutcome(True)

    def _applies_on(self, tree: str, *changes: PinChange) -> bool:
        self._load(self._scratch, tree)
        return all(self._apply(self._scratch, c).ok for c in changes)

    def _counts(self, tree: str, path: str) -> dict[str, int]:
        key = (tree, path)
        if key not in self._blob_cache:
            self._blob_cache[key] = line_counts(self.mirror.read_blob(tree, path))
        return self._blob_cache[key]

    # --- analysis -------------------------------------------------------------------------
    def carried_fraction(self, change: PinChange, tree: str) -> float | None:
        """Share of the pin's substantive added lines already present in `tree` (None: no such lines)."""
        total = present = 0
        for path, fc in change.files.items():
            if fc.deleted:
                continue
            counts = self._counts(tree, path)
            for line, n in _net_added(fc).items():
                total += n
                present += min(n, counts.get(line, 0))
        return present / total if total else None

    def _carried(self, prep: PreparedPin, build: Build) -> tuple[bool, float | None]:
        spec = prep.spec
        if spec.kind == "pr" and build.source == "git":
            if self.mirror.git("merge-base", "--is-ancestor", spec.commit, build.oid).ok:
                return True, 1.0
        fraction = self.carried_fraction(prep.change, build.tree)
        if fraction is not None:
            return fraction >= CARRIED_THRESHOLD, fraction
        # No substantive added lines (a pure removal): carried when applying changes nothing.
        self._load(self._scratch, build.tree)
        before = self._scratch.read_bytes()
        if self._apply(self._scratch, prep.change).ok:
            return self._scratch.read_bytes() == before, None
        return False, None

    def _moved_carried(self, change: PinChange, tree: str) -> MovedMatch | None:
        """A pin that does not apply may have landed in moved code: look for its lines in the whole tree."""
        added: Counter = Counter()
        for fc in change.files.values():
            if not fc.deleted:
                added.update(_net_added(fc))
        match = self._moved.match(tree, added)
        return match if match.carried(CARRIED_THRESHOLD) else None

    def _attribute(self, change: PinChange, conflict_files: list[str], build: Build,
                   applied: list[_Applied]) -> str:
        """`upstream` if the pin fails on the bare build too, else the earlier pin it collides with."""
        if not self._applies_on(build.tree, change):
            return "upstream"
        touched = set(conflict_files) or set(change.files)
        for earlier in reversed(applied):
            if touched & set(earlier.change.files) and self._applies_on(build.tree, earlier.change) \
                    and not self._applies_on(build.tree, earlier.change, change):
                return earlier.pin_id
        # The collision needs several earlier pins together: the first prefix after which it fails.
        prefix: list[PinChange] = []
        for earlier in applied:
            prefix.append(earlier.change)
            if not self._applies_on(build.tree, *prefix, change):
                return earlier.pin_id
        return applied[-1].pin_id if applied else "upstream"

    def _contract(self, entry: _Applied, final_tree: str, base_tree: str, later: list[_Applied]) -> Contract:
        """The pin's files, added lines and feature symbols (those new to upstream's file) survived."""
        problems: list[str] = []
        for path, fc in sorted(entry.change.files.items()):
            final_text = self.mirror.read_blob(final_tree, path)
            suspects = [a.pin_id for a in later if path in a.change.files]
            by = f" (touched later by: {', '.join(suspects)})" if suspects else ""
            if fc.deleted:
                if final_text is not None:
                    problems.append(f"{path}: file deleted by this pin is back{by}")
                continue
            if final_text is None:
                what = "file added by this pin is missing" if fc.new_file else "file is gone"
                problems.append(f"{path}: {what}{by}")
                continue
            counts = line_counts(final_text)
            missing = [line for line, n in _net_added(fc).items() if counts.get(line, 0) < n]
            if missing:
                total = len(_net_added(fc))
                problems.append(f"{path}: {len(missing)} of {total} added lines gone "
                                f"(e.g. {missing[0][:80]!r}){by}")
            upstream_text = self.mirror.read_blob(base_tree, path) or ""
            for symbol in sorted(fc.symbols):
                if re.search(rf"\b{symbol}\b", upstream_text):
                    continue  # upstream's own symbol, not introduced by the pin
                if not re.search(rf"\b{symbol}\b", final_text):
                    problems.append(f"{path}: feature symbol {symbol} no longer present{by}")
        return Contract(not problems, problems)

    # --- one build ------------------------------------------------------------------------
    def simulate_build(self, build: Build) -> BuildResult:
        index = self.mirror.temp_path(f"build-index-{build.tree[:12]}")
        self._load(index, build.tree)
        applied: list[_Applied] = []
        results: list[PinResult] = []
        for spec in self.pinset.pins:
            prep = self.prepared[spec.id]
            result = PinResult(spec.id, "error", spec.required)
            results.append(result)
            if prep.error or prep.change is None:
                result.detail = prep.error
                result.contract = Contract(False, [f"{spec.id}: {prep.error}"])
                continue
            result.files = prep.change.paths
            if not prep.change.patches:
                result.status, result.detail = "skipped", "the pin changes nothing"
                continue
            carried, fraction = self._carried(prep, build)
            result.carried_fraction = fraction
            if carried:
                result.status, result.retire = "upstream", True
                result.detail = ("build already carries this pin"
                                 + (f" ({fraction:.0%} of its added lines present)" if fraction is not None else ""))
                continue
            # The index file itself is the snapshot: restoring its bytes rolls a failed pin back, and
            # unchanged bytes mean the pin changed nothing (no write-tree per pin).
            before = index.read_bytes()
            outcome = self._apply(index, prep.change)
            if outcome.ok:
                if index.read_bytes() == before:
                    result.status, result.detail = "skipped", "no change on top of the earlier pins"
                    continue
                applied.append(_Applied(spec.id, prep.change))
                result.status = "applied"
                continue
            index.write_bytes(before)  # roll back the half-applied pin
            moved = self._moved_carried(prep.change, build.tree) if self.look_for_moved_code else None
            if moved is not None:
                result.status, result.retire = "upstream", True
                result.detail = f"build already carries this pin in moved code: {moved.describe()}"
                continue
            result.status = "conflict"
            result.files = outcome.conflict_files
            result.conflict_with = self._attribute(prep.change, outcome.conflict_files, build, applied) \
                if self.attribute_conflicts else None
            result.detail = outcome.message
            result.contract = Contract(False, [f"{f}: does not apply (conflict with {result.conflict_with})"
                                               for f in outcome.conflict_files])
        merged = self._merged_tree(build.tree, index) if applied else build.tree
        by_id = {r.id: r for r in results}
        for i, entry in enumerate(applied):
            by_id[entry.pin_id].contract = self._contract(entry, merged, build.tree, applied[i + 1:])
        return BuildResult(build.name, build.commit, results, tree=merged, base_tree=build.tree)

    def run(self, builds: list[Build]) -> SimResult:
        return SimResult([self.simulate_build(b) for b in builds], self.pinset.digest)


def _net_added(fc) -> Counter:
    net = Counter(fc.added)
    net.subtract(Counter(fc.removed))
    return Counter({line: n for line, n in net.items() if n > 0})


def _first_error(output: str, patch_name: str) -> str:
    """The line that says why `git apply` failed (its last line is often only 'Falling back...')."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith("error:") or "with conflicts" in line),
                  lines[-1] if lines else "git apply failed")
    return f"{patch_name}: {reason}"


def _conflict_files(output: str) -> list[str]:
    files: list[str] = []
    for line in output.splitlines():
        for pattern in _CONFLICT_PATTERNS:
            m = pattern.match(line.strip())
            if m and m.group(1) not in files:
                files.append(m.group(1))
    return sorted(files)
