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

The cache is an input too. Every key names the engine that made the answer (code_digest: a digest of
pinset's own source, so a cache warmed by another pinset is never replayed by this one); an entry whose
digest marker is valid but whose content is not of the shape this code writes (`fits`) is a miss, never a
traceback; a blob of `memo/objects/` is checked (zlib, header, id) before a replay lends it to git, and one
that does not read is removed there and made again by git (memo/'s damage, never called the mirror's).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import struct
import types
import typing
import zlib
from dataclasses import dataclass
from pathlib import Path

from pinset.sim.modes import ApplyMode
from pinset.sim.unions import UnionHunk
from pinset.store import atomic_write, read_checked, write_checked

MEMO_FORMAT = "apply-memo-2"   # a change of what a key covers or an answer holds: new names (2: am's whole fake ancestor)
BUILD_FORMAT = "build-memo-1"  # the same for a whole build's result
_INDEX_LINE_RE = re.compile(rb"^index ([0-9a-f]{4,64})\.\.([0-9a-f]{4,64})", re.M)
_LOOSE_RE = re.compile(r"^[0-9a-f]{38}$")
_OID_RE = re.compile(r"^[0-9a-f]{40}$")
_MODES = (0o100644, 0o100755, 0o120000, 0o160000)   # the modes of an index entry git writes

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
    the patch files' paths (`names`: a failure's message names the patch, git's words its file), and the
    engine that answers (code_digest: an answer of another pinset is never this one's)."""
    digest = hashlib.sha256()
    for part in (MEMO_FORMAT, code_digest(), git, "how" if how else "plain", *extra, "names", *names):
        digest.update(part.encode(errors="surrogateescape") + b"\0")
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


# The fields of an Answer's outcome and their types (engine._remember writes them, engine._outcome_of reads them).
# The shape of a stored ApplyOutcome (engine._remember writes it, _outcome_of reads it back): its fields but `ok`
# (the Answer's) and `patch_text` (read again from the patch), `failed_patch` in its place. A field the engine
# adds must be here too, or every stored answer is a miss (tests/sim/test_memo_engine_identity.py checks).
OUTCOME_FIELDS: dict[str, typing.Any] = {
    "conflict_files": list[str], "message": str, "hunk": list[str], "hunk_path": typing.Optional[str],
    "failed_patch": typing.Optional[int], "mode": typing.Optional[ApplyMode],
    "resolutions": list[str], "note": typing.Optional[str], "replaced": dict[str, list[str]],
    "renamed": dict[str, str], "merge_failed": bool, "unions": list[UnionHunk]}


def fits(value: object, hint: typing.Any, names: dict[str, typing.Any] | None = None) -> bool:
    """Whether JSON `value` is of type `hint` as this code writes it: str, int, float, bool, None, Literal,
    unions, list[...], dict[str, ...], set[...] / tuple[...] (a JSON list), and dataclasses (an object with
    exactly their fields, those without a default present; `names` resolves the names their hints use)."""
    if hint is typing.Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, a, names) for a in args)
    if origin in (list, set, frozenset) or (origin is tuple and args[-1:] == (Ellipsis,)):
        return isinstance(value, list) and all(fits(v, args[0], names) for v in value) if args else isinstance(value, list)
    if origin is tuple:
        return isinstance(value, list) and len(value) == len(args) and all(fits(v, a, names) for v, a in zip(value, args))
    if origin is dict:
        return isinstance(value, dict) and all(fits(k, args[0], names) and fits(v, args[1], names)
                                               for k, v in value.items())
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            return False
        hints = typing.get_type_hints(hint, localns=names)
        fields = {f.name: f for f in dataclasses.fields(hint)}
        if set(value) - set(fields):
            return False
        for name, f in fields.items():
            if name not in value:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    return False
            elif not fits(value[name], hints[name], names):
                return False
        return True
    return False


def is_oid(value: object) -> bool:
    """A full (SHA-1) object id as git writes it."""
    return isinstance(value, str) and _OID_RE.match(value) is not None


def _answer_of(raw: object) -> "Answer | None":
    """An Answer from its stored JSON, or None when it is not of the shape put() writes."""
    if not (isinstance(raw, dict) and set(raw) == {"ok", "outcome", "changes", "objects"}
            and isinstance(raw["ok"], bool) and isinstance(raw["outcome"], dict)
            and set(raw["outcome"]) == set(OUTCOME_FIELDS)
            and all(fits(raw["outcome"][k], hint) for k, hint in OUTCOME_FIELDS.items())
            and isinstance(raw["changes"], dict) and isinstance(raw["objects"], list)
            and all(is_oid(o) for o in raw["objects"])):
        return None
    changes: dict[str, Entry | None] = {}
    for path, entry in raw["changes"].items():
        if entry is None:
            changes[path] = None
        elif isinstance(entry, list) and len(entry) == 2 and entry[0] in _MODES and is_oid(entry[1]) \
                and not isinstance(entry[0], bool):
            changes[path] = (int(entry[0]), str(entry[1]))
        else:
            return None
    if raw["outcome"]["failed_patch"] is not None and raw["outcome"]["failed_patch"] < 0:
        return None
    return Answer(raw["ok"], dict(raw["outcome"]), changes, list(raw["objects"]))


def object_reads(path: Path, oid: str) -> bool:
    """Whether the loose object file `path` is object `oid` whole: zlib that inflates to a `blob <size>`
    header and that many bytes, whose SHA-1 is the id."""
    try:
        data = zlib.decompress(path.read_bytes())
    except (OSError, zlib.error):
        return False
    head, sep, body = data.partition(b"\0")
    kind, _, size = head.partition(b" ")
    return bool(sep) and kind == b"blob" and size == str(len(body)).encode() \
        and hashlib.sha1(data).hexdigest() == oid


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
        self._checked: dict[str, bool] = {}  # memo/'s objects read this run: whole or not (_sound)
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
            answer = _answer_of(json.loads(data))
        except (ValueError, RecursionError):
            return None
        if answer is None or not all(self._object(oid).is_file() for oid in answer.objects):
            return None
        return answer

    def _sound(self, oid: str) -> bool:
        """memo/'s object `oid` reads whole (checked once per run); one that does not is removed (git makes it
        again: put() writes it anew), so damage under memo/ heals and never reaches git as the mirror's."""
        if oid in self._checked:
            return self._checked[oid]
        path = self._object(oid)
        good = object_reads(path, oid)
        if not good:
            try:
                path.unlink()
            except OSError:
                pass
        self._checked[oid] = good
        return good

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
                if not target.is_file() or not self._sound(oid):
                    atomic_write(target, written[oid].read_bytes())
                    self._checked.pop(oid, None)
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
            sources = ([self._object(oid)] if self.root is not None and self._sound(oid) else []) + \
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
    """sha256 of pinset's own source (every .py of the package, by path): every answer the memo keeps (an
    apply's, a build's, the moved-code index) is a function of the code that made it, so any change of pinset
    is a new key (read once per run, about 10 ms). The engine's identity: no version to remember to bump."""
    return package_digest(Path(__file__).resolve().parent.parent)


def package_digest(package: Path) -> str:
    """code_digest of the package folder `package` (its .py files by relative path and content)."""
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
                except (ValueError, RecursionError):
                    found = None
                if not (isinstance(found, dict) and ((set(found) == {"asks_upstream"} and found["asks_upstream"] is True) or (
                        set(found) == {"result", "needs"} and isinstance(found["result"], dict)
                        and isinstance(found["needs"], list) and all(is_oid(o) for o in found["needs"])))):
                    found = None   # (the result's own shape: the engine checks it against BuildResult)
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
