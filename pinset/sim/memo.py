"""Content-keyed memo of pin applies: the same patch on the same blobs is the same answer.

A `git apply --cached [--3way]` of a pin onto an index is a pure function of its inputs: the patch bytes,
the index entries of the paths it touches (and of the paths that could clash with them: a file where it
needs a folder, files under a path it makes a file, `.gitattributes`), which of the blobs its `index
<pre>..<post>` lines name the apply may read (the 3-way merge's preimages: the object directories the
engine hands git, see engine.py), how it is asked (`how`: the -v try that tells exact from offset), and
git itself. apply_key() is the one place that key is made; the engine adds through `extra` the search
set of the preimage lookup (pinset.sim.preimages.Preimages.key) when a preimage is not readable there.

An answer is kept in the run and in the cache (`memo/`, like the moved-code index): the outcome, the
index entries the pin leaves on its paths, and the loose objects git wrote for them, so another build,
another probe or another run with the same inputs gives the same index without a git process. Entries are
written whole (write_checked); a missing or damaged one is only a miss.

The index file is read and written here in git's own format (version 2/3, the versions git writes for
these indexes); anything else (version 4, a SHA-256 mirror) is no memo: the apply runs as before.

A whole build's result is kept too (BuildMemo, `memo/build/`): keyed by everything simulate_build reads
(the engine's build_key: the build's commit and tree, each pin's spec, patch bytes and paths, base, the
commits the preimage lookup may read, the options, git's identity and pinset's own code), it lets a run
whose answer is already known skip every apply, attribution, probe and contract of that build.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from pinset.store import atomic_write, read_checked, write_checked

MEMO_FORMAT = "apply-memo-2"   # a change of what a key covers or an answer holds: new names (2: am's whole fake ancestor)
BUILD_FORMAT = "build-memo-1"  # the same for a whole build's result
_INDEX_LINE_RE = re.compile(rb"^index ([0-9a-f]{4,64})\.\.([0-9a-f]{4,64})", re.M)
_LOOSE_RE = re.compile(r"^[0-9a-f]{38}$")

Entry = tuple[int, str]          # (mode, blob id)
Entries = dict[str, Entry]       # path -> entry (stage 0 only)


class IndexFormat(ValueError):
    """An index this module does not read (another version, conflict stages, a SHA-256 repository)."""


def read_index(data: bytes) -> Entries:
    """The stage-0 entries of a git index file (version 2 or 3)."""
    if len(data) < 32 or data[:4] != b"DIRC":
        raise IndexFormat("not an index")
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3):
        raise IndexFormat(f"index version {version}")
    entries: Entries = {}
    pos = 12
    for _ in range(count):
        mode = struct.unpack(">I", data[pos + 24:pos + 28])[0]
        oid = data[pos + 40:pos + 60].hex()
        flags = struct.unpack(">H", data[pos + 60:pos + 62])[0]
        start = pos + 62 + (2 if flags & 0x4000 else 0)
        end = data.index(b"\0", start)
        if flags & 0x3000:
            raise IndexFormat("conflict stages")
        entries[data[start:end].decode("utf-8", errors="surrogateescape")] = (mode, oid)
        pos += (end - pos + 8) & ~7   # 1 to 8 NULs end an entry at a multiple of 8
    while pos + 8 <= len(data) - 20:  # extensions: a split or sparse index holds entries elsewhere
        signature, size = data[pos:pos + 4], struct.unpack(">I", data[pos + 4:pos + 8])[0]
        if signature in (b"link", b"sdir"):
            raise IndexFormat(f"index extension {signature.decode()}")
        pos += 8 + size
    return entries


def write_index(entries: Entries) -> bytes:
    """A version 2 index of `entries` (no stat data: these indexes never meet a work tree)."""
    out = [b"DIRC", struct.pack(">II", 2, len(entries))]
    for path in sorted(entries, key=lambda p: p.encode("utf-8", errors="surrogateescape")):
        mode, oid = entries[path]
        name = path.encode("utf-8", errors="surrogateescape")
        body = bytes(24) + struct.pack(">IIII", mode, 0, 0, 0) + bytes.fromhex(oid) \
            + struct.pack(">H", min(len(name), 0xFFF)) + name
        out.append(body + b"\0" * (8 - len(body) % 8))
    data = b"".join(out)
    return data + hashlib.sha1(data).digest()


def relevant(entries: Entries, touched: frozenset[str]) -> list[tuple[str, int, str]]:
    """The entries an apply of a patch touching `touched` can read: those paths, a file where one of them
    needs a folder, files under one of them, and every `.gitattributes`."""
    parents = {p[:i] for p in touched for i in range(len(p)) if p[i] == "/"}
    folders = tuple(p + "/" for p in touched)
    return sorted((path, *entry) for path, entry in entries.items()
                  if path in touched or path in parents or path.startswith(folders)
                  or path.rsplit("/", 1)[-1] == ".gitattributes")


def named_blobs(patches: list[bytes]) -> list[str]:
    """The blob ids (as written, maybe abbreviated) the patches' `index` lines name, in order."""
    return list(dict.fromkeys(oid.decode() for text in patches for m in _INDEX_LINE_RE.finditer(text)
                              for oid in m.groups() if oid.strip(b"0")))


def preimage_ids(patches: list[bytes]) -> list[str]:
    """The preimage blob ids (the `<pre>` of `index <pre>..<post>`) the patches name: a 3-way merge's bases."""
    return list(dict.fromkeys(m.group(1).decode() for text in patches for m in _INDEX_LINE_RE.finditer(text)
                              if m.group(1).strip(b"0")))


def apply_key(patches: list[bytes], how: bool, entries: list[tuple[str, int, str]],
              available: list[tuple[str, tuple[str, ...]]], git: str, extra: tuple[str, ...] = (),
              names: tuple[str, ...] = ()) -> str:
    """The one key of an apply's answer: patch bytes (their `index` lines included), how it is asked,
    the relevant index entries, which full blob ids each named id resolves to among the blobs the
    apply may read, git's identity, `extra` (inputs a caller adds, e.g. preimages a lookup offers) and
    the patch files' paths (`names`: a failure's message names the patch, git's words its file)."""
    digest = hashlib.sha256()
    for part in (MEMO_FORMAT, git, "how" if how else "plain", *extra, "names", *names):
        digest.update(part.encode() + b"\0")
    for text in patches:
        digest.update(hashlib.sha256(text).digest())
    digest.update(json.dumps([entries, available], separators=(",", ":")).encode())
    return digest.hexdigest()


def git_identity() -> str:
    """The git that answers: its path, size and change time (a new git is a new key; no process)."""
    found = shutil.which("git")
    if found is None:
        return "no git"
    st = os.stat(found)
    return f"{os.path.realpath(found)} {st.st_size} {st.st_mtime_ns}"


def loose_objects(folder: Path) -> dict[str, Path]:
    """The loose objects of an object directory: id -> file."""
    found: dict[str, Path] = {}
    try:
        subdirs = list(os.scandir(folder))
    except OSError:
        return found
    for sub in subdirs:
        if len(sub.name) == 2 and sub.is_dir():
            for entry in os.scandir(sub.path):
                if _LOOSE_RE.match(entry.name):
                    found[sub.name + entry.name] = Path(entry.path)
    return found


@dataclass
class Answer:
    ok: bool
    outcome: dict                       # the ApplyOutcome's fields (JSON)
    changes: dict[str, Entry | None]    # path -> entry after the apply (None: removed); ok only
    objects: list[str]                  # blob ids git wrote that `changes` names


class ApplyMemo:
    """Answers by key, in the run and under `root` (the cache's memo/ folder; None: in the run only)."""

    def __init__(self, root: Path | None):
        self.root = root
        self._answers: dict[str, Answer | None] = {}
        self._files: dict[str, Path] = {}   # blob id -> a loose object file of this run (when the cache took none)
        self.hits = self.misses = 0

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / "apply" / key[:2] / f"{key}.json"

    def _object(self, oid: str) -> Path:
        assert self.root is not None
        return self.root / "objects" / oid[:2] / oid[2:]

    def get(self, key: str) -> Answer | None:
        if key not in self._answers:
            self._answers[key] = self._stored(key)
        found = self._answers[key]
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def _stored(self, key: str) -> Answer | None:
        if self.root is None:
            return None
        data = read_checked(self._path(key))
        if data is None:
            return None
        try:
            raw = json.loads(data)
            answer = Answer(bool(raw["ok"]), dict(raw["outcome"]),
                            {p: (int(e[0]), str(e[1])) if e is not None else None for p, e in raw["changes"].items()},
                            [str(o) for o in raw["objects"]])
        except (ValueError, KeyError, TypeError, IndexError):
            return None
        if not all(self._object(oid).is_file() for oid in answer.objects):
            return None
        return answer

    def put(self, key: str, answer: Answer, written: dict[str, Path]) -> None:
        """Keep `answer`; `written`: the loose object files of the blobs it names (copied into the memo)."""
        self._answers[key] = answer
        for oid in answer.objects:
            self._files.setdefault(oid, written[oid])
        if self.root is None:
            return
        try:
            for oid in answer.objects:
                target = self._object(oid)
                if not target.is_file():
                    atomic_write(target, written[oid].read_bytes())
            write_checked(self._path(key), json.dumps(
                {"ok": answer.ok, "outcome": answer.outcome, "changes": answer.changes, "objects": answer.objects},
                sort_keys=True, separators=(",", ":")).encode())
        except OSError:
            pass  # a cache that cannot take it: the next run asks git again

    def link_objects(self, answer: Answer, folder: Path) -> bool:
        """Put the answer's blobs into the (new, empty) object directory `folder` as loose objects; False
        when one is gone (a cache cleaned meanwhile): then git answers again."""
        for oid in answer.objects:
            target = folder / oid[:2] / oid[2:]
            sources = ([self._object(oid)] if self.root is not None else []) + \
                ([self._files[oid]] if oid in self._files else [])
            for source in sources:
                try:
                    target.parent.mkdir(exist_ok=True)
                    try:
                        os.link(source, target)
                    except FileExistsError:
                        pass
                    except OSError:
                        shutil.copyfile(source, target)
                    break
                except OSError:
                    continue
            else:
                return False
        return True


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 of pinset's own source (every .py of the package, by path): a whole build's result is a function
    of the code that made it, so any change of pinset is a new key (read once per run, about 10 ms)."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for folder, subdirs, files in os.walk(package):
        subdirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = Path(folder) / name
                digest.update(str(path.relative_to(package)).encode() + b"\0")
                try:
                    digest.update(hashlib.sha256(path.read_bytes()).digest())
                except OSError:
                    digest.update(b"unreadable")
    return digest.hexdigest()


def build_key(parts: list[str]) -> str:
    """The key of a whole build's result from the inputs the engine names (engine.Simulator._build_key)."""
    digest = hashlib.sha256()
    for part in (BUILD_FORMAT, *parts):
        digest.update(part.encode(errors="surrogateescape") + b"\0")
    return digest.hexdigest()


class BuildMemo:
    """Whole build results by key, in the run and under `root` (memo/; None: in the run only). An entry holds
    the result and `needs`: the objects of the mirror the result names (its merged tree, the blobs the pins
    wrote and those a series made for refresh/rebase); a hit counts only while the mirror has them all."""

    def __init__(self, root: Path | None):
        self.root = root
        self._docs: dict[str, dict | None] = {}
        self.hits = self.misses = 0

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / "build" / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """{"result": ..., "needs": [...]}, or {"asks_upstream": true} (the build's preimage lookup needed
        upstream's refs, not asked yet when the key was made: the engine fetches them and asks under the key
        that names their tips); None when not known (or the entry is damaged)."""
        if key not in self._docs:
            found = None
            data = read_checked(self._path(key)) if self.root is not None else None
            if data is not None:
                try:
                    found = json.loads(data)
                    if not (isinstance(found, dict) and (found == {"asks_upstream": True} or (
                            isinstance(found.get("result"), dict) and isinstance(found.get("needs"), list)))):
                        found = None
                except ValueError:
                    found = None
            self._docs[key] = found
        return self._docs[key]

    def put(self, key: str, doc: dict) -> None:
        self._docs[key] = doc
        if self.root is None:
            return
        try:
            write_checked(self._path(key), json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
        except OSError:
            pass  # a cache that cannot take it: the next run works it out again
