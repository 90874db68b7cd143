"""What a pin changes, read from its patches: files, added lines, new files, feature symbols.

Pure functions over patch text, so the contract and retirement logic can be tested without git.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

from pinset.sim.diffs import DiffError, FileDiff, read_diffs

# Symbols whose appearance in a file marks a feature (a type, an op, an architecture...).
FEATURE_SYMBOL_RE = re.compile(
    r"\b(?:GGML_TYPE|GGML_OP|GGML_UNARY_OP|GGML_GLU_OP|GGML_FTYPE|LLM_ARCH|LLM_TENSOR|LLM_KV|"
    r"LLAMA_FTYPE|LLAMA_VOCAB_PRE_TYPE|LLAMA_ROPE_TYPE|MMQ_TYPE|GGML_CUDA_MMQ)_[A-Z0-9_]+\b"
)
_TRIVIAL_LINES = {"break;", "return;", "continue;", "else", "else {", "} else {", "default:", "#else",
                  "#endif", "});", "};", "},", "{", "}", "(", ")", ");", "]", "],", "[", "do {", "} while (0)"}


def is_substantive(line: str) -> bool:
    """A line that carries meaning: not blank, not lone punctuation/keywords, not a comment."""
    s = line.strip()
    if not s or s in _TRIVIAL_LINES or not re.search(r"[A-Za-z0-9]", s):
        return False
    if s.startswith(("//", "/*", "* ", "*/")) or s == "*":
        return False
    return len(s) >= 4


@dataclass
class FileChange:
    path: str
    added: list[str] = field(default_factory=list)     # stripped substantive added lines
    removed: list[str] = field(default_factory=list)   # stripped substantive removed lines
    new_file: bool = False
    deleted: bool = False
    symbols: set[str] = field(default_factory=set)     # feature symbols on added lines
    # Lower bound of each substantive line's copies in the file before the pin (its context and
    # removed lines): copies the file already had are no evidence that the pin's own landed.
    preimage: Counter[str] = field(default_factory=Counter)
    # Each hunk as the pin leaves the file: its non-blank lines (stripped) with whether the pin added them;
    # where the pin puts its lines (placed_lines, whole_runs).
    hunks: list[list[tuple[str, bool]]] = field(default_factory=list)

    def net_added(self) -> Counter:
        """Substantive lines the pin adds beyond those it removes (line -> count)."""
        net = Counter(self.added)
        net.subtract(Counter(self.removed))
        return Counter({line: n for line, n in net.items() if n > 0})


@dataclass
class PinChange:
    """The net change of one pin (a whole patch series or one PR diff)."""

    patches: list[Path]                   # files to `git apply`, in order
    files: dict[str, FileChange]
    touched: frozenset[str] | None = None  # every path the patches name (renames' sources too); None: unknown

    @property
    def paths(self) -> list[str]:
        return sorted(self.files)


def touched_paths(texts: list[str]) -> frozenset[str] | None:
    """Every path the patches read or write (renames' sources too); None when a file name cannot be read."""
    try:
        return frozenset(name for text in texts for diff in read_diffs(text) for name in diff.names)
    except DiffError:
        return None


def parse_patch(text: str) -> dict[str, FileChange]:
    """Per-file added/removed lines of a unified git diff (format-patch or `git diff`), file names read
    with git's quoting rules (pinset/sim/diffs.py). Raises DiffError when a file name cannot be read."""
    return file_changes(read_diffs(text))


def file_changes(diffs: list[FileDiff]) -> dict[str, FileChange]:
    """Per-file added/removed lines of the sections `read_diffs` read from one patch."""
    files: dict[str, FileChange] = {}
    for diff in diffs:
        current = files.setdefault(diff.path, FileChange(diff.path))
        # in the patch's order: a file deleted, then created anew (git applies both) is a file the pin makes
        current.new_file = diff.new_file or (current.new_file and not diff.deleted)
        current.deleted = diff.deleted or (current.deleted and not diff.new_file)
        for hunk in diff.hunks:
            after = [(raw[1:].strip(), raw[0] == "+") for raw in hunk.lines
                     if raw[:1] in ("+", " ") and raw[1:].strip()]
            if any(added for _, added in after):
                current.hunks.append(after)
            for raw in hunk.lines:
                body = raw[1:]
                if not is_substantive(body):
                    continue
                if raw[0] == "+":
                    current.added.append(body.strip())
                    current.symbols.update(FEATURE_SYMBOL_RE.findall(body))
                elif raw[0] == "-":
                    current.removed.append(body.strip())
                    current.preimage[body.strip()] += 1
                elif raw[0] == " ":
                    current.preimage[body.strip()] += 1
    return files


def combine(series: list[dict[str, FileChange]]) -> dict[str, FileChange]:
    """Net effect of consecutive patches: a line added then removed later is not part of the pin."""
    net: dict[str, FileChange] = {}
    for patch in series:
        for path, change in patch.items():
            acc = net.get(path)
            if acc is None:
                acc = net[path] = FileChange(path, new_file=change.new_file)
            # This patch's preimage is the original file plus what the earlier patches added.
            earlier = Counter(acc.added)
            for line, n in change.preimage.items():
                if n - earlier[line] > acc.preimage.get(line, 0):
                    acc.preimage[line] = n - earlier[line]
            for line in change.removed:
                if line in acc.added:
                    acc.added.remove(line)
                else:
                    acc.removed.append(line)
            acc.added.extend(change.added)
            acc.hunks.extend(change.hunks)
            acc.deleted = change.deleted
            acc.new_file = acc.new_file and not change.deleted
            acc.symbols = set(FEATURE_SYMBOL_RE.findall("\n".join(acc.added)))
    return net


def patch_text(data: bytes) -> str:
    """Bytes as text that keeps every byte (surrogateescape): a pin's lines and a tree's compare as bytes,
    never as decoded text (two ISO-8859-1 lines are not one U+FFFD line)."""
    return data.decode("utf-8", "surrogateescape")


def line_counts(text: str | None) -> dict[str, int]:
    """Copies of each stripped line; only a newline ends a line, as in read_diffs (a form feed, a lone CR or
    U+0085 inside a line is part of it)."""
    counts: dict[str, int] = {}
    if text:
        for line in text.split("\n"):
            s = line.strip()
            if s:
                counts[s] = counts.get(s, 0) + 1
    return counts


def _lines(text: str | None) -> list[str]:
    """The non-blank lines of a file, stripped (as hunks keeps a pin's)."""
    return [s for s in (line.strip() for line in (text or "").split("\n")) if s]


def placed_lines(fc: FileChange, text: str | None) -> Counter[str]:
    """The pin's added substantive lines that `text` (the file in a build) holds where the pin puts them:
    in a run of lines that matches the hunk as the pin leaves it and takes in at least one of the hunk's own
    context lines (any run for a file the pin creates: the file is the place). A line the build has only
    elsewhere (another switch with the same labels, another function) is no sign the pin landed.

    The runs are difflib's matching blocks of hunk and file, so a line upstream changed inside the hunk
    costs that line only, as the count of present lines did before."""
    placed: Counter[str] = Counter()
    lines = _lines(text)
    if not lines:
        return placed
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(lines)
    for hunk in fc.hunks:
        matcher.set_seq1([line for line, _ in hunk])
        for start, _, size in matcher.get_matching_blocks():
            block = hunk[start:start + size]
            if fc.new_file or any(not added for _, added in block):
                placed.update(line for line, added in block if added and is_substantive(line))
    return placed


WHOLE_RUN = 3   # moved code: an added run counts where at least this many of its lines (or all) are found together


def whole_runs(fc: FileChange, text: str | None) -> Counter[str]:
    """The pin's added substantive lines that `text` (any file of a build) holds as the pin writes them,
    together: each hunk's lines from its first added line to its last, matched against the file, counting
    only runs of WHOLE_RUN lines or more (or the whole span where it is shorter). Lines scattered over a
    file (one per function, say) are no moved copy of the pin's change."""
    found: Counter[str] = Counter()
    lines = _lines(text)
    if not lines:
        return found
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(lines)
    for hunk in fc.hunks:
        marks = [i for i, (_, added) in enumerate(hunk) if added]
        span = hunk[marks[0]:marks[-1] + 1]
        matcher.set_seq1([line for line, _ in span])
        for start, _, size in matcher.get_matching_blocks():
            if size >= min(WHOLE_RUN, len(span)):
                found.update(line for line, added in span[start:start + size] if added and is_substantive(line))
    return found


_BASE_COMMIT_RE = re.compile(r"^base-commit: ([0-9a-f]{40})\s*$", re.M)


def series_base(texts: list[str]) -> str | None:
    """The `base-commit:` a series names (`git format-patch --base`); None when absent or ambiguous."""
    bases = {m.group(1) for text in texts for m in _BASE_COMMIT_RE.finditer(text)}
    return bases.pop() if len(bases) == 1 else None


# Retirement across moved code: a pin's added lines found anywhere in the build tree (renames, splits).
BOILERPLATE_FILES = 3      # a line present in this many files of the build or more is boilerplate
                           # (a pin's own line that landed is in one file, two when upstream split it)
MIN_DISTINCTIVE = 3        # fewer distinctive lines than this: too little to recognise the pin by
MIN_DISTINCTIVE_SHARE = 0.5  # ...or less than half of its lines: a pin made of boilerplate is never retired


@dataclass
class MovedMatch:
    """Where a pin's distinctive added lines are in a build, wherever the files are now."""

    total: int              # substantive added lines of the pin (with multiplicity)
    distinctive: int        # of those, lines present in fewer than BOILERPLATE_FILES files of the build
    found: int              # distinctive lines present somewhere in the build
    where: list[tuple[str, int]]  # (path, distinctive lines found there), most first

    @property
    def fraction(self) -> float:
        return self.found / self.distinctive if self.distinctive else 0.0

    def carried(self, threshold: float) -> bool:
        return (self.distinctive >= MIN_DISTINCTIVE and self.distinctive >= MIN_DISTINCTIVE_SHARE * self.total
                and self.fraction >= threshold)

    def describe(self, limit: int = 4) -> str:
        places = ", ".join(f"{path} ({n})" for path, n in self.where[:limit])
        more = f" and {len(self.where) - limit} more files" if len(self.where) > limit else ""
        return f"{self.found} of its {self.distinctive} distinctive added lines found in {places}{more}"


def moved_match(added: dict[str, int], locations: dict[str, dict[str, int]],
                preimage: dict[str, int] | None = None,
                whole: dict[str, dict[str, int]] | None = None) -> MovedMatch:
    """Match a pin's net added lines (line -> count) against `locations` (line -> {path: count in the build}).

    `preimage` (line -> copies in the whole tree the pin was made on, or a lower bound of them):
    only copies beyond those count, so a pin is never recognised by lines that were there before it.

    A line found in BOILERPLATE_FILES files or more says nothing about this pin and is left out of
    both sides of the share; a repeated line counts as often as the pin adds it, at most as often as
    the build has it.

    `whole` (line -> {path: copies inside the pin's runs found whole there, whole_runs}): where given, only
    those copies count as found (the share's boilerplate is still decided by `locations`).
    """
    total = distinctive = found = 0
    where: dict[str, int] = {}
    for line, n in added.items():
        total += n
        places = locations.get(line, {})
        if len(places) >= BOILERPLATE_FILES:
            continue
        distinctive += n
        present = min(n, max(0, sum(places.values()) - (preimage or {}).get(line, 0)))
        if whole is not None:
            places = {path: count for path, count in whole.get(line, {}).items() if count}
            present = min(present, sum(places.values()))
        found += present
        if present:
            for path, count in places.items():
                where[path] = where.get(path, 0) + min(present, count)
    ranked = sorted(where.items(), key=lambda item: (-item[1], item[0]))
    return MovedMatch(total, distinctive, found, ranked)
