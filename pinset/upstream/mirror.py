"""A private bare git repository in the cache that holds every upstream build and pin.

All git work (fetches, imports, in-memory applies on temporary index files) happens here, so the
user's own checkouts are never touched. Blobs are content-addressed, so a tree imported from an sdist
shares its objects with the same files fetched from GitHub. What a `git apply --3way` may read is
not the whole mirror but a private object directory (see object_dir and the sim engine), so a
verdict does not depend on what earlier runs happened to fetch.

Several pinset runs may use one mirror at once: whatever moves a ref (init, fetch, update-ref) holds
the cache's mirror lock; objects are written by git itself, which never shows a half-written one.
A damaged mirror is repaired where nothing is lost (HEAD, a broken ref: the entry is fetched or
imported again), else named in one line (CacheDamaged, exit 1).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from pinset import runner
from pinset.disk import check_disk
from pinset.errors import CacheDamaged, UpstreamError
from pinset.progress import SPINNER, Progress
from pinset.store import atomic_write, cache_tmp, clean_scratch, locked, scratch_dir

# Fixed identity and dates make imported commits reproducible: same tree -> same commit id.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "pinset", "GIT_AUTHOR_EMAIL": "pinset@localhost",
    "GIT_COMMITTER_NAME": "pinset", "GIT_COMMITTER_EMAIL": "pinset@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


# git's answers when an object or the repository itself is unreadable (never a plain "not found").
_DAMAGE_RE = re.compile(r"^(?:error|fatal): .*(?:is corrupt|object file .* is empty|unable to read [0-9a-f]{7,}|"
                        r"bad object|missing (?:blob|tree|commit|object)|inflate: data stream error|"
                        r"packfile .* cannot be accessed|bad packed object|not a git repository|"
                        r"invalid (?:sha1|object) pointer|sha1 mismatch|hash mismatch)", re.M | re.I)
# Its own settings for every call: git's background gc would outlive (and race) the run.
_CONFIG = ["-c", "gc.autoDetach=false", "-c", "maintenance.autoDetach=false"]


class Mirror:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.cache = self.path.parent
        with self.lock():
            if not (self.path / "objects").is_dir():
                self._init()
            self._repair()
        clean_scratch(cache_tmp(self.cache))  # what killed runs left
        self._scratch = scratch_dir(cache_tmp(self.cache), "mirror-")
        self._tmp = self._scratch.path
        self._index_seq = 0

    @contextmanager
    def lock(self, waiting: str | None = None):
        """Held while a ref moves, so concurrent runs never fight over a ref or the first init.

        Every git that takes a ref lock runs under it, so a `*.lock` file found once we hold it was
        left by a git killed with its run: removed, or it would block that ref for good.
        """
        with locked(self.cache / "locks" / "mirror.lock", waiting):
            if (self.path / "refs").is_dir():
                for stale in [*(self.path / "refs").rglob("*.lock"), *self.path.glob("*.lock")]:
                    stale.unlink(missing_ok=True)
            yield

    def _init(self) -> None:
        """Create the bare repository beside its place and move it in whole (a killed init leaves no
        half-made mirror)."""
        with scratch_dir(cache_tmp(self.cache), "mirror-init-") as tmp:
            made = runner.run(["git", "init", "-q", "--bare", str(tmp / "mirror.git")], timeout=120)
            if not made.ok:
                raise UpstreamError(f"git init {self.path}: {made.tail(1) or made.describe()}")
            if self.path.exists():  # an empty or object-less leftover: nothing of value in it
                shutil.rmtree(self.path)
            (tmp / "mirror.git").rename(self.path)

    def _repair(self) -> None:
        """Fix the damage that loses nothing: a truncated HEAD (the mirror never uses it) and refs
        that are unreadable or point at missing objects (their build or pin is fetched again)."""
        head = (self.path / "HEAD").read_bytes() if (self.path / "HEAD").is_file() else b""
        if not re.fullmatch(rb"ref: refs/\S+\n?|[0-9a-f]{40}\n?", head):
            atomic_write(self.path / "HEAD", b"ref: refs/heads/master\n")
        listing = self.git("for-each-ref", "--format=%(objectname) %(refname)", check_damage=False)
        if not listing.ok:
            raise CacheDamaged(self.path, listing.tail(1) or listing.describe())
        broken = re.findall(r"ignoring broken ref (\S+)", listing.stderr)
        refs = [line.split(" ", 1) for line in listing.stdout.splitlines() if " " in line]
        if refs:
            check = self.git("cat-file", "--batch-check", input="".join(oid + "\n" for oid, _ in refs),
                             check_damage=False)
            states = check.stdout.splitlines()
            broken += [ref for (oid, ref), state in zip(refs, states) if state.endswith(" missing")]
        for ref in broken:
            if not self.git("update-ref", "-d", "--no-deref", ref, check_damage=False).ok:
                loose = self.path / ref
                loose.unlink(missing_ok=True)

    # --- plumbing -------------------------------------------------------------------------
    def git(self, *args: str, index: Path | None = None, input: str | bytes | None = None,
            timeout: float = 600, env: dict | None = None, work_tree: Path | None = None,
            check_damage: bool = True, binary: bool = False) -> runner.Completed:
        """git on the mirror; `index` is a temporary index file, `work_tree` a folder to read or write.

        A failure that says the mirror is damaged (a corrupt or missing object) raises CacheDamaged
        rather than passing for a conflict or a missing file.
        """
        full_env = dict(env or {})
        if index is not None:
            full_env["GIT_INDEX_FILE"] = str(index)
        prefix = ["git", *_CONFIG, "--git-dir", str(self.path)]
        if work_tree is not None:
            prefix += ["--work-tree", str(work_tree)]
        result = runner.run([*prefix, *args], env=full_env or None, input=input, timeout=timeout,
                            cwd=work_tree, binary=binary)
        if not result.ok:  # a full disk is no conflict, no missing tag and no damage: exit 1 naming the cache
            check_disk(self.path if work_tree is None else f"{work_tree} (or {self.path})", result.stderr)
        if check_damage and not result.ok:
            damage = _DAMAGE_RE.search(result.stderr)
            if damage:
                raise CacheDamaged(self.path, damage.group(0).strip())
        return result

    def git_ok(self, *args: str, **kw) -> str:
        result = self.git(*args, **kw)
        if not result.ok:
            raise UpstreamError(f"git {' '.join(args[:3])}: {result.tail(3) or result.describe()}")
        return result.stdout

    def fresh_path(self, prefix: str) -> Path:
        """A path in the temporary folder no other user of this mirror (several simulators) has."""
        self._index_seq += 1
        return self.temp_path(f"{prefix}-{self._index_seq}")

    def temp_path(self, name: str) -> Path:
        """A path in the mirror's temporary folder (index files), removed by close()."""
        return self._tmp / name

    def new_index(self, tree: str) -> Path:
        """A temporary index file loaded with `tree` (for in-memory applies)."""
        self._index_seq += 1
        index = self.temp_path(f"index-{self._index_seq}")
        self.git_ok("read-tree", tree, index=index)
        return index

    def write_tree(self, index: Path) -> str:
        return self.git_ok("write-tree", index=index).strip()

    def has_commit(self, rev: str) -> bool:
        return self.git("cat-file", "-e", f"{rev}^{{commit}}").ok

    def rev_parse(self, rev: str) -> str | None:
        result = self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        return result.stdout.strip() if result.ok else None

    def tree_of(self, commit: str) -> str:
        return self.git_ok("rev-parse", f"{commit}^{{tree}}").strip()

    def read_objects(self, oids) -> dict[str, bytes]:
        """Raw contents of many objects from one `git cat-file --batch`; absent ones are left out."""
        wanted = list(dict.fromkeys(oids))
        if not wanted:
            return {}
        result = self.git("cat-file", "--batch", input=("\n".join(wanted) + "\n").encode(), binary=True)
        if not result.ok:
            raise UpstreamError(f"git cat-file --batch: {result.tail(3) or result.describe()}")
        out, found, pos = result.stdout, {}, 0
        while pos < len(out):
            eol = out.index(b"\n", pos)
            header = out[pos:eol].split()
            pos = eol + 1
            if len(header) != 3:  # "<name> missing"
                continue
            size = int(header[2])
            found[header[0].decode()] = out[pos:pos + size]
            pos += size + 1
        return found

    def read_blob(self, tree: str, path: str) -> str | None:
        """Text of `path` in `tree`, or None when absent or not a file."""
        result = self.git("cat-file", "blob", f"{tree}:{path}", check_damage=False)
        if result.ok:
            return result.stdout
        # Absent from the tree, or named by it but lost or corrupt (damage, not a missing file).
        named = self.git("rev-parse", "--verify", "--quiet", f"{tree}:{path}", check_damage=False)
        if named.ok and not self.git("cat-file", "-e", named.stdout.strip(), check_damage=False).ok:
            raise CacheDamaged(self.path, f"object {named.stdout.strip()[:12]} ({path}) is missing")
        return None

    # --- fetching -------------------------------------------------------------------------
    def fetch(self, url: str, refspecs: list[str], timeout: float = 900) -> runner.Completed:
        with self.lock(waiting=f"waiting for another pinset fetching into {self.path}"):
            # check_damage=False: here git's words may be about the remote, not about the mirror.
            with Progress(f"fetching {_refs_shown(refspecs)} from {url}", kind=SPINNER):
                return self.git("fetch", "--no-tags", "--quiet", url, *refspecs, timeout=timeout,
                                env={"GIT_TERMINAL_PROMPT": "0"}, check_damage=False)

    def update_ref(self, ref: str, oid: str) -> None:
        with self.lock():
            self.git_ok("update-ref", ref, oid)

    def check_tree(self, tree: str) -> None:
        """Every blob of `tree` is in the mirror: a tree with a lost blob would make pins "conflict"
        (git apply lacks the blob) or lose files, so it is named as damage instead."""
        listing = self.git_ok("ls-tree", "-r", "-z", "--full-tree", tree)
        entries = [entry.split("\t", 1)[0].split() for entry in listing.split("\0") if entry]
        blobs = [oid for _, kind, oid in entries if kind == "blob"]
        if not blobs:
            return
        check = self.git_ok("cat-file", "--batch-check", input="".join(oid + "\n" for oid in blobs))
        missing = [line.split()[0] for line in check.splitlines() if line.endswith(" missing")]
        if missing:
            raise CacheDamaged(self.path, f"tree {tree[:12]} lacks {len(missing)} objects (e.g. {missing[0][:12]})")

    # --- imports --------------------------------------------------------------------------
    def import_directory(self, directory: Path, ref: str, message: str) -> str:
        """Commit the files of `directory` as a root commit at `ref`; return the commit id."""
        index = self.temp_path("import-index")
        if index.exists():
            index.unlink()
        add = self.git("add", "-A", "-f", ".", index=index, work_tree=directory, timeout=900)
        if not add.ok:
            raise UpstreamError(f"importing {directory}: {add.tail(3)}")
        tree = self.write_tree(index)
        commit = self.git_ok("commit-tree", tree, "-m", message, env=_IDENTITY).strip()
        self.update_ref(ref, commit)
        return commit

    def commit_message(self, commit: str) -> str:
        return self.git_ok("log", "-1", "--format=%B", commit)

    def materialize(self, tree: str, dest: Path) -> None:
        """Write the files of `tree` into the (new or empty) folder `dest`."""
        dest.mkdir(parents=True, exist_ok=True)
        index = self.new_index(tree)
        checkout = self.git("checkout-index", "-a", "-f", index=index, work_tree=dest.resolve(), timeout=900)
        if not checkout.ok:
            raise UpstreamError(f"writing tree {tree[:12]} to {dest}: {checkout.tail(2)}")

    # --- private object directories -------------------------------------------------------
    def object_dir(self, name: str, blobs: Iterable[str] = ()) -> Path:
        """A new object directory in the temporary folder holding exactly `blobs` (packed from the
        mirror) and no alternates: git pointed at it sees nothing else of the mirror."""
        path = self.fresh_path(name)
        path.mkdir()
        oids = sorted(set(blobs))
        if oids:
            (path / "pack").mkdir()
            self.git_ok("pack-objects", "-q", "--window=0", str(path / "pack" / "pack"), input="\n".join(oids) + "\n")
        return path

    @staticmethod
    def objects_env(write: Path, read: Iterable[Path] = ()) -> dict[str, str]:
        """Environment for a git that writes objects to `write` and reads only `write` and `read`."""
        return {"GIT_OBJECT_DIRECTORY": str(write),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(str(p) for p in read)}

    def adopt_objects(self, oids: Iterable[str], sources: Iterable[Path]) -> None:
        """Copy into the mirror those of `oids` it lacks, from the object directories `sources`."""
        wanted = sorted(set(oids))
        if not wanted:
            return
        check = self.git_ok("cat-file", "--batch-check", input="\n".join(wanted) + "\n")
        missing = [line.split()[0] for line in check.splitlines() if line.endswith(" missing")]
        if missing:
            self.git_ok("pack-objects", "-q", "--window=0", str(self.path / "objects" / "pack" / "pack"),
                        input="\n".join(missing) + "\n",
                        env={"GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(str(p) for p in sources)})

    def close(self) -> None:
        self._scratch.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _refs_shown(refspecs: list[str]) -> str:
    """'pull/123/head' for one refspec, 'pull/1/head and 2 more' for several."""
    names = [r.lstrip("+").split(":", 1)[0] for r in refspecs] or ["?"]
    return names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else "")
