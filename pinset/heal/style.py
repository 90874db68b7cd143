"""Writing a series back in the queue's own style: the one writer of `refresh --write`, `rebase --continue`, `bump`.

A queue is the user's file set, kept in git, reviewed as diffs. How it was exported is read from its own files
(`detect`): the `From <sha>` line (a real commit or `--zero-commit`'s zeros), the signature (`-- ` and git's
version, a text of the user's, or `--no-signature`), the subject's prefix and numbering (`[PATCH 03/36]`,
`[PATCH]`, `--subject-prefix`), a `base-commit:` block or none, a diffstat or none, the index lines' abbreviation
and the diff's context lines. The series is exported with those options and then each mail is put together from
what must change and what need not (`merge_mail`):

- a mail whose diff is the old one (hunks, context and line numbers; the `index` lines' blob ids aside) and whose
  `base-commit:` block is unchanged keeps its old bytes: one moved hunk in a 36-patch queue changes one file;
- else its diff (and diffstat) is the new one; its header and message stay the old text when git reads them as
  the same (only the From line's commit and the subject's `[...]` may differ), the signature stays the old text
  (never this machine's git version), the From line stays zeros where it was zeros;
- `base-commit:` is written only where the queue had one, and only naming a commit of upstream's history (the
  build's upstream commit: for an sdist build its CHANGELOG's commit, resolved in full against the upstream
  history the mirror holds); never pinset's mirror commit of an sdist tree. Where no such commit is known the
  block is left out and a note says so.

File names are the queue's (one file per commit, or one mbox holding several: `patches: x.patch`). Pure text
functions over str read with surrogateescape, so any bytes round-trip.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

_MAGIC_RE = re.compile(r"^From ([0-9a-f]{40}) Mon Sep 17 00:00:00 2001$", re.M)
ZERO = "0" * 40
_HUNK_RE = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_INDEX_RE = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)", re.M)
_STAT_RE = re.compile(r"^ \d+ files? changed", re.M)
_NUMBERED_RE = re.compile(r"^\[([^\]]*?)\s*\b(\d+)/(\d+)\]")
_PREFIX_RE = re.compile(r"^\[([^\]]*)\]")
_BASE_LINE_RE = re.compile(r"^(?:base-commit|prerequisite-patch-id): ")
# the lines a diff section may hold outside its hunks (git's own headers)
_DIFF_HEADER = ("diff --git ", "index ", "--- ", "+++ ", "old mode ", "new mode ", "deleted file mode ",
                "new file mode ", "similarity index ", "dissimilarity index ", "rename from ", "rename to ",
                "copy from ", "copy to ", "Binary files ", "\\")


def read_text(path: Path) -> str:
    return Path(path).read_bytes().decode("utf-8", "surrogateescape")


def write_text(path: Path, text: str) -> None:
    Path(path).write_bytes(text.encode("utf-8", "surrogateescape"))


@dataclass
class Mail:
    """One format-patch mail, cut in the parts a refresh may change independently."""

    text: str
    sha: str | None     # the From line's commit (ZERO: --zero-commit; None: no such line)
    head: str           # the headers and message, up to the `---` line (or the diff)
    between: str        # the `---` line and the diffstat, up to the first `diff --git`
    diff: str           # the diff: every file section, to the end of the last hunk
    tail: str           # what follows: a `base-commit:` block, the signature, blank lines

    @property
    def base_lines(self) -> list[str]:
        return [line for line in self.tail.split("\n") if _BASE_LINE_RE.match(line)]

    @property
    def signature(self) -> str | None:
        """The signature block as written (`-- \\n` and what follows), None when there is none."""
        at = _signature_at(self.tail)
        return None if at < 0 else self.tail[at:]


def _signature_at(tail: str) -> int:
    if tail.startswith("-- \n"):
        return 0
    at = tail.find("\n-- \n")
    return -1 if at < 0 else at + 1


def split_mails(text: str) -> list[str]:
    """The mails of a patch file (one, or an mbox of several), each from its `From <sha> Mon Sep 17` line."""
    starts = [m.start() for m in _MAGIC_RE.finditer(text)]
    if not starts:
        return [text]
    starts[0] = 0   # anything before the first mail (none in git's output) stays with it
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]


def parse_mail(text: str) -> Mail:
    magic = _MAGIC_RE.search(text)
    sha = magic.group(1) if magic else None
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    first = next((i for i, line in enumerate(lines) if line.startswith("diff --git ")), None)
    if first is None:
        return Mail(text, sha, text, "", "", "")
    blank = next((i for i, line in enumerate(lines[:first]) if line == ""), first)
    sep = next((i for i in range(blank, first) if lines[i] == "---"), first)
    end = _diff_end(lines, first)
    at = [min(offsets[i], len(text)) for i in (sep, first, end)]
    return Mail(text, sha, text[:at[0]], text[at[0]:at[1]], text[at[1]:at[2]], text[at[2]:])


def _diff_end(lines: list[str], start: int) -> int:
    """The index of the first line after the diff that starts at `start`: hunks are as long as their headers
    say (a removed line `-- ` is a line of the file), binary data runs to its blank lines."""
    i, n = start, len(lines)
    old_left = new_left = 0
    binary_blocks = 0
    while i < n:
        line = lines[i]
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
            elif tag != "\\":
                old_left = new_left = 0
                continue
            i += 1
            continue
        if binary_blocks:
            if line.startswith(("literal ", "delta ")):
                i += 1
                while i < n and lines[i] != "":
                    i += 1
                i += 1   # the blank line that ends the block
                binary_blocks -= 1
                continue
            binary_blocks = 0
        m = _HUNK_RE.match(line)
        if m:
            old_left = int(m.group(1)) if m.group(1) is not None else 1
            new_left = int(m.group(2)) if m.group(2) is not None else 1
            i += 1
            continue
        if line.startswith("GIT binary patch"):
            binary_blocks = 2
            i += 1
            continue
        if line.startswith(_DIFF_HEADER):
            i += 1
            continue
        break
    return min(i, n)


def _same_diff(a: str, b: str) -> bool:
    """The same diff but for the `index` lines' blob ids (they name blobs of the build the series was exported
    on, and never decide how it applies)."""
    return _INDEX_RE.sub("index", a) == _INDEX_RE.sub("index", b)


def _subject_key(head: str) -> str:
    """The head with the From line's commit and the subject's leading `[...]` groups left out: what git am
    reads the same."""
    head = _MAGIC_RE.sub("From", head, count=1)
    lines = head.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("Subject: "):
            value = line[len("Subject: "):]
            while i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t"):
                i += 1
                value += " " + lines[i].strip()
            while True:
                m = _PREFIX_RE.match(value)
                if not m:
                    break
                value = value[m.end():].lstrip()
            out.append("Subject: " + value)
        else:
            out.append(line)
        i += 1
    return "\n".join(out)


def subject(head: str) -> str | None:
    lines = head.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("Subject: "):
            value = line[len("Subject: "):]
            for more in lines[i + 1:]:
                if more[:1] not in (" ", "\t"):
                    break
                value += " " + more.strip()
            return value
    return None


@dataclass(frozen=True)
class Style:
    """How a queue was exported, as its files show it."""

    zero_commit: bool = False
    numbered: bool | None = None          # None: git's auto (numbered when several)
    prefix: str = "PATCH"
    signature: str | None = None          # the block as written ("-- \n2.43.0\n\n"); None: --no-signature
    base: bool = False                    # a `base-commit:` block
    stat: bool = True
    abbrev: int | None = None             # index lines' id length (40: --full-index)
    context: int | None = None            # -U (None: git's 3)
    base_slot: int = 0                    # the mail that holds the base block

    def format_args(self) -> list[str]:
        args = ["--no-signature", f"--subject-prefix={self.prefix}"]
        if self.numbered is True:
            args.append("--numbered")
        elif self.numbered is False:
            args.append("--no-numbered")
        if not self.stat:
            args.append("--no-stat")
        if self.abbrev == 40:
            args.append("--full-index")
        elif self.abbrev:
            args.append(f"--abbrev={self.abbrev}")
        if self.context is not None and self.context != 3:
            args.append(f"-U{self.context}")
        return args


DEFAULT = Style(signature=None)


def detect(mails: list[Mail]) -> Style:
    """The queue's style, by majority over its mails (a tie: the style that writes less)."""
    if not mails:
        return DEFAULT
    zeros = sum(m.sha == ZERO for m in mails)
    real = sum(m.sha not in (None, ZERO) for m in mails)
    signatures = Counter(m.signature for m in mails)
    signature = max(signatures.items(), key=lambda kv: (kv[1], kv[0] is None))[0]
    prefixes: Counter[str] = Counter()
    numbered = 0
    for m in mails:
        value = subject(m.head) or ""
        hit = _NUMBERED_RE.match(value)
        if hit:
            numbered += 1
            prefixes[hit.group(1).strip()] += 1
            continue
        hit = _PREFIX_RE.match(value)
        prefixes[hit.group(1).strip() if hit else ""] += 1
    prefix = prefixes.most_common(1)[0][0]
    with_diff = [m for m in mails if m.diff]
    stat = not with_diff or any(_STAT_RE.search(m.between) for m in with_diff)
    lengths = Counter(len(x) for m in mails for pair in _INDEX_RE.findall(m.diff) for x in pair)
    abbrev = lengths.most_common(1)[0][0] if lengths else None
    base_slot = next((i for i, m in enumerate(mails) if m.base_lines), 0)
    return Style(zero_commit=zeros >= real and zeros > 0, numbered=True if numbered else (False if len(mails) > 1 else None),
                 prefix=prefix, signature=signature, base=any(m.base_lines for m in mails), stat=stat,
                 abbrev=abbrev, context=_context(mails), base_slot=base_slot)


def _context(mails: list[Mail]) -> int | None:
    """The most context lines any hunk of the queue opens or closes with (-U); None when no hunk shows it."""
    most = None
    for m in mails:
        for hunk in re.split(r"^(?=@@ )", m.diff, flags=re.M)[1:]:
            body = [line for line in hunk.split("\n")[1:] if line[:1] in (" ", "+", "-")]
            changed = [i for i, line in enumerate(body) if line[:1] in ("+", "-")]
            if not changed:
                continue
            lead, trail = changed[0], len(body) - 1 - changed[-1]
            most = max(most or 0, lead, trail)
    return most


def with_base(tail: str, base_lines: list[str]) -> str:
    """`tail` with its base block made `base_lines` (added after the diff's blank line, or removed with it)."""
    lines = tail.split("\n")
    at = [i for i, line in enumerate(lines) if _BASE_LINE_RE.match(line)]
    if at:
        start, stop = at[0], at[-1] + 1
        if base_lines:
            return "\n".join(lines[:start] + base_lines + lines[stop:])
        if start > 0 and lines[start - 1] == "":
            start -= 1
        return "\n".join(lines[:start] + lines[stop:])
    if not base_lines:
        return tail
    return "\n" + "\n".join(base_lines) + "\n" + tail


def _with_signature(tail: str, signature: str | None) -> str:
    at = _signature_at(tail)
    kept = tail if at < 0 else tail[:at]
    return kept + (signature or "")


def _with_sha(head: str, sha: str | None) -> str:
    if sha is None:
        return head
    return _MAGIC_RE.sub(f"From {sha} Mon Sep 17 00:00:00 2001", head, count=1)


def merge_mail(old: Mail | None, new: Mail, style: Style, base_lines: list[str]) -> str:
    """The mail to write for one commit: `old` (the queue's mail of that commit; None: it has none) where
    nothing that must change changed, else `new` (git's export in the queue's style) in the old mail's own
    signature, From line and header."""
    if old is not None and old.diff and _same_diff(old.diff, new.diff) and old.base_lines == base_lines:
        return old.text
    if old is None:
        tail = _with_signature(with_base("", base_lines), style.signature)
        return _with_sha(new.head, ZERO if style.zero_commit else new.sha) + new.between + new.diff + tail
    # a real From line names the commit as exported now (format-patch's own); zeros stay zeros
    sha = old.sha if old.sha in (None, ZERO) else new.sha
    head = _with_sha(old.head if _subject_key(old.head) == _subject_key(new.head) else new.head, sha)
    if not old.diff:
        return head + new.between + new.diff + _with_signature(with_base("", base_lines), old.signature)
    between, diff = (old.between, old.diff) if _same_diff(old.diff, new.diff) else (new.between, new.diff)
    return head + between + diff + with_base(old.tail, base_lines)


def restyle(old_files: list[Path], new_texts: list[str], names: list[str], made_names: list[str],
            base_lines: list[str], out: Path, style: Style) -> list[Path]:
    """The files to write into `out`: the old files' layout (names, mails per file) when the commit count is
    the same; else one file per commit (`new_texts`, git's export in order), under `names` when they match in
    number, else under git's names (`made_names`)."""
    old_mails = [(k, parse_mail(text)) for k, path in enumerate(old_files) for text in split_mails(read_text(path))]
    new_mails = [parse_mail(text) for text in new_texts]
    slots = len(new_mails)
    base_at = style.base_slot if style.base_slot < slots else 0
    bases = [base_lines if i == base_at else [] for i in range(slots)]
    out.mkdir(parents=True, exist_ok=True)
    if old_mails and len(old_mails) == slots:
        texts: dict[int, list[str]] = {}
        for i, ((k, old), new) in enumerate(zip(old_mails, new_mails)):
            texts.setdefault(k, []).append(merge_mail(old, new, style, bases[i]))
        files = []
        for k, path in enumerate(old_files):
            target = out / path.name
            write_text(target, "".join(texts.get(k, [])))
            files.append(target)
        return files
    mails = [merge_mail(None, new, style, bases[i]) for i, new in enumerate(new_mails)]
    chosen = names if len(names) == slots else made_names
    files = []
    for i, text in enumerate(mails):
        target = out / chosen[i]
        write_text(target, text)
        files.append(target)
    return files


def upstream_commit(mirror, build) -> tuple[str | None, str]:
    """The commit of upstream's history a `base-commit:` may name for `build`, and why none when None. A git
    build is an upstream commit; an sdist build's tree is pinset's mirror commit, so its CHANGELOG's commit,
    resolved in full against the upstream history the mirror holds (fetched tags, branches, refs)."""
    if getattr(build, "source", "git") == "git":
        return build.oid, ""
    named = getattr(build, "commit", "") or ""
    if not re.fullmatch(r"[0-9a-f]{7,40}", named):
        return None, f"{build.name} names no upstream commit"
    found = mirror.git("rev-parse", "--verify", "-q", f"{named}^{{commit}}", check_damage=False)
    full = found.stdout.strip() if found.ok else ""
    if not re.fullmatch(r"[0-9a-f]{40}", full):
        return None, (f"the upstream commit {named} of {build.name} is not in the cache's upstream history "
                      "(pins.yaml's `upstream:` fetched)")
    if not in_upstream(mirror, full):
        return None, (f"the upstream commit {named} of {build.name} is not in the cache's upstream history "
                      "(pins.yaml's `upstream:` fetched)")
    return full, ""


def in_upstream(mirror, commit: str) -> bool:
    """Whether a ref the mirror keeps of upstream (its fetched tags and branches, its refs) contains `commit`."""
    inside = mirror.git("for-each-ref", f"--contains={commit}", "--count=1", "--format=%(refname)",
                        "refs/pinset/upstream/", "refs/pinset/upstream-refs/", check_damage=False)
    return inside.ok and bool(inside.stdout.strip())


def fix_base(base_lines: list[str], written: str, upstream: str | None) -> list[str]:
    """git's base block (`--base=<the worktree's build commit>`) naming `upstream` instead; none without it."""
    if upstream is None or not base_lines:
        return []
    return [f"base-commit: {upstream}" if line == f"base-commit: {written}" else line for line in base_lines]


def git_names(listing: str, out: Path) -> list[Path]:
    files = [Path(line) for line in listing.splitlines() if line.strip()]
    return files or sorted(Path(out).glob("*.patch"))


__all__ = ["Mail", "Style", "detect", "merge_mail", "parse_mail", "restyle", "split_mails", "upstream_commit",
           "fix_base"]
