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

import hashlib
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from pinset import runner
from pinset.disk import check_disk
from pinset.errors import CacheDamaged, UpstreamError
from pinset.progress import SPINNER, Progress
from pinset.redact import redact_url
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
# git's words for a loose object it could not read: also what it says of one that did not exist when it looked
# and that a concurrent run (a fetch into the mirror) wrote a moment later (it stats the file after the read failed).
_LOOSE_UNREADABLE_RE = re.compile(r"loose object ([0-9a-f]{40,64}) \(stored in .*\) is corrupt")
# Its own settings for every call: git's background gc would outlive (and race) the run. (No setting of
# the user's reaches git at all: pinset.runner.NEUTRAL_CONFIG.)
_CONFIG = ["-c", "gc.autoDetach=false", "-c", "maintenance.autoDetach=false"]


# The namespaces whose refs are named by a remote's URL (url_key): upstream's refs as the preimage lookup fetches
# them, and the branches of a fork a PR pin comes from.
URL_KEYED = ("refs/pinset/upstream-refs/", "refs/pinset/fork/")
_URL_KEY_RE = re.compile(r"[0-9a-f]{16}-[A-Za-z0-9_-]{0,60}")


def url_key(url: str) -> str:
    """A ref folder name for one remote: the sha256 of its URL with the credentials redacted (a token in
    `https://x-access-token:TOKEN@host/...` reaches no ref name, and a rotated token names the same refs), then
    the redacted URL's letters, digits, `-` and `_` (the last 60, each run of others one `_`) to read it by.
    Always a valid ref component: no dots (no `..`, no leading `.`, no `.lock`)."""
    shown = redact_url(url)
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", shown.replace("***@", "")).strip("_")[-60:]
    return f"{hashlib.sha256(shown.encode()).hexdigest()[:16]}-{readable}"


def _stale_url_keyed(ref: str) -> bool:
    """A ref of a URL-keyed namespace named the way older pinsets named it (by the raw URL, which may hold a
    token): removed when the mirror opens; the next lookup fetches under the new name."""
    for space in URL_KEYED:
        if ref.startswith(space):
            return not _URL_KEY_RE.fullmatch(ref[len(space):].split("/", 1)[0])
    return False


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
        self._reader = ObjectReader(self)

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
        broken += [ref for _, ref in refs if _stale_url_keyed(ref)]   # named by a raw URL (a token, maybe)
        refs = [pair for pair in refs if not _stale_url_keyed(pair[1])]
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
        for attempt in (1, 2):
            result = runner.run([*prefix, *args], env=full_env or None, input=input, timeout=timeout,
                                cwd=work_tree, binary=binary)
            if not result.ok:  # a full disk is no conflict, no missing tag and no damage: exit 1 naming the cache
                check_disk(self.path if work_tree is None else f"{work_tree} (or {self.path})", result.stderr)
            if not check_damage or result.ok:
                return result
            damage = _DAMAGE_RE.search(result.stderr)
            if not damage:
                return result
            if attempt == 1 and self._appeared_meanwhile(result.stderr):
                continue  # git failed before the object was there, not on a damaged one: the same call again
            raise CacheDamaged(self.path, damage.group(0).strip())
        return result

    def _appeared_meanwhile(self, stderr: str) -> bool:
        """git's "loose object X is corrupt" of an X that reads whole now: a concurrent run wrote X while this
        call looked for it (concurrent runs on one cache must agree, not call it damaged)."""
        m = _LOOSE_UNREADABLE_RE.search(stderr)
        return m is not None and self._git_reads(m.group(1))

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
        """Raw contents of many objects, read by the run's one `git cat-file --batch`; absent ones
        are left out."""
        wanted = list(dict.fromkeys(oids))
        return {oid: found[1] for oid, found in zip(wanted, self._reader.read(wanted)) if found is not None}

    def read_typed(self, names: list[str]) -> list[tuple[str, bytes] | None]:
        """(type, contents) of each object name (an id, `<tree>:<path>`; none with a newline), None when
        absent, read by the run's one `git cat-file --batch`."""
        return self._reader.read(names)

    def read_blob(self, tree: str, path: str) -> str | None:
        """Text of `path` in `tree`, or None when absent or not a file."""
        return self.read_blobs([(tree, path)])[tree, path]

    def read_blobs(self, wanted: Iterable[tuple[str, str]], exact: bool = False) -> dict[tuple[str, str], str | None]:
        """read_blob of many (tree, path) pairs in one exchange with the object reader. `exact`: every byte
        kept (surrogateescape, no newline translation), for comparing lines as bytes (the sim's contract)."""
        pairs = list(dict.fromkeys(wanted))
        texts: dict[tuple[str, str], str | None] = {}
        batch = [pair for pair in pairs if "\n" not in pair[0] + pair[1]]
        for pair in pairs:  # not a name `cat-file --batch` can read from a line
            if "\n" in pair[0] + pair[1]:
                texts[pair] = self._read_blob_alone(*pair, exact=exact)
        for (tree, path), found in zip(batch, self._reader.read([f"{tree}:{path}" for tree, path in batch])):
            if found is not None:
                kind, data = found
                # As `git cat-file blob` in text mode gave it: UTF-8 with replacements, universal newlines.
                texts[tree, path] = (None if kind != "blob" else data.decode(errors="surrogateescape") if exact
                                     else data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n"))
                continue
            # Absent from the tree, or named by it but lost or corrupt (damage, not a missing file).
            named = self._reader.entry(tree, path)
            if named is not None:
                raise CacheDamaged(self.path, f"object {named[:12]} ({path}) is missing")
            texts[tree, path] = None
        return texts

    def _read_blob_alone(self, tree: str, path: str, exact: bool = False) -> str | None:
        result = self.git("cat-file", "blob", f"{tree}:{path}", check_damage=False, binary=exact)
        if result.ok:
            out = result.stdout
            return out.decode(errors="surrogateescape") if isinstance(out, bytes) else out
        named = self.git("rev-parse", "--verify", "--quiet", f"{tree}:{path}", check_damage=False)
        if named.ok and not self.git("cat-file", "-e", named.stdout.strip(), check_damage=False).ok:
            raise CacheDamaged(self.path, f"object {named.stdout.strip()[:12]} ({path}) is missing")
        return None

    # --- fetching -------------------------------------------------------------------------
    def fetch(self, url: str, refspecs: list[str], timeout: float = 900, prune: bool = False) -> runner.Completed:
        """`git fetch` of the refspecs from url; `prune`: refs under a refspec's destination pattern that url
        no longer has are deleted (the namespace then mirrors url's refs as they are now)."""
        with self.lock(waiting=f"waiting for another pinset fetching into {self.path}"):
            # check_damage=False: here git's words may be about the remote, not about the mirror.
            with Progress(f"fetching {_refs_shown(refspecs)} from {redact_url(url)}", kind=SPINNER):
                return self.git("fetch", "--no-tags", "--quiet", *(["--prune"] if prune else []), url, *refspecs,
                                timeout=timeout, env={"GIT_TERMINAL_PROMPT": "0"}, check_damage=False)

    def update_ref(self, ref: str, oid: str) -> None:
        with self.lock():
            self.git_ok("update-ref", ref, oid)

    def check_tree(self, tree: str) -> None:
        """Every blob of `tree` is in the mirror: a tree with a lost blob would make pins "conflict"
        (git apply lacks the blob) or lose files, so it is named as damage instead."""
        self.check_trees([tree])

    def check_trees(self, trees: list[str]) -> None:
        """check_tree of several trees in one process: `git rev-list --objects --missing=print` walks them all
        (their shared folders once) and names each object it cannot find, tree or blob (submodule commits are
        not followed). A loss is named per tree, as check_tree always did."""
        trees = list(dict.fromkeys(trees))
        if not trees:
            return
        walk = self.git_ok("rev-list", "--objects", "--missing=print", "--no-object-names", *trees)
        missing = [line[1:] for line in walk.splitlines() if line.startswith("?")]
        if not missing:
            self._check_loose([line for line in walk.splitlines() if not line.startswith("?")])
            return
        for tree in trees:
            lost = [line[1:] for line in self.git_ok("rev-list", "--objects", "--missing=print", "--no-object-names",
                                                     tree).splitlines() if line.startswith("?")]
            if lost:
                raise CacheDamaged(self.path, f"tree {tree[:12]} lacks {len(lost)} objects (e.g. {lost[0][:12]})")
        raise CacheDamaged(self.path, f"lacks {len(missing)} objects (e.g. {missing[0][:12]})")   # not reached

    def _check_loose(self, oids: list[str]) -> None:
        """The walked objects stored loose (a small fetch, an import) read back whole, in-process: the walk
        only asks whether each exists, and a warm run answered by the memo reads no blob, so an emptied or
        cut loose file (a crash mid-write, a full disk) would pass unseen until a later verb met it."""
        root = self.path / "objects"
        loose = set()
        for sub in {oid[:2] for oid in oids}:
            try:
                loose |= {sub + name for name in os.listdir(root / sub)}
            except OSError:
                continue
        for oid in oids:
            # git is asked about a file that does not read: another run's gc may have packed it away meanwhile,
            # or a pack holds a good copy (git reads packs first); only what git cannot read either is damage
            if oid in loose and not _loose_reads(root / oid[:2] / oid[2:], oid) and not self._git_reads(oid):
                raise CacheDamaged(self.path, f"object {oid[:12]} does not read (objects/{oid[:2]}/{oid[2:]})")

    def _git_reads(self, oid: str) -> bool:
        """git reads `oid` and what it reads hashes to that id (a loose file holding another object's data is
        read by git without complaint). Its own process: a corrupt object must not end the run's reader."""
        read = self.git("cat-file", "--batch", input=f"{oid}\n".encode(), check_damage=False, binary=True)
        if not read.ok:
            return False
        header, nl, rest = cast(bytes, read.stdout).partition(b"\n")
        fields = header.split()
        if not nl or len(fields) != 3 or not fields[2].isdigit() or len(rest) < int(fields[2]):
            return False
        return _hashes_to(fields[1] + b" " + fields[2] + b"\0" + rest[:int(fields[2])], oid)

    def commit_of(self, rev: str) -> tuple[str, str, str] | None:
        """(commit id, its tree, its message) of what `rev` names, peeled to a commit (rev_parse, tree_of and
        commit_message in one), read by the run's object reader: no process. None: no such commit."""
        if "\n" in rev:
            return None
        found = self._reader.lookup([f"{rev}^{{commit}}"])[0]
        if found is None or found[1] != "commit":
            return None
        oid, _, data = found
        header, _, message = data.partition(b"\n\n")
        first = header.split(b"\n", 1)[0].split()
        if len(first) != 2 or first[0] != b"tree":
            return None
        return oid, first[1].decode(), message.decode(errors="replace")

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

    def tree_import(self, scratch: Path) -> "TreeImport":
        """A `git fast-import` that takes files one by one (see TreeImport); `scratch` holds its pack until
        the commit moves it in."""
        return TreeImport(self, scratch)

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
        self._reader.close()
        self._scratch.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TreeImport:
    """A tree written by `git fast-import` from files handed to it one by one (an sdist read as a stream):
    one pack, no file on disk, the same tree and commit as `import_directory` of the same files.

    The pack is written into a private repository under `scratch` (reading the mirror's objects as
    alternates, so what the mirror packs is not written twice) and moved into the mirror only by commit():
    an import that fails or is abandoned leaves nothing in the mirror, no ref is ever written by fast-import
    (its branch is reset before the end), and the ref moves under the mirror lock like every other.
    """

    def __init__(self, mirror: Mirror, scratch: Path):
        self.mirror = mirror
        # fast-import's own repository in the scratch: its objects, no refs, and the place of the crash report
        # it writes when its stream ends early (pinset killed): gone with the scratch, never in the mirror.
        git_dir = scratch / "fast-import.git"
        self.objects = git_dir / "objects"
        (self.objects / "pack").mkdir(parents=True)
        (git_dir / "refs").mkdir()
        (git_dir / "HEAD").write_text("ref: refs/heads/master\n")
        self._marks = 0
        # Loose objects are looked for only when the mirror has any (a fetched git build): hashing every
        # blob in Python too costs 0.3 s an sdist.
        self._loose = any(len(entry.name) == 2 for entry in os.scandir(mirror.path / "objects"))
        self._session = runner.Session(
            ["git", *_CONFIG, "-c", "fastimport.unpackLimit=0", "-c", "pack.compression=1", "--git-dir", str(git_dir),
             "fast-import", "--quiet", "--done", "--depth=0"],
            stderr=scratch / "fast-import.err",
            env=Mirror.objects_env(self.objects, [mirror.path / "objects"]))

    def add_blob(self, data: bytes) -> bytes:
        """Send a blob; return how the commit names it (a mark, or the id of a loose object the mirror has:
        fast-import skips only what packs hold, and a second copy would hide a damaged loose one)."""
        if self._loose:
            oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            if (self.mirror.path / "objects" / oid[:2] / oid[2:]).is_file():
                return oid.encode()
        self._marks += 1
        self._send(b"blob\nmark :%d\ndata %d\n" % (self._marks, len(data)))
        self._send(data)
        self._send(b"\n")
        return b":%d" % self._marks

    def commit(self, files: list[tuple[bytes, str, bytes]], ref: str, message: str) -> str:
        """Commit `files` ((path, mode, what add_blob returned)) as a root commit at `ref`, with `import_directory`'s
        identity, dates and message; return the commit id."""
        when = b"pinset <pinset@localhost> 946684800 +0000"  # _IDENTITY's, as commit-tree writes it
        body = message.encode()
        lines = [b"commit refs/pinset/fast-import\nmark :%d\nauthor %s\ncommitter %s\ndata %d\n%s\n"
                 % (self._marks + 1, when, when, len(body), body)]
        lines += [b"M %s %s %s\n" % (mode.encode(), blob, path) for path, mode, blob in files]
        lines.append(b"\nls :%d \"\"\nreset refs/pinset/fast-import\n\ndone\n" % (self._marks + 1))
        self._send(b"".join(lines))
        proc = self._session.proc
        try:
            self._session.stdin.close()
            answer = self._session.stdout.read().decode(errors="replace")
            proc.wait(timeout=900)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self._failed()
        if proc.returncode != 0:
            self._failed()
        m = re.match(r"040000 tree ([0-9a-f]{40})\t", answer)
        if not m:
            raise UpstreamError(f"fast-import into {self.mirror.path}: no tree in its answer {answer[:80]!r}")
        packs = self.objects / "pack"
        for pack in sorted(packs.glob("*.pack")):  # the pack before its index: git sees a pack by its .idx
            os.replace(pack, self.mirror.path / "objects" / "pack" / pack.name)
            os.replace(pack.with_suffix(".idx"), self.mirror.path / "objects" / "pack" / pack.with_suffix(".idx").name)
        commit = self.mirror.git_ok("commit-tree", m.group(1), "-m", message, env=_IDENTITY).strip()
        self.mirror.update_ref(ref, commit)
        return commit

    def _send(self, data: bytes) -> None:
        try:
            self._session.stdin.write(data)
        except (OSError, ValueError):  # it died (a full disk, a bad stream): what it said
            self._failed()

    def _failed(self):
        try:
            self._session.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        said = self._session.stderr_text().strip()
        check_disk(self.mirror.path, said)
        raise UpstreamError(f"fast-import into {self.mirror.path}: "
                            f"{said.splitlines()[-1] if said else 'exit ' + str(self._session.proc.returncode)}")

    def close(self) -> None:
        """Stop fast-import (killed first when it did not finish: an ended stream would make it write a
        crash report into the mirror)."""
        if self._session.proc.poll() is None:
            try:
                os.killpg(self._session.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _refs_shown(refspecs: list[str]) -> str:
    """'pull/123/head' for one refspec, 'pull/1/head and 2 more' for several."""
    names = [r.lstrip("+").split(":", 1)[0] for r in refspecs] or ["?"]
    return names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else "")


def parse_tree(data: bytes) -> list[tuple[bytes, str, str]]:
    """(mode, name, hex id) of each entry of a raw tree object (git's binary tree format)."""
    entries, pos = [], 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        entries.append((data[pos:space], data[space + 1:nul].decode("utf-8", "replace"), data[nul + 1:nul + 21].hex()))
        pos = nul + 21
    return entries


_TYPES = (b"blob", b"tree", b"commit", b"tag")


class ObjectReader:
    """One persistent `git cat-file --batch` on the mirror for all of a run's object reads: a blob
    read is a line written and read back, not a process (sim and blame read hundreds). Objects other
    runs add meanwhile are seen too (git looks again on a miss). Damage git reports on its stderr
    raises CacheDamaged, as Mirror.git does."""

    def __init__(self, mirror: Mirror):
        self._mirror = mirror
        self._lock = threading.Lock()
        self._session: runner.Session | None = None
        self._seen_stderr = 0
        self._started = 0

    def read(self, names: list[str]) -> list[tuple[str, bytes] | None]:
        """(type, contents) of each object name (an id, `<tree>:<path>`), None when absent."""
        return [None if found is None else found[1:] for found in self.lookup(names)]

    def lookup(self, names: list[str]) -> list[tuple[str, str, bytes] | None]:
        """(id, type, contents) of each object name (an id, `<tree>:<path>`, `<ref>^{commit}`), None when absent."""
        if not names:
            return []
        with self._lock:
            session = self._ensure()
            request = "".join(name + "\n" for name in names).encode()
            writer = None
            if len(request) > 16384:  # git answers while we write: write from a thread, never both blocked
                writer = threading.Thread(target=self._write, args=(session, request), daemon=True)
                writer.start()
            else:
                self._write(session, request)
            try:
                found = [self._answer(session) for _ in names]
            except BaseException:
                self._stop()
                raise
            finally:
                if writer is not None:
                    writer.join()
            self._check_stderr(session)
            return found

    def entry(self, tree: str, path: str) -> str | None:
        """The id `tree` names at `path` (walking its folders), None when it names nothing there."""
        found = self.read([tree])[0]
        if found is not None and found[0] == "commit":
            head = found[1].split(b"\n", 1)[0].split()
            found = self.read([head[1].decode()])[0] if len(head) == 2 and head[0] == b"tree" else None
        parts = [p for p in path.split("/") if p]
        for i, part in enumerate(parts):
            if found is None or found[0] != "tree":
                return None
            oid = next((oid for mode, name, oid in parse_tree(found[1]) if name == part), None)
            if oid is None or i == len(parts) - 1:
                return oid
            found = self.read([oid])[0]
        return None

    @staticmethod
    def _write(session: runner.Session, request: bytes) -> None:
        try:
            session.stdin.write(request)
            session.stdin.flush()
        except OSError:
            pass  # git is gone: the reader sees its end and says why

    def _answer(self, session: runner.Session) -> tuple[str, str, bytes] | None:
        header = session.stdout.readline()
        if not header.endswith(b"\n"):
            self._died(session)
        parts = header[:-1].rsplit(b" ", 2)
        if len(parts) != 3 or parts[1] not in _TYPES or not parts[2].isdigit():
            return None  # "<name> missing" / "<name> ambiguous"
        size = int(parts[2])
        data = session.stdout.read(size + 1)
        if len(data) != size + 1:
            self._died(session)
        return parts[0].decode(), parts[1].decode(), data[:size]

    def _died(self, session: runner.Session):
        session.proc.wait()
        err = session.stderr_text()
        self._stop()
        damage = _DAMAGE_RE.search(err)
        if damage:
            raise CacheDamaged(self._mirror.path, damage.group(0).strip())
        raise UpstreamError(f"git cat-file --batch: {err.strip().splitlines()[-1] if err.strip() else 'ended early'}")

    def _check_stderr(self, session: runner.Session) -> None:
        err = session.stderr_text()
        new, self._seen_stderr = err[self._seen_stderr:], len(err)
        damage = _DAMAGE_RE.search(new)
        if damage:
            raise CacheDamaged(self._mirror.path, damage.group(0).strip())

    def _ensure(self) -> runner.Session:
        if self._session is None:
            self._started += 1
            mirror = self._mirror
            try:
                self._session = runner.Session(["git", *_CONFIG, "--git-dir", str(mirror.path), "cat-file", "--batch"],
                                               stderr=mirror.temp_path(f"cat-file-{self._started}.err"))
            except OSError as exc:
                raise UpstreamError(f"git cat-file --batch: cannot start git ({exc.strerror or exc})") from None
            self._seen_stderr = 0
        return self._session

    def _stop(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    def close(self) -> None:
        with self._lock:
            self._stop()


def _loose_reads(path: Path, oid: str) -> bool:
    """A loose object file inflates to a `TYPE SIZE\0` header and that many bytes, hashing to its name."""
    import zlib

    try:
        data = zlib.decompress(path.read_bytes())
    except (OSError, zlib.error):
        return False
    header, nul, body = data.partition(b"\0")
    size = header.split(b" ")[-1]
    if not nul or not size.isdigit() or int(size) != len(body):
        return False
    return _hashes_to(data, oid)


def _hashes_to(data: bytes, oid: str) -> bool:
    """`TYPE SIZE\0` + contents hash to `oid` (sha256 for a 64-hex id, else sha1)."""
    digest = hashlib.sha256 if len(oid) == 64 else hashlib.sha1
    return digest(data).hexdigest() == oid
