"""Apply the pin set onto each build without a work tree.

Each build gets one temporary index in the mirror; every pin is a `git apply --cached --3way` onto
it, rolled back (read-tree) when it fails. Conflicts are then attributed by replaying on the bare
build: the pin fails there too -> `upstream`; otherwise the earlier pin it collides with.

Which blobs a 3-way merge may use is fixed by the inputs, never by what the cache happens to hold:
every apply runs against private object directories (Mirror.object_dir) that hold the blobs of the
index it applies to (the build's, and those of the pins applied before it on this build), the
blobs the pin brings as its base (a PR's fork point and its own commit; a series' `base-commit:`,
with the blobs the series creates on it), the preimages the build's own history and upstream's branches
and tags hold (as `git am -3` finds them in a full clone: pinset.sim.preimages, looked up only when a 3-way
merge is needed) and nothing else of the mirror.

Where a file a patch changes is not in the build (upstream moved it), `git am -3` merges the patch's fake
ancestor with the whole tree, following renames; `_follow_renames` does the same with those blobs.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import cast

from pinset.config.schema import PinSet
from pinset.errors import PinsetError, RuntimeFailure, UpstreamError
from pinset.redact import redact_url
from pinset.sim import memo, modes
from pinset.sim.apply_errors import BuildPlace, conflict_place, explain_apply_failure
from pinset.sim.changes import MovedMatch, PinChange, line_counts, patch_text, placed_lines, series_base, whole_runs
from pinset.sim.model import BuildResult, Contract, PinResult, SimResult
from pinset.sim.moved import TreeLines
from pinset.sim.pins import PreparedPin
from pinset.sim.preimages import FileBlobs, Preimages, binary_posts, loose_ids, replay, series_blobs, wanted
from pinset.sim.resolve import LedgerApply
from pinset.sim.unions import UnionHunk, Unions
from pinset.upstream.builds import Build, _unreachable, upstream_url
from pinset.upstream.mirror import Mirror, parse_tree

CARRIED_THRESHOLD = 0.95
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"   # an object every git has without storing it
MERGED, FAILS, NOTHING = "merged", "fails", "nothing"   # how _follow_renames' merge went
# The commits of `git am -3`'s merge (_follow_renames) exist only for `git merge-tree`: fixed names and dates.
_MERGE_IDENTITY = {"GIT_AUTHOR_NAME": "pinset", "GIT_AUTHOR_EMAIL": "pinset@localhost",
                   "GIT_COMMITTER_NAME": "pinset", "GIT_COMMITTER_EMAIL": "pinset@localhost",
                   "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}


@dataclass
class ApplyOutcome:
    ok: bool
    conflict_files: list[str] = field(default_factory=list)
    message: str = ""
    hunk: list[str] = field(default_factory=list)
    hunk_path: str | None = None
    patch_text: str = ""     # the patch that failed (for the conflict's detail: sim/apply_errors.conflict_place)
    mode: modes.ApplyMode | None = None                     # how it applied (pinset.sim.modes)
    resolutions: list[str] = field(default_factory=list)    # the recorded resolutions it used
    note: str | None = None                                 # a recorded resolution that did not match
    replaced: dict[str, set[str]] = field(default_factory=dict)  # path -> pin lines a resolution replaced
    renamed: dict[str, str] = field(default_factory=dict)   # the pin's path -> where upstream moved it (am's merge)
    merge_failed: bool = False   # am's merge into the whole tree was tried and fails (a file moved or deleted)
    unions: list[UnionHunk] = field(default_factory=list)   # the add/add conflicts it unioned (sim/unions.py)


@dataclass
class _Index:
    """A temporary index file and the object directories holding every blob it names."""

    path: Path
    objects: list[Path] = field(default_factory=list)  # the build's blobs, then each applied pin's
    tree: str | None = None                             # the tree it was loaded from (_load)

    def snapshot(self) -> tuple[bytes, int]:
        return self.path.read_bytes(), len(self.objects)

    def restore(self, snap: tuple[bytes, int]) -> None:
        self.path.write_bytes(snap[0])
        del self.objects[snap[1]:]


@dataclass
class _Applied:
    pin_id: str
    prep: PreparedPin
    replaced: dict[str, set[str]] = field(default_factory=dict)  # its contract expects the resolution's lines
    renamed: dict[str, str] = field(default_factory=dict)         # its paths upstream moved (ApplyOutcome.renamed)

    @property
    def change(self) -> PinChange:
        assert self.prep.change is not None   # only a prepared pin applies
        return self.prep.change


class Simulator:
    def __init__(self, pinset: PinSet, mirror: Mirror, prepared: dict[str, PreparedPin], *,
                 apply_modes: bool = True):
        """`apply_modes`: learn how each pin applied (exact/offset/3-way: a `git apply -v` before the 3-way
        merge); blame's probes need only whether it applies, and skip that process."""
        self.apply_modes = apply_modes
        self.pinset = pinset
        self.mirror = mirror
        self.prepared = prepared
        self._scratch = _Index(mirror.temp_path("scratch-index"))
        self._build_objects: dict[str, Path] = {}     # tree -> object dir of its blobs under the pins' paths
        self._pin_objects: dict[str, list[Path]] = {}  # pin id -> object dirs of its base blobs
        self._bases: dict[str, str | None] = {}         # pin id -> base commit in the mirror
        self._base_trees: dict[str, str] = {}           # base commit -> its tree
        self._blob_cache: dict[tuple[str, str], dict[str, int]] = {}
        self._history: str | None = None                # the commit of the build simulated now (None: an sdist)
        self._tree: str | None = None                   # the tree of the build simulated now
        self._in_tree: dict[tuple[str, str], list[Path]] = {}   # (pin id, build tree) -> _tree_preimages' dirs
        url = upstream_url(pinset.upstream, pinset.path.parent) if pinset.upstream is not None else None
        self._finder = Preimages.of(mirror, url)   # one per mirror: shared by every simulator of the command
        self._series: dict[str, list[list[FileBlobs]]] = {}            # pin id -> its patches' index lines
        self._changed: dict[str, frozenset[str]] = {}                   # pin id -> paths its preimages are at
        self._posts: dict[str, list[tuple[str, str]]] = {}              # pin id -> its binary postimages (_binary_posts)
        self._found: dict[tuple[str, str | None], list[Path]] = {}      # (pin id, history; None: sdist) -> preimage dirs
        self._base_made: dict[str, Path] = {}            # pin id -> the blobs its series creates on its base
        self._shared: set[tuple[str, str]] = set()       # (pin, object dir) whose series' blobs are in the mirror
        # The indexes we apply to hold only the paths some pin names: `git apply` then reads and
        # writes a few entries instead of the whole tree (thousands), which is most of its cost.
        touched = [prep.change.touched for prep in prepared.values() if prep.change is not None]
        self._paths = None if any(t is None for t in touched) else sorted(set().union(*(t for t in touched if t is not None)))
        # ... and, as git reads them beside those paths, a file where a pin's path needs a folder (git apply then
        # refuses, as `git am -3` does: "appears as both a file and as a directory") and every `.gitattributes` of
        # the folders on the way (merge attributes: `-merge`, `merge=binary`, `merge=union`): _neighbours.
        self._parents = sorted({p[:i] for p in self._paths or () for i in range(len(p)) if p[i] == "/"})
        self._parent_set = frozenset(self._parents)
        self._loaded: dict[str, tuple[bytes, set[str]]] = {}  # tree -> (index bytes, paths in it)
        self._moved = TreeLines(mirror, {line for prep in prepared.values() if prep.change is not None
                                         for fc in prep.change.files.values() for line in fc.added})
        # Blame's probes need each pin's state only: they may limit the whole-tree search for moved
        # code to some pins (True: every pin; a set: those; elsewhere a pin that does not apply stays a
        # conflict) and turn off the attribution of conflicts.
        self.look_for_moved_code: bool | set[str] = True
        self.attribute_conflicts = True
        self._ledger = LedgerApply(mirror)
        self._unions = Unions(mirror)
        # The same pin on the same blobs is the same answer (sim/memo.py): kept in the run and in the cache.
        self._memo = memo.ApplyMemo(mirror.cache / "memo")
        self._git = memo.git_identity()
        self._dir_blobs: dict[Path, frozenset[str]] = {}   # object dir -> the blob ids it holds
        self._patch_bytes: dict[str, list[bytes]] = {}      # pin id -> its patch files' bytes
        # A whole build's result, by the content of everything it reads (simulate_build, memo.BuildMemo).
        self._builds = memo.BuildMemo(mirror.cache / "memo")
        self._final_index: bytes | None = None              # the last build's index (its merged entries)
        self._pin_digests: dict[str, str] | None = None     # pin id -> PinSpec.digest (_with_digests)

    # --- git primitives -------------------------------------------------------------------
    def _new_dir(self, blobs=()) -> Path:
        blobs = frozenset(blobs)
        path = self.mirror.object_dir("objects", blobs)
        if blobs:
            self._dir_blobs[path] = blobs
        return path

    def _blobs_in(self, folder: Path) -> frozenset[str]:
        """The blob ids an object dir holds: those it was packed with, else its loose objects (a dir git
        wrote into is read only once it is handed on as readable, and never written again)."""
        if folder not in self._dir_blobs:
            self._dir_blobs[folder] = frozenset(memo.loose_objects(folder))
        return self._dir_blobs[folder]

    def _listing(self, tree: str) -> str:
        """`ls-tree -r -z` of `tree` under the pins' paths (the whole tree when they are unknown), with the
        entries git reads beside them (_neighbours)."""
        if self._paths is None:
            return self.mirror.git_ok("ls-tree", "-r", "-z", "--full-tree", tree)
        if not self._paths:
            return ""
        listing = self.mirror.git_ok("ls-tree", "-r", "-z", "--full-tree", tree, "--", *self._paths,
                                     env={"GIT_LITERAL_PATHSPECS": "1"})
        return listing + self._neighbours(tree, listing)

    def _neighbours(self, tree: str, listing: str) -> str:
        """`ls-tree -r -z` lines of what `git am -3` reads beside the pins' paths in a full checkout: a file (or
        submodule) of `tree` where a pin's path needs a folder, and the `.gitattributes` of the root and of
        every folder on the way to a pin's path. Read through the run's object reader (no process): the
        folders on the way, top down."""
        have = {entry.split("\t", 1)[1] for entry in listing.split("\0") if entry}
        folders = {"": tree}   # folder -> its tree id, as far as `tree` has it
        out = []
        for folder in ["", *self._parents]:
            if folder not in folders or "\n" in folder:
                continue
            found = self.mirror.read_typed([folders[folder]])[0]
            if found is None or found[0] != "tree":
                continue
            for mode, name, oid in parse_tree(found[1]):
                path = f"{folder}/{name}" if folder else name
                if mode == b"40000":
                    folders[path] = oid
                elif (name == ".gitattributes" or path in self._parent_set) and path not in have:
                    kind = "commit" if mode == b"160000" else "blob"
                    out.append(f"{mode.decode()} {kind} {oid}\t{path}\0")
        return "".join(out)

    def _load(self, index: _Index, tree: str) -> None:
        """Fill `index` with `tree`'s entries (only those under the pins' paths, see __init__); its
        blobs are the only ones it starts with."""
        if tree not in self._loaded:
            listing = self._listing(tree)
            if self._paths is None:
                self.mirror.git_ok("read-tree", tree, index=index.path)
            else:
                self.mirror.git_ok("read-tree", "--empty", index=index.path)
                if listing:
                    self.mirror.git_ok("update-index", "-z", "--index-info", index=index.path, input=listing)
            paths = {entry.split("\t", 1)[1] for entry in listing.split("\0") if entry}
            self._build_objects[tree] = self._new_dir(_blobs(listing))
            self._loaded[tree] = (index.path.read_bytes(), paths)
        else:
            index.path.write_bytes(self._loaded[tree][0])
        index.objects = [self._build_objects[tree]]
        index.tree = tree

    def _base(self, prep: PreparedPin) -> str | None:
        """The commit the pin names as its base, when the mirror has it or upstream gives it:
        a PR's fork point; a series' `base-commit:` (format-patch --base)."""
        pin_id = prep.spec.id
        if pin_id not in self._bases:
            base = prep.fork_point
            if base is None and prep.change is not None:
                base = series_base([p.read_text(encoding="utf-8", errors="replace") for p in prep.change.patches])
                if base and not self.mirror.has_commit(base) and self.pinset.upstream is not None:
                    url = upstream_url(self.pinset.upstream, self.pinset.path.parent)
                    fetched = self.mirror.fetch(url, [base])
                    if not fetched.ok and _unreachable(fetched.stderr):  # offline is no answer: stop
                        raise UpstreamError(f"upstream {redact_url(url)}: unreachable, needed for the base-commit "
                                            f"{base[:12]} of pin {pin_id} ({fetched.tail(1)})")
                if base and not self.mirror.has_commit(base):
                    base = None
            self._bases[pin_id] = base
        return self._bases[pin_id]

    def _objects_of(self, prep: PreparedPin) -> list[Path]:
        """Object dirs with the blobs the pin brings for a 3-way merge: those of its base under the
        pins' paths (and of a PR's own commit), and for a series those its patches create on it."""
        assert prep.change is not None   # only prepared pins are simulated (pins.prepare_pins)
        pin_id = prep.spec.id
        if pin_id in self._pin_objects:
            return self._pin_objects[pin_id]
        base = self._base(prep)
        dirs: list[Path] = []
        if base is not None and prep.fork_point is not None:  # a PR: its fork point and its commit
            assert prep.spec.commit is not None
            trees = [self.mirror.tree_of(c) for c in (base, prep.spec.commit)]
            dirs.append(self._new_dir(b for tree in trees for b in _blobs(self._listing(tree))))
        elif base is not None:  # a series: its base, and the blobs it creates replayed on it
            base_tree = self.mirror.tree_of(base)
            index = _Index(self.mirror.fresh_path("base-index"))
            self._load(index, base_tree)
            written = self._new_dir()
            env = self.mirror.objects_env(written, index.objects)
            for patch in prep.change.patches:
                if not self.mirror.git("apply", "--cached", "--whitespace=nowarn", str(patch),
                                       index=index.path, env=env).ok:
                    break
            dirs += [self._build_objects[base_tree], written]
            self._base_made[pin_id] = written
        self._pin_objects[pin_id] = dirs
        return dirs

    def _preimages_for(self, prep: PreparedPin) -> list[Path]:
        """Object dirs with the preimages a 3-way merge of the pin may use on the build simulated now, found
        as `git am -3` finds them (pinset.sim.preimages: in the build's history and upstream's default
        branch, never elsewhere in the cache), and the blobs its series creates on them. Those a series
        creates (here or on its base-commit) also go into the mirror: refresh and rebase run `git am -3` in
        its worktrees, which read the mirror (where the fetched upstream history is too)."""
        pin_id, change = prep.spec.id, prep.change
        assert change is not None  # only a prepared pin is applied
        if self._finder.searches(self._history) and (pin_id, self._history) not in self._found:
            series = self._series_of(prep)
            found = self._finder.find(self._history, self._wanted(prep))
            dirs = [self._new_dir(found.values())] if found else []
            if found and len(series) > 1:
                dirs.append(self._new_dir())
                replay(self.mirror, change.patches, series, found, dirs,
                       self.mirror.fresh_path("replay-index"), dirs[-1])
            self._found[pin_id, self._history] = dirs
        self._share(prep)
        return [*self._found.get((pin_id, self._history), []), *self._tree_preimages(prep)]

    def _tree_preimages(self, prep: PreparedPin) -> list[Path]:
        """An object dir of the preimages the build's own tree holds at another path than the patch's (`git am -3`
        finds a blob by its id wherever the build has it); none when the build has none of them there."""
        tree = self._tree
        if tree is None or not self._changed_paths(prep):
            return []
        if (prep.spec.id, tree) not in self._in_tree:
            found = self._finder.in_tree(tree, self._wanted(prep))
            self._in_tree[prep.spec.id, tree] = [self._new_dir(found.values())] if found else []
        return self._in_tree[prep.spec.id, tree]

    def _series_of(self, prep: PreparedPin) -> list[list[FileBlobs]]:
        """Per patch of the pin, the files whose preimage its `index` lines name (read once per pin)."""
        assert prep.change is not None  # only a prepared pin is applied
        if prep.spec.id not in self._series:
            self._series[prep.spec.id] = series_blobs([p.read_text(encoding="utf-8", errors="replace")
                                                       for p in prep.change.patches])
        return self._series[prep.spec.id]

    def _wanted(self, prep: PreparedPin) -> list[tuple[str, str]]:
        """The (path, id) pairs the lookup looks for: the preimages of the pin's series, and the postimage of a
        binary change without its data (git applies it where the repository holds that blob)."""
        return [*wanted(self._series_of(prep)), *self._binary_posts(prep)]

    def _binary_posts(self, prep: PreparedPin) -> list[tuple[str, str]]:
        assert prep.change is not None  # only a prepared pin is applied
        if prep.spec.id not in self._posts:
            self._posts[prep.spec.id] = binary_posts([p.read_text(encoding="utf-8", errors="replace")
                                                      for p in prep.change.patches])
        return self._posts[prep.spec.id]

    def _changed_paths(self, prep: PreparedPin) -> frozenset[str]:
        """The paths whose preimage the pin's series needs from the tree it is applied to (read once per pin)."""
        if prep.spec.id not in self._changed:
            self._changed[prep.spec.id] = frozenset(path for path, _ in wanted(self._series_of(prep)))
        return self._changed[prep.spec.id]

    def _share(self, prep: PreparedPin) -> None:
        """Copy into the mirror the blobs the pin's series creates (on its base-commit, on the preimages
        found for this build): `git am -3` in refresh's and rebase's worktrees needs them as
        the preimages of its later patches, and no upstream history has them. Once per pin and dir."""
        pin_id = prep.spec.id
        made = [self._base_made[pin_id]] if pin_id in self._base_made else []
        found = self._found.get((pin_id, self._history), [])
        made += found[1:]   # after the found preimages: the blobs the series made on them
        for written in made:
            if (pin_id, str(written)) not in self._shared:
                self._shared.add((pin_id, str(written)))
                self.mirror.adopt_objects(loose_ids(written), [written])

    def _merged_tree(self, base_tree: str, index: _Index) -> str:
        """The full tree: `base_tree` with the entries of the (partial) index laid over it; the
        blobs the pins wrote move from the private object dirs into the mirror."""
        entries = self.mirror.git_ok("ls-files", "-s", "-z", index=index.path)
        self.mirror.adopt_objects((e.split()[1] for e in entries.split("\0") if e), index.objects)
        return self.mirror.write_tree(self._full_index(base_tree, index.path, entries))

    def _full_index(self, base_tree: str, index: Path, entries: str) -> Path:
        """An index of the whole tree: `base_tree` with the (partial) index's entries (`ls-files -s -z`) laid
        over it, paths it dropped removed; the index itself where it holds the whole tree already."""
        if self._paths is None:
            return index
        now = {entry.split("\t", 1)[1] for entry in entries.split("\0") if entry}
        gone = "".join(f"0 {'0' * 40}\t{path}\0" for path in sorted(self._loaded[base_tree][1] - now))
        full = self.mirror.new_index(base_tree)
        self.mirror.git_ok("update-index", "-z", "--index-info", index=full, input=entries + gone)
        return full

    def _lacks(self, index: _Index, files: list[FileBlobs]) -> bool:
        """Whether a file the patch changes (not creates) is not in the index: upstream moved or deleted it."""
        if not files:
            return False
        try:
            there = set(memo.read_index(index.path.read_bytes()))
        except memo.IndexFormat:
            listing = self.mirror.git_ok("ls-files", "-z", "--", *(f.path for f in files), index=index.path,
                                         env={"GIT_LITERAL_PATHSPECS": "1"})
            there = set(listing.split("\0"))
        return any(f.path not in there for f in files)

    def _follow_renames(self, index: _Index, patch: Path, read: list[Path], written: Path, work_tree: Path,
                        files: list[FileBlobs]) -> tuple[str, dict[str, str]]:
        """`git am -3`'s own fallback where a file the patch changes is not in the tree (upstream moved or
        deleted it), which `git apply --3way` cannot follow: the patch applied on its fake ancestor (the
        preimages its `index` lines name, among the blobs this apply may read), merged with the whole tree
        (rename detection, no directory renames, as am asks). The merge's changes go into the index.
        (MERGED, {the patch's path: where upstream moved it}); FAILS where `git am -3` fails too (a preimage
        lacking, a conflict: a file the pin changes or deletes that upstream deleted or moved and changed), with
        the moves it met; NOTHING where the merge changes nothing and follows no rename (a deletion of a file
        the build lacks)."""
        assert index.tree is not None   # every index applied to was loaded from a tree (_load)
        env = self.mirror.objects_env(written, read)
        shown = str(Path(patch).absolute())
        fake, theirs_index = self.mirror.fresh_path("fake-ancestor"), self.mirror.fresh_path("theirs-index")
        # with the index: a mode-only or pure-rename entry (no `index` line) takes its blob from there, as in am
        if not self.mirror.git("apply", f"--build-fake-ancestor={fake}", shown, index=index.path, env=env,
                               work_tree=work_tree).ok:
            return FAILS, {}   # "could not build fake ancestor"
        theirs_index.write_bytes(fake.read_bytes())
        if not self.mirror.git("apply", "--cached", "--whitespace=nowarn", shown, index=theirs_index, env=env).ok:
            return FAILS, {}   # "Did you hand edit your patch?"
        base, theirs = (self.mirror.git_ok("write-tree", index=i, env=env).strip() for i in (fake, theirs_index))
        # The whole tree from here on, so the mirror's objects too: a merge reads the objects of its three
        # trees, never one named by an abbreviated id (which blobs a 3-way merge may use stays fixed).
        whole = self.mirror.objects_env(written, [self.mirror.path / "objects", *read])
        entries = self.mirror.git_ok("ls-files", "-s", "-z", index=index.path)
        ours = self.mirror.git_ok("write-tree", index=self._full_index(index.tree, index.path, entries),
                                  env=whole).strip()
        made = {**whole, **_MERGE_IDENTITY}
        parent = self.mirror.git_ok("commit-tree", base, "-m", "fake ancestor", env=made).strip()
        heads = [self.mirror.git_ok("commit-tree", tree, "-p", parent, "-m", tree, env=made).strip()
                 for tree in (ours, theirs)]
        # am's merge reads the merge attributes of its checkout (the build with the pins before): merge-tree reads
        # them from the files of a work tree (a bare repository reads none), so they are written into this
        # apply's empty one first
        self._check_out_attributes(ours, work_tree, whole)
        merged = self.mirror.git("-c", "merge.directoryRenames=false", "-c", "merge.renames=true", "merge-tree",
                                 "--write-tree", "--no-messages", *heads, env=whole, work_tree=work_tree)
        if merged.returncode not in (0, 1):   # a git too old for --write-tree (2.38) must not pass for a conflict
            raise RuntimeFailure(f"git merge-tree --write-tree (git 2.38 or newer), as `git am -3`'s merge of "
                                 f"{Path(patch).name}: {merged.tail(2) or merged.describe()}")
        moves = _raw_entries(self.mirror.git_ok("diff-tree", "-r", "-z", "-M", "--diff-filter=R", base, ours,
                                                env=whole))
        renamed = {paths[0]: paths[1] for _, paths in moves if paths[0] in {f.path for f in files}}
        if not merged.ok:
            return FAILS, renamed   # "Failed to merge in the changes."
        result = merged.stdout.split("\n", 1)[0].strip()
        if result == ours and not renamed:
            # Only a deletion of a file the build lacks merges to nothing without a rename: am says "already
            # applied"; the sim's own rule for that (_already_made: not a file an earlier pin makes) decides.
            return NOTHING, {}
        update, blobs = [], set()
        for meta, (path,) in _raw_entries(self.mirror.git_ok("diff-tree", "-r", "-z", "--no-renames", ours, result,
                                                             env=whole)):
            _, mode, _, oid, status = meta.split()[:5]
            update.append(f"0 {'0' * 40}\t{path}\0" if status == "D" else f"{mode} {oid}\t{path}\0")
            if status != "D" and mode != "160000":
                blobs.add(oid)
        # git wrote no blob the mirror already had: the index's blobs must be readable where the later pins'
        # applies read (the index's object dirs), so such a blob is written into this apply's dir too
        have = set(memo.loose_objects(written)).union(*(self._blobs_in(d) for d in read))
        for oid, data in self.mirror.read_objects(sorted(blobs - have)).items():
            self.mirror.git_ok("hash-object", "-w", "--stdin", input=data, binary=True,
                               env=self.mirror.objects_env(written))
        if update:
            self.mirror.git_ok("update-index", "-z", "--index-info", index=index.path, input="".join(update), env=whole)
        return MERGED, renamed

    def _check_out_attributes(self, tree: str, work_tree: Path, env: dict) -> None:
        """Write every `.gitattributes` of `tree` into the (empty) `work_tree`, as a checkout of it has them."""
        listing = self.mirror.git_ok("ls-tree", "-r", "-z", "--full-tree", tree, env=env)
        wanted = {}
        for entry in listing.split("\0"):
            meta, _, path = entry.partition("\t")
            fields = meta.split()
            if len(fields) == 3 and fields[1] == "blob" and path.rsplit("/", 1)[-1] == ".gitattributes":
                wanted[path] = fields[2]
        if not wanted:
            return
        data = self.mirror.read_objects(wanted.values())
        for oid in set(wanted.values()) - set(data):   # an earlier pin's: in the apply's own object dirs
            read = self.mirror.git("cat-file", "blob", oid, env=env, binary=True)
            if read.ok:
                data[oid] = cast(bytes, read.stdout)   # binary: stdout is bytes (runner.run)
        for path, oid in wanted.items():
            if oid in data and ".." not in path.split("/"):
                target = work_tree / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data[oid])

    def _apply(self, index: _Index, prep: PreparedPin, how: bool = False) -> ApplyOutcome:
        """The pin on `index` (see _apply_git), answered from the memo when the same patch met the same
        blobs before (another build, another probe, another run): then no git process runs."""
        asked = self._memo_key(index, prep, how)
        if asked is not None:
            key, before = asked
            answer = self._memo.get(key)
            replayed = _outcome_of(answer, prep) if answer is not None else None
            if answer is not None and replayed is not None and self._replay(index, prep, answer, before):
                return replayed
        start, fetched = len(index.objects), self._finder.fetched
        outcome = self._apply_git(index, prep, how)
        # An apply whose lookup fetched upstream's refs was asked under the key of a run that had not (their
        # tips `unasked`): its answer may depend on those tips, so it is not kept under that key.
        if asked is not None and fetched == self._finder.fetched:
            self._remember(asked[0], asked[1], index, start, prep, outcome)
        return outcome

    def _memo_key(self, index: _Index, prep: PreparedPin, how: bool) -> tuple[str, memo.Entries] | None:
        """(memo key, the index's entries) of this apply; None where no memo is kept: paths not known, a
        pin with recorded resolutions (the ledger reads the conflict), an index this code does not read."""
        change = prep.change
        assert change is not None
        touched = change.touched
        if touched is None:
            return None
        try:
            if self._ledger.ledger_of(prep.spec):
                return None
        except PinsetError:
            return None   # a broken ledger is git's path's error to raise, where it raised before
        try:
            entries = memo.read_index(index.path.read_bytes())
        except (memo.IndexFormat, OSError):
            return None
        # A file it changes is not there: am's merge (_follow_renames) reads the whole tree, so the key holds all
        # of it (the tree the index was loaded from, and every entry laid over it), not only the pin's paths.
        whole = any(path not in entries for path in self._changed_paths(prep))
        if prep.spec.id not in self._patch_bytes:
            self._patch_bytes[prep.spec.id] = [Path(patch).read_bytes() for patch in change.patches]
        patches = self._patch_bytes[prep.spec.id]
        readable = frozenset().union(*(self._blobs_in(d) for d in [*index.objects, *self._objects_of(prep)]))
        available = [(named, tuple(sorted(oid for oid in readable if oid.startswith(named))))
                     for named in memo.named_blobs(patches)]
        names = tuple(str(Path(patch).absolute()) for patch in change.patches)
        # A preimage the apply cannot read here may be found by the lookup (_preimages_for: the build's
        # history, upstream's branches and tags): then the answer is theirs too, and only the same search set
        # (its tips' ids: Preimages.key) may reuse it.
        pre = set(memo.preimage_ids(patches)) | {oid for _, oid in self._binary_posts(prep)}
        searched = (*self._finder.key(self._history), "tree", self._tree or "-") if any(
            not oids for named, oids in available if named in pre) else ()
        read = sorted((path, *entry) for path, entry in entries.items()) if whole else memo.relevant(entries, touched)
        # (with the paths earlier pins deleted: the whole tree is the loaded one less those, plus the entries)
        gone = sorted(self._loaded[index.tree][1] - set(entries)) if whole and index.tree in self._loaded else []
        extra = (*searched, "whole tree", index.tree or "-", *gone) if whole else searched
        if prep.spec.unions:   # the same conflict is a union for this pin, a conflict for another
            extra = (*extra, "unions")
        return memo.apply_key(patches, how, read, available, self._git, extra=extra, names=names), entries

    def _replay(self, index: _Index, prep: PreparedPin, answer: memo.Answer, before: memo.Entries) -> bool:
        """Leave `index` as git left it for this answer: its entries and the blobs they name (linked from the
        memo into a new object dir). False when the memo lost a blob (git answers then)."""
        if not answer.ok:
            return True   # a failed apply's index is thrown away by every caller
        written = self._new_dir() if answer.objects else None   # no folder to make (and remove) for none
        if written is not None and not self._memo.link_objects(answer, written):
            return False
        if answer.changes:
            after = dict(before)
            for path, entry in answer.changes.items():
                if entry is None:
                    after.pop(path, None)
                else:
                    after[path] = entry
            index.path.write_bytes(memo.write_index(after))
        index.objects += [*([written] if written is not None else []), *self._objects_of(prep)]
        return True

    def _remember(self, key: str, before: memo.Entries, index: _Index, start: int, prep: PreparedPin,
                  outcome: ApplyOutcome) -> None:
        """Keep git's answer under `key`, unless it names a blob a replay elsewhere could not read."""
        change = prep.change
        assert change is not None
        changes: dict[str, memo.Entry | None] = {}
        objects: list[str] = []
        written: dict[str, Path] = {}
        if outcome.ok:
            try:
                after = memo.read_index(index.path.read_bytes())
            except (memo.IndexFormat, OSError):
                return
            changes = {path: after.get(path) for path in sorted(set(before) | set(after))
                       if before.get(path) != after.get(path)}
            touched = change.touched or frozenset()
            mine = {oid for _, _, oid in memo.relevant(before, touched)}
            brought = frozenset().union(*(self._blobs_in(d) for d in self._objects_of(prep)))
            for folder in index.objects[start:]:
                written.update(memo.loose_objects(folder))
            for entry in changes.values():
                if entry is None or entry[1] in mine or entry[1] in brought:
                    continue
                if entry[1] not in written:
                    return   # a blob only this index's other dirs hold: no answer for elsewhere
                objects.append(entry[1])
        failed = next((i for i, patch in enumerate(change.patches) if outcome.patch_text
                       and patch.read_text(encoding="utf-8", errors="replace") == outcome.patch_text), None)
        fields = {"conflict_files": outcome.conflict_files, "message": outcome.message, "hunk": outcome.hunk,
                  "hunk_path": outcome.hunk_path, "failed_patch": failed, "mode": outcome.mode,
                  "resolutions": outcome.resolutions, "note": outcome.note,
                  "replaced": {path: sorted(lines) for path, lines in outcome.replaced.items()},
                  "renamed": outcome.renamed, "merge_failed": outcome.merge_failed,
                  "unions": [u.to_json() for u in outcome.unions]}
        self._memo.put(key, memo.Answer(outcome.ok, fields, changes, sorted(set(objects))), written)

    def _apply_git(self, index: _Index, prep: PreparedPin, how: bool = False) -> ApplyOutcome:
        """`git apply --cached --3way` each patch; git reads only the index's and the pin's blobs.
        `how`: the apply that counts (not a probe) also learns how each patch applied (below)."""
        assert prep.change is not None   # only prepared pins are simulated (pins.prepare_pins)
        written, brought = self._new_dir(), self._objects_of(prep)
        found: list[Path] | None = None   # preimages from the lookup (pinset.sim.preimages): asked when a 3-way merge fails
        env = self.mirror.objects_env(written, [*index.objects, *brought])
        # --3way writes a conflicted new file (add/add) into the work tree even with --cached: without one of
        # its own, that was the current folder (the user's checkout), whose files could also change git's
        # answer. An empty folder (a failed patch ends the pin), removed with the mirror's scratch.
        work_tree = self.mirror.fresh_path("apply-tree")
        work_tree.mkdir()
        # As `git am -3`: the patch as it is first (its -v output tells exact from offset), a 3-way merge only
        # when that fails, then the pin's recorded resolutions for the conflicts left. A series goes in one
        # `git apply` (a queue of 36 patches is one process, not 36) where it applies as a whole; else patch by
        # patch from the same start, to name the patch that fails.
        patches = [str(Path(patch).absolute()) for patch in prep.change.patches]
        whole_tries = ([["-v"]] if how else []) + ([["--3way"]] if len(patches) > 1 else [])
        for extra in whole_tries:
            before = index.path.read_bytes()
            whole = self.mirror.git("apply", "--cached", *extra, "--whitespace=nowarn", *patches,
                                    index=index.path, env=env, work_tree=work_tree)
            if not whole.ok and extra == ["--3way"] and found is None:
                found = self._preimages_for(prep)
                if found:
                    index.path.write_bytes(before)
                    brought = [*brought, *found]
                    env = self.mirror.objects_env(written, [*index.objects, *brought])
                    whole = self.mirror.git("apply", "--cached", *extra, "--whitespace=nowarn", *patches,
                                            index=index.path, env=env, work_tree=work_tree)
            if whole.ok and extra == ["--3way"] and found is None and any(
                    self._lacking(files, written, [*index.objects, *brought]) for files in self._series_of(prep)):
                found = self._preimages_for(prep)   # where `git am -3` would find the preimages it lacks here
                brought = [*brought, *found]
                env = self.mirror.objects_env(written, [*index.objects, *brought])
            # a patch may have merged without the whole fake ancestor `git am -3` needs: then patch by patch below
            if whole.ok and (extra != ["--3way"] or not any(
                    self._lacking(files, written, [*index.objects, *brought]) for files in self._series_of(prep))):
                if extra == ["--3way"]:
                    self._share(prep)
                index.objects += [written, *brought]
                mode = (modes.direct_mode(whole.stderr) if extra == ["-v"] else modes.THREE_WAY) if how else None
                return ApplyOutcome(True, mode=mode)
            index.path.write_bytes(before)
            written, work_tree = self._new_dir(), self.mirror.fresh_path("apply-tree")
            work_tree.mkdir()
            env = self.mirror.objects_env(written, [*index.objects, *brought])
        replaced: dict[str, set[str]]
        renamed: dict[str, str]
        applied_modes, used, note, replaced, renamed = [], [], None, {}, {}
        unions: list[UnionHunk] = []
        failed_moves: dict[str, str]   # the moves a failed merge of am's met (named in the conflict)
        for number, patch in enumerate(prep.change.patches):
            merge_failed, failed_moves = False, {}   # of this patch (an earlier one's may have been resolved)
            shown = str(Path(patch).absolute())
            # a lone patch's direct apply was the whole try above
            direct = self.mirror.git("apply", "--cached", "-v", "--whitespace=nowarn", shown,
                                     index=index.path, env=env, work_tree=work_tree) \
                if how and len(patches) > 1 else None
            if direct is not None and direct.ok:
                applied_modes.append(modes.direct_mode(direct.stderr))
                continue
            start = index.path.read_bytes()
            result = self.mirror.git("apply", "--cached", "--3way", "--whitespace=nowarn", shown,
                                     index=index.path, env=env, work_tree=work_tree)
            if not result.ok and found is None:
                found = self._preimages_for(prep)
                if found:
                    index.path.write_bytes(start)  # a conflicted merge left its stages there
                    brought = [*brought, *found]
                    env = self.mirror.objects_env(written, [*index.objects, *brought])
                    result = self.mirror.git("apply", "--cached", "--3way", "--whitespace=nowarn", shown,
                                             index=index.path, env=env, work_tree=work_tree)
            if result.ok and found is None and self._lacking(self._series_of(prep)[number], written,
                                                              [*index.objects, *brought]):
                found = self._preimages_for(prep)   # where `git am -3` would find the preimages it lacks here
                brought = [*brought, *found]
                env = self.mirror.objects_env(written, [*index.objects, *brought])
            if result.ok and self._lacking(self._series_of(prep)[number], written, [*index.objects, *brought]):
                # `git am -3` merges only with the patch's whole fake ancestor: with a preimage lacking, the patch
                # must apply as it is (am's first try), whatever `git apply --3way` merged file by file
                index.path.write_bytes(start)
                result = self.mirror.git("apply", "--cached", "--whitespace=nowarn", shown,
                                         index=index.path, env=env, work_tree=work_tree)
            if not result.ok:
                # A file it changes is gone from the build: `git am -3` then merges the patch's fake ancestor
                # with the whole tree, which follows upstream's renames (git apply --3way does not).
                files, after = self._series_of(prep)[number], index.path.read_bytes()
                index.path.write_bytes(start)
                if self._lacks(index, files):
                    how_merged, moves = self._follow_renames(index, patch, [*index.objects, *brought], written,
                                                             work_tree, files)
                    if how_merged == MERGED:
                        renamed.update(moves)
                        self._share(prep)
                        applied_modes.append(modes.THREE_WAY)
                        continue
                    merge_failed = how_merged == FAILS
                    failed_moves = moves
                index.path.write_bytes(after)
            if result.ok:
                self._share(prep)
                applied_modes.append(modes.THREE_WAY)
                continue
            resolved = self._ledger.resolve(prep.spec, index.path, env, work_tree)
            if resolved.ok:
                applied_modes.append(modes.RESOLUTION)
                used += [r for r in resolved.used if r not in used]
                for path, lines in resolved.replaced.items():
                    replaced.setdefault(path, set()).update(lines)
                continue
            note = resolved.note
            if prep.spec.unions:
                # pins.yaml `unions:`: only where the 3-way merge (and the ledger) left conflicts, and only
                # when every conflict hunk is a provable add/add union (sim/unions.py); else the conflict stays
                unioned = self._unions.resolve(index.path, env, work_tree)
                if unioned.ok:
                    applied_modes.append(modes.UNION)
                    unions += unioned.hunks
                    continue
                note = "; ".join(filter(None, [note, f"no provable add/add union: {unioned.why}"]))
            text = patch.read_text(encoding="utf-8", errors="replace")
            failure = explain_apply_failure(result.stdout + "\n" + result.stderr, text)
            moved_to = "".join(f"; upstream moved {old} to {new}: git am -3's merge there conflicts"
                               for old, new in sorted(failed_moves.items()))
            return ApplyOutcome(False, sorted(failure.files) or sorted(prep.change.files),
                                f"{patch.name}: {failure.reason}{moved_to}", failure.hunk, failure.hunk_path, text,
                                note=note, merge_failed=merge_failed)
        # git writes no blob that a readable dir already has: the index may now name the pin's own.
        index.objects += [written, *brought]
        return ApplyOutcome(True, mode=modes.worst(applied_modes), resolutions=used, replaced=replaced,
                            renamed=renamed, unions=unions)

    def _lacking(self, files: list[FileBlobs], written: Path, dirs: list[Path]) -> str | None:
        """The first file of a patch whose preimage (its `index` line's id) none of the blobs this apply may read
        is (`written`: what git wrote in this apply so far, read again): `git am -3` cannot build the patch's
        fake ancestor then ("sha1 information is lacking or useless"). In-process: no git runs."""
        if not files:
            return None
        readable = set(memo.loose_objects(written)).union(*(self._blobs_in(d) for d in dirs))
        for f in files:
            if EMPTY_BLOB.startswith(f.pre):
                continue   # git knows the empty blob without storing it
            if f.pre not in readable and (len(f.pre) == 40 or not any(oid.startswith(f.pre) for oid in readable)):
                return f.path
        return None

    def _applies_on(self, tree: str, *preps: PreparedPin) -> bool:
        self._load(self._scratch, tree)
        return all(self._apply(self._scratch, p).ok for p in preps)

    def _counts(self, tree: str, path: str) -> dict[str, int]:
        key = (tree, path)
        if key not in self._blob_cache:
            self._read_counts([key])
        return self._blob_cache[key]

    def _read_counts(self, keys) -> None:
        """Line counts of many (tree, path) files, read in one exchange with the mirror's reader."""
        texts = self.mirror.read_blobs((key for key in keys if key not in self._blob_cache), exact=True)
        for key, text in texts.items():
            self._blob_cache[key] = line_counts(text)

    # --- analysis -------------------------------------------------------------------------
    def _preimage(self, prep: PreparedPin, path: str) -> Counter:
        """Copies of each line in the pin's file before the pin: the file in its base where the
        base is known, never fewer than the patch's own context and removed lines show.

        Not the blob the patch's `index` line names even when the mirror happens to hold it: whether
        it does depends on what earlier runs fetched, and the verdict must not (same input, same verdict)."""
        assert prep.change is not None   # only prepared pins are simulated (pins.prepare_pins)
        fc = prep.change.files[path]
        base_tree = self._base_tree(prep)
        known = self._counts(base_tree, path) if base_tree is not None else {}
        return fc.preimage | Counter(known)

    def _base_tree(self, prep: PreparedPin) -> str | None:
        base = self._base(prep)
        if base is not None and base not in self._base_trees:
            self._base_trees[base] = self.mirror.tree_of(base)
        return self._base_trees.get(base) if base is not None else None

    def carried_fraction(self, prep: PreparedPin, tree: str) -> float | None:
        """Share of the pin's substantive added lines present in `tree` beyond the copies the pin's
        own preimage already has (None: no such lines). A line the file had before (a second
        `return 0;`, an `#include` it already has, a duplicated block) is no sign the pin landed."""
        assert prep.change is not None   # only prepared pins are simulated (pins.prepare_pins)
        total = present = 0
        kept = [path for path, fc in prep.change.files.items() if not fc.deleted]
        if kept:
            base_tree = self._base_tree(prep)
            self._read_counts([(t, path) for path in kept for t in (tree, base_tree) if t is not None])
        for path, fc in prep.change.files.items():
            if fc.deleted:
                continue
            counts, before = self._counts(tree, path), self._preimage(prep, path)
            for line, n in fc.net_added().items():
                total += n
                present += min(n, max(0, counts.get(line, 0) - before[line]))
        return present / total if total else None

    def placed_fraction(self, prep: PreparedPin, tree: str) -> float:
        """Share of the pin's substantive added lines `tree` holds where the pin puts them (changes.placed_lines:
        beside the hunk's own context; anywhere in a file it creates), beyond the copies its preimage had: the
        file before the pin as `git am -3` finds it (its `index` line's blob in the build's or upstream's
        history), else its base or its own context and removed lines. Asked only of a pin that counts as
        present but fails on the build."""
        assert prep.change is not None   # only prepared pins are simulated (pins.prepare_pins)
        kept = {path: fc for path, fc in prep.change.files.items() if not fc.deleted}
        texts = self.mirror.read_blobs([(tree, path) for path in kept], exact=True)
        found = self._found_preimages(prep)
        total = present = 0
        for path, fc in kept.items():
            counts, before = self._counts(tree, path), self._preimage(prep, path) | found.get(path, Counter())
            placed = placed_lines(fc, texts.get((tree, path)))
            for line, n in fc.net_added().items():
                total += n
                present += min(n, placed[line], max(0, counts.get(line, 0) - before[line]))
        return present / total if total else 0.0

    def _found_preimages(self, prep: PreparedPin) -> dict[str, Counter]:
        """Line counts of each file before the pin, where `git am -3` would find its preimage blob (the build's
        history, upstream's branches and tags: pinset.sim.preimages); the first preimage a series names
        for a path is the file before the whole pin."""
        pairs: dict[str, tuple[str, str]] = {}
        for path, oid in wanted(self._series_of(prep)):
            pairs.setdefault(path, (path, oid))
        if not pairs or not self._finder.searches(self._history):
            return {}
        found = self._finder.find(self._history, pairs.values())
        blobs = self.mirror.read_objects(sorted(set(found.values())))
        return {path: Counter(line_counts(patch_text(blobs[found[pair]])))
                for path, pair in pairs.items() if pair in found and found[pair] in blobs}

    def _on_bare(self, prep: PreparedPin, tree: str) -> tuple[bool, bool]:
        """(applies, changes something) of the pin alone on the bare build."""
        self._load(self._scratch, tree)
        before = self._scratch.path.read_bytes()
        ok = self._apply(self._scratch, prep).ok
        return ok, ok and self._scratch.path.read_bytes() != before

    def _carried(self, prep: PreparedPin, build: Build) -> tuple[bool, float | None]:
        spec = prep.spec
        if spec.kind == "pr" and build.source == "git":
            if spec.commit is not None and self._is_ancestor(spec.commit, build.oid):
                return True, 1.0
        fraction = self.carried_fraction(prep, build.tree)
        if fraction is not None:
            if fraction < CARRIED_THRESHOLD:
                return False, fraction
            applies, changes = self._on_bare(prep, build.tree)
            if applies:
                return not changes, fraction   # changes nothing: git's own answer, "already applied"
            # It fails there: retired only on evidence that the build holds its change where it puts it, counted
            # beyond the copies its own preimage had (issue 40: lines that merely occur somewhere are none).
            placed = self.placed_fraction(prep, build.tree)
            return placed >= CARRIED_THRESHOLD, placed
        # No substantive added lines (a pure removal): carried when applying changes nothing.
        ok, changed = self._on_bare(prep, build.tree)
        return ok and not changed, None

    def _already_made(self, prep: PreparedPin, tree: str, earlier: list[PreparedPin]) -> bool:
        """A pin without added lines (a deletion, rename, mode change) that does not apply may be one
        upstream already made: the bare tree applies it exactly in reverse (`git apply --reverse`, no
        3-way merge). Not when an earlier pin touches its files: its "before" may be that pin's work
        (a pin deleting a file an earlier pin adds), which no upstream tree has."""
        assert prep.change is not None   # only prepared pins are simulated (pins.prepare_pins)
        touched = prep.change.touched
        if touched is None or any(e.change is None or e.change.touched is None or touched & e.change.touched
                                  for e in earlier):
            return False
        self._load(self._scratch, tree)
        env = self.mirror.objects_env(self._new_dir(), self._scratch.objects)
        return all(self.mirror.git("apply", "--cached", "--reverse", "--whitespace=nowarn", str(patch),
                                   index=self._scratch.path, env=env).ok
                   for patch in reversed(prep.change.patches))

    def _moved_carried(self, prep: PreparedPin, tree: str) -> MovedMatch | None:
        """A pin that does not apply may have landed in moved code: look for its lines in the whole
        tree, counting only copies beyond those of the tree it was made on (its base where known,
        else its own files' preimage)."""
        assert prep.change is not None   # only prepared pins are simulated (pins.prepare_pins)
        added: Counter = Counter()
        preimage: Counter = Counter()
        for path, fc in prep.change.files.items():
            if not fc.deleted:
                added.update(fc.net_added())
            preimage.update(fc.preimage)
        base_tree = self._base_tree(prep) or self._preimage_tree(prep)
        if base_tree is not None:
            in_base = {line: sum(places.values()) for line, places in self._moved.locations(base_tree).items()}
            preimage = Counter({line: max(preimage[line], in_base.get(line, 0)) for line in added})
        match = self._moved.match(tree, added, preimage)
        if not match.carried(CARRIED_THRESHOLD):
            return None
        # Moved whole, not merely present: only copies inside the pin's own runs of lines, found together in
        # one file, count (changes.whole_runs); common lines scattered over another file are none.
        paths = [path for path, _ in match.where]
        texts = self.mirror.read_blobs([(tree, path) for path in paths], exact=True)
        whole: dict[str, dict[str, int]] = {}
        for path in paths:
            runs: Counter = Counter()
            for fc in prep.change.files.values():
                if not fc.deleted:
                    runs.update(whole_runs(fc, texts.get((tree, path))))
            for line, n in runs.items():
                whole.setdefault(line, {})[path] = n
        match = self._moved.match(tree, added, preimage, whole)
        return match if match.carried(CARRIED_THRESHOLD) else None

    def _preimage_tree(self, prep: PreparedPin) -> str | None:
        """For a pin naming no base: the tree of the newest commit that brought a preimage blob of the pin (as
        `git am -3` finds it: _found_preimages' lookup) at its path, in the history searched for it: the
        tree the pin was made on, as near as upstream's history tells. None when no preimage is found."""
        pairs = wanted(self._series_of(prep))
        if not pairs or not self._finder.searches(self._history):
            return None
        found = self._finder.find(self._history, pairs)
        tips = [self._history] if self._history is not None else self._finder.upstream_tips()
        for (path, _), oid in found.items():
            log = self.mirror.git("log", "--stdin", "--format=commit %H", "--raw", "--no-abbrev", "--no-renames",
                                  f"--find-object={oid}", "--", path, input="".join(t + "\n" for t in tips),
                                  env={"GIT_LITERAL_PATHSPECS": "1"})
            commit = None
            for line in log.stdout.splitlines() if log.ok else []:
                if line.startswith("commit "):
                    commit = line.split()[1]
                elif commit and line.startswith(":") and line.split("\t", 1)[0].split()[3] == oid:
                    return self.mirror.tree_of(commit)   # the newest commit leaving the blob there
        return None

    def _attribute(self, prep: PreparedPin, conflict_files: list[str], build: Build,
                   applied: list[_Applied]) -> str:
        """`upstream` if the pin fails on the bare build too, else the earlier pin it collides with."""
        assert prep.change is not None   # only prepared pins are simulated (pins.prepare_pins)
        if not self._applies_on(build.tree, prep):
            return "upstream"
        touched = set(conflict_files) or set(prep.change.files)
        for earlier in reversed(applied):
            if touched & set(earlier.change.files) and self._applies_on(build.tree, earlier.prep) \
                    and not self._applies_on(build.tree, earlier.prep, prep):
                return earlier.pin_id
        # The collision needs several earlier pins together: the first prefix after which it fails.
        prefix: list[PreparedPin] = []
        for earlier in applied:
            prefix.append(earlier.prep)
            if not self._applies_on(build.tree, *prefix, prep):
                return earlier.pin_id
        return applied[-1].pin_id if applied else "upstream"

    def base_relation(self, prep: PreparedPin, build: Build) -> str | None:
        """How the build stands to the pin's base: `older` (a strict ancestor of it: the pin was made
        for newer code), `contains` (the base is in the build's history), `diverged`; None when not
        known. An sdist build is placed by the upstream commit its CHANGELOG names, and only as
        `older`: an ancestor of the base comes with the base's history, so that answer does not
        depend on what else the mirror holds; the others would."""
        base = self._base(prep)
        if base is None:
            return None
        if build.source != "git":
            commit = self.mirror.rev_parse(build.commit) if build.commit != "unknown" else None
            if commit and commit != base and self._is_ancestor(commit, base):
                return "older"
            return None
        if self._is_ancestor(base, build.oid):
            return "contains"
        return "older" if self._is_ancestor(build.oid, base) else "diverged"

    def _is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self.mirror.git("merge-base", "--is-ancestor", ancestor, descendant).ok

    def _contract(self, entry: _Applied, final_tree: str, base_tree: str, later: list[_Applied]) -> Contract:
        """The pin's files, added lines and feature symbols (those new to upstream's file) survived."""
        problems: list[str] = []
        paths = sorted(entry.change.files)
        where = {path: entry.renamed.get(path, path) for path in paths}   # a file upstream moved: read there
        texts = self.mirror.read_blobs([(final_tree, where[path]) for path in paths]
                                       + [(base_tree, where[path]) for path in paths
                                          if not entry.change.files[path].deleted],
                                       exact=True)   # bytes against the pin's bytes (changes.patch_text)
        for path, fc in sorted(entry.change.files.items()):
            final_text = texts[final_tree, where[path]]
            suspects = [a.pin_id for a in later if path in a.change.files or where[path] in a.change.files
                        or a.renamed.get(path) == where[path]]
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
            exempt = entry.replaced.get(path, ())  # a recorded resolution put its own lines there
            missing = [line for line, n in fc.net_added().items() if counts.get(line, 0) < n and line not in exempt]
            if missing:
                total = len(fc.net_added())
                problems.append(f"{path}: {len(missing)} of {total} added lines gone "
                                f"(e.g. {missing[0][:80]!r}){by}")
            upstream_text = texts[base_tree, where[path]] or ""
            for symbol in sorted(fc.symbols):
                if re.search(rf"\b{symbol}\b", upstream_text):
                    continue  # upstream's own symbol, not introduced by the pin
                if not re.search(rf"\b{symbol}\b", final_text):
                    problems.append(f"{path}: feature symbol {symbol} no longer present{by}")
        return Contract(not problems, problems)

    # --- one build ------------------------------------------------------------------------
    def simulate_build(self, build: Build) -> BuildResult:
        """The pin set on one build; answered whole from the build memo (sim/memo.py) when the same inputs
        were simulated before, in this run or an earlier one: then no apply, probe or contract runs."""
        key = self._build_key(build)
        if key is not None:
            known = self._builds.get(key)
            if known is not None and "asks_upstream" in known and not self._finder.fetched:
                self._finder.upstream_tips()   # what the build's answer reads: fetched now, then asked by their tips
                key = self._build_key(build)
                known = self._builds.get(key) if key is not None else None
            if known is not None and "needs" in known and self._has_objects(known["needs"]):
                result = _build_from_json(known["result"])
                if result is not None:
                    self._builds.hits += 1
                    return self._with_digests(result)
            self._builds.misses += 1
        fetched = self._finder.fetched
        result = self._with_digests(self._simulate_build(build))
        # A build whose lookup fetched upstream's refs was keyed before it (their tips `unasked`): its result
        # may depend on those tips, so the key made before says only that (a later run fetches first and asks
        # again, `asks_upstream`), and the result is kept under the key that names the tips.
        if key is not None and fetched != self._finder.fetched:
            self._builds.put(key, {"asks_upstream": True})
            key = self._build_key(build)
        if key is not None:
            needs = self._needs(build, result)
            if needs is not None:
                self._builds.put(key, {"result": asdict(result), "needs": needs})
        return result

    def _build_key(self, build: Build) -> str | None:
        """The key of the build's whole result: every input simulate_build reads. The build (name, commit, mirror
        commit and tree), for a git build the commits whose history the preimage lookup may read, each pin in
        order (its spec as pins.yaml gave it, why it could not be prepared, its fork point, its base, its
        patch files' paths and bytes), the options (apply_modes, look_for_moved_code, attribute_conflicts),
        git's identity and pinset's own code (memo.code_digest). None (no memo) when a pin has recorded
        resolutions (their files are more input) or a ledger that does not read."""
        parts = [memo.code_digest(), self._git, repr(build), repr(self.apply_modes),
                 repr(sorted(self.look_for_moved_code) if isinstance(self.look_for_moved_code, set)
                      else self.look_for_moved_code), repr(self.attribute_conflicts)]
        parts += ["preimages", *self._finder.key(build.oid if build.source == "git" else None)]
        for spec in self.pinset.pins:
            prep = self.prepared[spec.id]
            parts += ["pin", repr(spec), repr(prep.error), repr(prep.fork_point)]
            if prep.change is None:
                continue
            try:
                if self._ledger.ledger_of(spec):
                    return None
            except PinsetError:
                return None
            parts.append(repr(self._base(prep) if prep.change.patches else None))
            if spec.id not in self._patch_bytes:
                self._patch_bytes[spec.id] = [Path(patch).read_bytes() for patch in prep.change.patches]
            for patch, data in zip(prep.change.patches, self._patch_bytes[spec.id]):
                parts += [str(Path(patch).absolute()), hashlib.sha256(data).hexdigest()]
        return memo.build_key(parts)

    def _has_objects(self, needs: list) -> bool:
        """The mirror holds every object a remembered result names (read through the run's object reader:
        no process); one gone (a gc, a cache rebuilt) makes it a miss."""
        if not needs:
            return True
        if not all(isinstance(oid, str) and len(oid) == 40 for oid in needs):
            return False
        return len(self.mirror.read_objects(needs)) == len(set(needs))

    def _needs(self, build: Build, result: BuildResult) -> list[str] | None:
        """The objects of the mirror `result` names beyond the build's own: its merged tree, the blobs the
        pins left in it and the blobs the pins' series made (_share). None: not known (no memo)."""
        needs: set[str] = set()
        if result.tree is not None and result.tree != build.tree:
            index = self._final_index
            if index is None:
                return None
            try:
                entries = memo.read_index(index)
            except memo.IndexFormat:
                return None
            own = self._dir_blobs.get(self._build_objects.get(build.tree, Path()), frozenset())
            needs.add(result.tree)
            needs |= {oid for mode, oid in entries.values() if mode != 0o160000 and oid not in own}
        history = build.oid if build.source == "git" else None
        for spec in self.pinset.pins:
            made = [self._base_made[spec.id]] if spec.id in self._base_made else []
            made += self._found.get((spec.id, history), [])[1:] if history is not None else []
            for written in made:
                needs.update(loose_ids(written))
        return sorted(needs)

    def _simulate_build(self, build: Build) -> BuildResult:
        self._final_index = None
        self._history = build.oid if build.source == "git" else None  # an sdist's tree has no history
        self._tree = build.tree
        index = _Index(self.mirror.temp_path(f"build-index-{build.tree[:12]}"))
        self._load(index, build.tree)
        applied: list[_Applied] = []
        results: list[PinResult] = []
        for spec in self.pinset.pins:
            prep = self.prepared[spec.id]
            result = PinResult(spec.id, "error", spec.required)
            result.evidence = list(spec.evidence) if spec.evidence else None   # pins.yaml's own word (report)
            results.append(result)
            if prep.error or prep.change is None:
                result.detail = prep.error
                result.contract = Contract(False, [f"{spec.id}: {prep.error}"])
                continue
            result.files = result.touched = prep.change.paths
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
            before = index.snapshot()
            outcome = self._apply(index, prep, how=self.apply_modes)
            if outcome.ok:
                if index.path.read_bytes() == before[0]:
                    index.restore(before)
                    if outcome.renamed and self._on_bare(prep, build.tree) == (True, False):
                        # merged into files upstream moved, it changes nothing there: `git am -3` says "already
                        # applied" (_carried read the pin's own paths, which upstream no longer has)
                        result.status, result.retire = "upstream", True
                        result.detail = ("build already carries this pin in moved code (git am -3 merges it into "
                                         "upstream's renamed files as a no-op): " + _moves(outcome.renamed))
                        continue
                    result.status, result.detail = "skipped", "no change on top of the earlier pins"
                    continue
                applied.append(_Applied(spec.id, prep, outcome.replaced, outcome.renamed))
                result.status = "applied"
                result.apply_mode, result.resolutions = outcome.mode, outcome.resolutions or None
                result.unions = outcome.unions or None
                if outcome.renamed:
                    result.detail = "merged into upstream's renamed files (as git am -3): " + _moves(outcome.renamed)
                continue
            index.restore(before)  # roll back the half-applied pin (and forget the blobs it wrote)
            earlier = [self.prepared[e.id] for e in self.pinset.pins[:len(results) - 1]]
            # (not when am's merge failed: a deletion of a file upstream moved is a rename/delete conflict there)
            if fraction is None and not outcome.merge_failed and self._already_made(prep, build.tree, earlier):
                result.status, result.retire = "upstream", True
                result.detail = "build already carries this pin (the bare build has its result: it applies in reverse)"
                continue
            search = self.look_for_moved_code
            moved = self._moved_carried(prep, build.tree) \
                if (search if isinstance(search, bool) else spec.id in search) else None
            if moved is not None:
                result.status, result.retire = "upstream", True
                result.detail = f"build already carries this pin in moved code: {moved.describe()}"
                continue
            result.status = "conflict"
            result.files = outcome.conflict_files
            result.conflict_with = self._attribute(prep, outcome.conflict_files, build, applied) \
                if self.attribute_conflicts else None
            result.detail = outcome.message + (f"; {outcome.note}" if outcome.note else "")
            result.hunk, result.build_has = conflict_place(outcome.hunk, outcome.hunk_path, outcome.conflict_files,
                                                           outcome.patch_text,
                                                           lambda path: self.mirror.read_blob(build.tree, path))
            if result.conflict_with == "upstream":
                result.base_relation = self.base_relation(prep, build)
                if result.base_relation == "older":
                    result.detail += f" (this build is older than the pin's base {(self._base(prep) or '')[:12]})"
            result.contract = Contract(False, [f"{f}: does not apply (conflict with {result.conflict_with})"
                                               for f in outcome.conflict_files])
        merged = self._merged_tree(build.tree, index) if applied else build.tree
        self._final_index = index.path.read_bytes() if applied else None
        by_id = {r.id: r for r in results}
        for i, entry in enumerate(applied):
            by_id[entry.pin_id].contract = self._contract(entry, merged, build.tree, applied[i + 1:])
        return BuildResult(build.name, build.commit, results, tree=merged, base_tree=build.tree,
                           mirror_commit=build.oid if build.source == "pypi" else None)

    def _with_digests(self, result: BuildResult) -> BuildResult:
        """Each pin's digest (PinSpec.digest), set here and not in the memo: what a pin applies, as read now."""
        if self._pin_digests is None:
            self._pin_digests = {spec.id: spec.digest for spec in self.pinset.pins}
        for pin in result.pins:
            pin.digest = self._pin_digests.get(pin.id)
        return result

    def run(self, builds: list[Build]) -> SimResult:
        return SimResult([self.simulate_build(b) for b in builds], self.pinset.digest)


def _build_from_json(doc: dict) -> BuildResult | None:
    """A BuildResult from its dataclasses.asdict form (as the build memo keeps it); None when `doc` is not of
    that shape (every field of its type: an entry another pinset, a hand or a bug wrote is a miss)."""
    if not memo.fits(doc, BuildResult, {"BuildPlace": BuildPlace}):
        return None
    pins = []
    for p in doc["pins"]:
        place = p["build_has"]
        pins.append(PinResult(**{**p, "contract": Contract(**p["contract"]),
                                 "build_has": BuildPlace(**place) if place is not None else None,
                                 "unions": [UnionHunk.from_json(u) for u in p["unions"]] if p.get("unions") else None}))
    return BuildResult(**{**doc, "pins": pins})


def _outcome_of(answer: memo.Answer, prep: PreparedPin) -> ApplyOutcome | None:
    """The ApplyOutcome a memo answer stands for (the failed patch's text read again from its file); None when
    the answer names a patch the pin does not have (a miss)."""
    fields = answer.outcome
    failed = fields.get("failed_patch")
    assert prep.change is not None
    if failed is not None and failed >= len(prep.change.patches):
        return None
    text = prep.change.patches[failed].read_text(encoding="utf-8", errors="replace") if failed is not None else ""
    return ApplyOutcome(answer.ok, list(fields["conflict_files"]), fields["message"], list(fields["hunk"]),
                        fields["hunk_path"], text, fields["mode"], list(fields["resolutions"]), fields["note"],
                        {path: set(lines) for path, lines in fields["replaced"].items()}, dict(fields.get("renamed", {})),
                        bool(fields.get("merge_failed", False)),
                        [UnionHunk.from_json(u) for u in fields.get("unions", [])])


def _raw_entries(raw: str) -> list[tuple[str, tuple[str, ...]]]:
    """(meta, paths) of each entry of a `diff-tree -r -z` listing: (":100644 100644 a b M", (path,)), a
    rename or copy with its two paths (":100644 100644 a b R100", (old, new))."""
    fields, out, i = raw.split("\0"), [], 0
    while i < len(fields) - 1:
        meta = fields[i]
        if not meta.startswith(":"):
            i += 1
            continue
        count = 2 if meta.split()[-1][:1] in ("R", "C") else 1
        out.append((meta, tuple(fields[i + 1:i + 1 + count])))
        i += 1 + count
    return out


def _moves(renamed: dict[str, str]) -> str:
    """"old -> new, ..." of the files a pin went into where upstream moved them."""
    return ", ".join(f"{old} -> {new}" for old, new in sorted(renamed.items()))


def _blobs(listing: str) -> list[str]:
    """Blob ids of an `ls-tree -r -z` / `ls-files -s -z` listing (submodule commits left out)."""
    ids = []
    for entry in listing.split("\0"):
        fields = entry.split("\t", 1)[0].split()
        if len(fields) == 3 and fields[1] == "blob":
            ids.append(fields[2])
    return ids
