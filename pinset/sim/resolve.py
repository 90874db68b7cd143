"""Reuse of the resolution ledger inside the sim engine's in-memory applies.

After a `git apply --cached --3way` that left conflicts, the index holds the conflicted paths at
stages 1-3. For each of them the conflict hunks are made again from those three blobs (`git
merge-file`, the same way `pinset rebase` records them) and looked up in the pin's ledger; when every
hunk of every conflicted path is recorded, the resolved blobs go into the index at stage 0. Nothing
is forced: one hunk not found leaves the conflict as it was, with a note naming the resolutions that
did not match. Only pins with a ledger pay for this (a pin without one costs nothing more).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pinset.config import ledger
from pinset.config.schema import PinSpec
from pinset.errors import PinsetError


def unmerged_stages(mirror, index: Path, env: dict) -> dict[str, dict[int, tuple[str, str]]]:
    """The conflicted paths of `index` (`git ls-files -u`): path -> stage (1 base, 2 ours, 3 theirs) -> (mode,
    blob id); empty when git lists none or fails."""
    listing = mirror.git("ls-files", "-u", "-z", index=index, env=env)
    stages: dict[str, dict[int, tuple[str, str]]] = {}
    for entry in listing.stdout.split("\0"):
        if entry:
            info, path = entry.split("\t", 1)
            mode, oid, stage = info.split()
            stages.setdefault(path, {})[int(stage)] = (mode, oid)
    return stages if listing.ok else {}


@dataclass
class Resolved:
    ok: bool
    used: list[str] = field(default_factory=list)
    note: str | None = None
    replaced: dict[str, set[str]] = field(default_factory=dict)  # path -> the pin's lines a resolution replaced


class LedgerApply:
    def __init__(self, mirror) -> None:
        self.mirror = mirror
        self._ledgers: dict[str, list[ledger.Resolution]] = {}

    def ledger_of(self, spec: PinSpec) -> list[ledger.Resolution]:
        if spec.id not in self._ledgers:
            try:
                self._ledgers[spec.id] = ledger.load(spec.patches) if spec.patches is not None else []
            except (ledger.LedgerProblem, OSError, UnicodeDecodeError) as exc:
                raise PinsetError(f"pin {spec.id}: resolution ledger: {exc}") from None
        return self._ledgers[spec.id]

    def resolve(self, spec: PinSpec, index: Path, env: dict, work_tree: Path) -> Resolved:
        recorded = self.ledger_of(spec)
        if not recorded:
            return Resolved(False)
        stages = unmerged_stages(self.mirror, index, env)
        if not stages:
            return Resolved(False)
        paths = sorted(stages)
        unrecorded = [p for p in paths if not any(r.path == p for r in recorded)]
        if unrecorded or any(set(stages[p]) != {1, 2, 3} for p in paths):
            return Resolved(False, note=_note(recorded, paths))
        blobs = _read(self.mirror, [oid for p in paths for _, oid in stages[p].values()], env)
        used: list[str] = []
        replaced: dict[str, set[str]] = {}
        entries = []
        for n, path in enumerate(paths):
            (_, base), (mode, ours), (_, theirs) = (stages[path][k] for k in (1, 2, 3))
            if any(oid not in blobs for oid in (base, ours, theirs)):
                return Resolved(False, note=_note(recorded, paths))
            marked = ledger.merge_marked(blobs[ours], blobs[base], blobs[theirs], work_tree / f".merge-{n}")
            text, ids = ledger.resolve(path, marked, recorded)
            if text is None:
                return Resolved(False, note=_note(recorded, paths))
            used += [i for i in ids if i not in used]
            replaced[path] = {line for hunk in ledger.hunks_of(ledger.split_conflicts(marked)) for line in hunk.pin}
            oid = self.mirror.git_ok("hash-object", "-w", "--stdin", input=text,
                                     env=env).strip()
            entries.append(f"{stages[path][3][0]} {oid}\t{path}\0")
        self.mirror.git_ok("update-index", "-z", "--index-info", index=index, input="".join(entries), env=env)
        return Resolved(True, used, replaced=replaced)


def _note(recorded: list[ledger.Resolution], paths: list[str]) -> str:
    mine = [r.id for r in recorded if r.path in paths] or [r.id for r in recorded]
    return (f"recorded resolution{'s' if len(mine) > 1 else ''} {', '.join(mine)} "
            f"do{'es' if len(mine) == 1 else ''} not match this conflict (ignored)")


def _read(mirror, oids: list[str], env: dict) -> dict[str, bytes]:
    wanted = list(dict.fromkeys(oids))
    result = mirror.git("cat-file", "--batch", input=("\n".join(wanted) + "\n").encode(), binary=True, env=env)
    out, found, pos = result.stdout, {}, 0
    while result.ok and pos < len(out):
        eol = out.index(b"\n", pos)
        header = out[pos:eol].split()
        pos = eol + 1
        if len(header) != 3:
            continue
        size = int(header[2])
        found[header[0].decode()] = out[pos:pos + size]
        pos += size + 1
    return found
