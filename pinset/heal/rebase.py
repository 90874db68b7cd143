"""The state of a `pinset rebase` between its steps, and the ledger entries it records.

The state lives in the worktree's own git folder (`pinset-rebase.json` beside git am's `rebase-apply/`):
the pin, the build, the commit the series starts on, the series' file names, and for every stop of
`git am -3` the three blobs of each conflicted file (base, ours: the build with the earlier pins,
theirs: the pin's), kept because `git add` of the resolution drops them from the index.

At `--continue` each resolved file gives two resolutions (one ledger file per file and stop):
- yours: the series as it was, on this build: conflict(ours | theirs) -> your resolution;
- the way back: the rebased series on the file as the old series found it (its base blob), which is
  how it meets the older builds of the grid: conflict(base | your resolution) -> theirs, the series'
  old lines there. So one fix serves every build: older builds keep the tree they had.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pinset.config import ledger
from pinset.errors import PinsetError

STATE = "pinset-rebase.json"


@dataclass
class Stop:
    patch: str                                  # the series file git am stopped at
    files: dict[str, list[str]] = field(default_factory=dict)   # path -> [base, ours, theirs] blob ids


@dataclass
class State:
    pin: str
    build: str
    build_oid: str
    config: str
    start: str                                  # the commit the series starts on
    names: list[str]
    stops: list[Stop] = field(default_factory=list)
    recorded: dict[str, str] = field(default_factory=dict)   # ledger file name -> text
    # the upstream commit a `base-commit:` may name (pinset.heal.style.upstream_commit), or why none; a state
    # written before these fields were: both "", the build commit then checked at --continue
    upstream: str = ""
    upstream_why: str = ""

    def save(self, git_dir: Path) -> None:
        (git_dir / STATE).write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, git_dir: Path) -> State | None:
        path = git_dir / STATE
        if not path.is_file():
            return None
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            raw["stops"] = [Stop(**s) for s in raw.get("stops", [])]
            state = cls(**raw)
            if not (isinstance(state.pin, str) and isinstance(state.names, list) and isinstance(state.recorded, dict)
                    and all(isinstance(n, str) for n in state.names) and isinstance(state.start, str)
                    and isinstance(state.build_oid, str) and isinstance(state.config, str)
                    and isinstance(state.upstream, str) and isinstance(state.upstream_why, str)
                    and all(isinstance(s.files, dict) for s in state.stops)):
                raise TypeError("a field of the wrong type")
        except (OSError, UnicodeDecodeError, ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
            raise PinsetError(f"{path}: damaged `pinset rebase` state ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                              f"nothing changed: --abort removes the worktree; then start again with --onto") from None
        return state


def unmerged(tree) -> dict[str, dict[int, str]]:
    """Path -> stage -> blob id of the worktree index's conflicted entries."""
    out: dict[str, dict[int, str]] = {}
    for entry in tree.git_ok("ls-files", "-u", "-z").split("\0"):
        if entry:
            info, path = entry.split("\t", 1)
            _, oid, stage = info.split()
            out.setdefault(path, {})[int(stage)] = oid
    return out


def current_patch(tree, names: list[str]) -> str:
    """The series file git am stopped at (rebase-apply/next, 1-based)."""
    try:
        n = int((tree.git_dir() / "rebase-apply" / "next").read_text().strip())
    except (OSError, ValueError):
        return "?"
    return names[n - 1] if 0 < n <= len(names) else f"patch {n}"


def has_markers(text: str) -> bool:
    """A staged resolution still holding a conflict marker of any style git writes (ledger.MARKER_RE)."""
    return any(ledger.MARKER_RE.fullmatch(line) for line in text.split("\n"))


def blob(tree, oid: str) -> bytes:
    result = tree.git("cat-file", "blob", oid)
    return result.stdout.encode("utf-8", "surrogateescape")


def record_stop(tree, state: State, stop: Stop, folder: Path, scratch: Path) -> list[str]:
    """Ledger texts for one resolved stop; returns notes for files whose resolution could not be recorded."""
    notes = []
    for n, (path, (base, ours, theirs)) in enumerate(sorted(stop.files.items())):
        resolved_oid = tree.git_ok("rev-parse", f":{path}").strip()
        b, o, t, r = (blob(tree, x) for x in (base, ours, theirs, resolved_oid))
        res = ledger.Resolution("", path)
        mine = ledger.record(path, ledger.merge_marked(o, b, t, scratch / f"m{n}a"), r.decode("utf-8", "replace"))
        back_marked = ledger.merge_marked(b, o, r, scratch / f"m{n}b")
        back = ledger.record(path, back_marked, t.decode("utf-8", "replace")) \
            if ledger.split_conflicts(back_marked) != [back_marked.split("\n")] else None
        if mine is None:
            notes.append(f"{path}: changed outside its conflict hunks too: that part is in the series, not in the ledger")
        for part in (mine, back):
            res.hunks.update(part or {})
        if not res.hunks:
            continue
        taken = set(state.recorded) | {p.name for p in ledger.resolution_files(folder)}
        number = max([int(x[:4]) for x in taken if x[:4].isdigit()], default=0) + 1
        name = f"{number:04d}-{ledger.slug(path)}.txt"
        state.recorded[name] = ledger.render(res, (
            f"pinset resolution ledger (docs/heal.md): recorded by `pinset rebase {state.pin} --onto {state.build}`\n"
            f"at {stop.patch}, build commit {state.build_oid[:12]}. Each hunk: where {path}'s conflict reads as\n"
            f"the build/pin lines below, sim/apply/verify use the resolved lines. Yours (this build) and the way\n"
            f"back (the rebased series on the file as the old series found it: its old lines)."))
    return notes


def start_rebase(sim, where, build, pinset, result, spec):
    """A worktree at `build` with the earlier pins replayed as commits and the pin's series under `git am -3`:
    (worktree, its State, am's result). Any failure on the way removes the worktree again."""
    from pinset.heal.style import upstream_commit
    from pinset.heal.worktree import Worktree, replay

    try:
        tree = Worktree.add(sim.mirror, where, build.oid)
    except BaseException:   # Ctrl-C during the checkout: `where` did not exist before, so it goes
        if where.exists():
            Worktree(sim.mirror, where).remove()
        raise
    try:
        replay(tree, pinset, sim.prepared, result, until=spec.id)
        upstream, why = upstream_commit(sim.mirror, build)
        state = State(spec.id, build.name, build.oid, str(pinset.path), tree.head(),
                      [p.name for p in spec.patch_files()], upstream=upstream or "", upstream_why=why)
        prepared = sim.prepared.get(spec.id)
        # the patches as the sim read them (pinset.sim.pins.as_git_am_reads), so am meets what the sim met
        patches = prepared.change.patches if prepared is not None and prepared.change is not None else spec.patch_files()
        applied = tree.am(patches, keep_cr=True)
    except BaseException:
        tree.remove()
        raise
    return tree, state, applied
