"""Refreshed series: the same commits replayed on a build and exported again (`pinset refresh`).

The series of each chosen pin is `git am -3`'d in a worktree of the mirror at the build, after the
earlier pins, and exported again in the queue's own style (pinset/heal/style.py: its format-patch options,
its bytes where a commit's diff did not change, a `base-commit:` only where it had one and only naming an
upstream commit): messages, authors, dates and order are the series' own, only context and line numbers move. The proof is the sim's: the pin set with the
refreshed series must give, on that build, the very tree (same tree id) it gave before, with every
refreshed pin applying exactly; and each new patch must be the same commit as the old one as `git am`
reads it (author, e-mail, author date, subject and message: a sign-off or a re-encoded message is no
refresh). Anything else is an error and nothing is written.
"""

from __future__ import annotations

import dataclasses
import email.utils
from pathlib import Path

from pinset import runner
from pinset.errors import RuntimeFailure
from pinset.heal.style import upstream_commit
from pinset.heal.worktree import Worktree
from pinset.sim.changes import series_base
from pinset.sim.engine import Simulator
from pinset.sim.pins import prepare_pins


@dataclasses.dataclass
class Refreshed:
    pin_id: str
    folder: Path            # the pin's patch folder
    old: list[Path]
    new: list[Path]         # in the scratch folder
    start: str              # the commit before the series in the worktree
    end: str                # its last commit
    range_diff: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)   # what the writer could not keep (pinset.heal.style)


def with_series(pinset, replaced: dict[str, list[Path]]):
    """The pin set with some pins' series replaced by other files (in order)."""
    pins = tuple(dataclasses.replace(p, series=tuple(replaced[p.id])) if p.id in replaced else p
                 for p in pinset.pins)
    return dataclasses.replace(pinset, pins=pins)


def resimulate(sim, build, replaced: dict[str, list[Path]]):
    """The build simulated again with `replaced` series (the other pins as prepared before)."""
    changed = with_series(sim.pinset, replaced)
    only = dataclasses.replace(changed, pins=tuple(p for p in changed.pins if p.id in replaced))
    prepared = {**sim.prepared, **prepare_pins(only, None, sim.mirror)}
    return Simulator(changed, sim.mirror, prepared).simulate_build(build)


def refresh_series(sim, build, result, chosen: list[str], scratch: Path) -> list[Refreshed]:
    """Replay the pin set on `build` in a worktree, export each chosen pin's series again."""
    tree = Worktree.add(sim.mirror, scratch / "worktree", build.oid)
    upstream, why = upstream_commit(sim.mirror, build)
    out: list[Refreshed] = []
    try:
        for spec, pin in zip(sim.pinset.pins, result.pins):
            start = tree.head()
            if not pin.applied:
                continue
            tree.apply_pin(spec, sim.prepared[spec.id])
            if spec.id in chosen:
                old = spec.patch_files()
                where = scratch / "new" / str(len(out))   # (never the pin's id as a path)
                notes: list[str] = []
                new = tree.export(start, build.oid, where, old, upstream=upstream, why=why, notes=notes)
                if not spec.patches.is_dir() and len(new) != 1:
                    new = [one_file(new, where / "one" / old[0].name)]
                out.append(Refreshed(spec.id, spec.patches, old, new, start, tree.head(), notes=notes))
        for item in out:
            item.range_diff = range_diff(tree, item)
    finally:
        tree.remove()
    return out


def one_file(patches: list[Path], path: Path) -> Path:
    """A one-file pin (`patches: x.patch`) of several commits stays one file: the refreshed commits as one mbox
    (what `git format-patch --stdout` writes), so the proof simulates the very file --write puts there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(p.read_bytes() for p in patches))
    return path


def range_diff(tree: Worktree, item: Refreshed) -> str:
    """`git range-diff` of the old series (as commits on its base-commit) and the new one; a diff of
    the patch files when the old series has no base the mirror holds."""
    base = series_base([p.read_text(encoding="utf-8", errors="replace") for p in item.old])
    if base and tree.git("checkout", "-q", "--detach", base).ok:
        applied = tree.am(item.old)
        if applied.ok:
            return tree.git_ok("range-diff", "--no-color", f"{base}..HEAD", f"{item.start}..{item.end}")
        tree.git("am", "--abort")
    shown = []
    for old, new in zip(item.old, item.new):
        diff = tree.git("diff", "--no-index", "--no-color", str(old), str(new))
        shown.append(diff.stdout)
    return "".join(shown)


def prove(sim, build, result, refreshed: list[Refreshed], scratch: Path) -> None:
    """The refreshed pin set gives the same tree on `build`, every refreshed pin exactly, and every new
    series holds the same commits (same_commits)."""
    again = resimulate(sim, build, {r.pin_id: r.new for r in refreshed})
    by_id = {p.id: p for p in again.pins}
    for r in refreshed:
        pin = by_id[r.pin_id]
        if not pin.applied_exactly:
            raise RuntimeFailure(f"refresh of {r.pin_id} on {build.name}: the new series does not apply exactly "
                                 f"({pin.status_text}, {pin.apply_mode or pin.detail}); nothing written")
    if again.tree != result.tree:
        raise RuntimeFailure(f"refresh on {build.name}: the refreshed series give tree {str(again.tree)[:12]}, "
                             f"not the tree {str(result.tree)[:12]} `pinset apply` writes now; nothing written")
    for n, r in enumerate(refreshed):
        differs = same_commits(r.old, r.new, scratch / f"mail-{n}")
        if differs:
            raise RuntimeFailure(f"refresh of {r.pin_id} on {build.name}: {differs}; nothing written")


_FIELDS = ("Author", "Email", "Date", "Subject")


def same_commits(old: list[Path], new: list[Path], scratch: Path) -> str | None:
    """None when the two series are the same commits as `git am` reads them (`git mailsplit` and
    `git mailinfo`, as am runs them): author, e-mail, author date (the instant and its zone, however the
    header spells it), subject and message, in order; else what differs, in one line. A commit the old
    series gives no date is not compared on it (am gave it one)."""
    first, second = _mails(old, scratch / "old"), _mails(new, scratch / "new")
    if len(first) != len(second):
        return f"the new series has {len(second)} commits, the old one {len(first)}"
    for n, (was, now) in enumerate(zip(first, second), 1):
        for key in (*_FIELDS, "message"):
            a: object = was.get(key)
            b: object = now.get(key)
            if key == "Date":
                if a is None:
                    continue
                a, b = _instant(was[key]), _instant(now[key])
            if a != b:
                return (f"commit {n} of the series ({now.get('Subject') or was.get('Subject') or '?'}) would change "
                        f"its {key.lower()}: {_shown(a)} before, {_shown(b)} after")
    return None


def _mails(patches: list[Path], folder: Path) -> list[dict[str, str | None]]:
    folder.mkdir(parents=True, exist_ok=True)
    split = runner.run(["git", "mailsplit", "-b", f"-o{folder}", "--", *[str(p) for p in patches]], timeout=120)
    if not split.ok:
        raise RuntimeFailure(f"git mailsplit of {patches[0].parent}: {split.tail(1) or split.describe()}")
    out = []
    for mail in sorted(p for p in folder.iterdir() if p.name.isdigit()):
        info = runner.run(["git", "mailinfo", "-u", str(folder / "msg"), str(folder / "patch")],
                          input=mail.read_bytes(), binary=True, timeout=120)
        if not info.ok:
            raise RuntimeFailure(f"git mailinfo of {mail}: {info.tail(1) or info.describe()}")
        raw = info.stdout   # bytes: a binary run
        header = raw.decode(errors="surrogateescape") if isinstance(raw, bytes) else raw
        fields: dict[str, str | None] = {key: None for key in _FIELDS}
        for line in header.splitlines():
            key, sep, value = line.partition(": ")
            if sep and key in fields:
                fields[key] = value
        fields["message"] = _stripspace((folder / "msg").read_bytes().decode(errors="surrogateescape"))
        out.append(fields)
    return out


def _instant(date: str | None) -> tuple[float, object] | str | None:
    """An author date as an instant and its zone; the text itself when it cannot be read."""
    if date is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError):
        return date
    return when.timestamp(), when.utcoffset()


def _stripspace(text: str) -> str:
    """The message as a commit keeps it (`git stripspace`): no trailing blanks, no blank lines at either
    end, runs of blank lines made one."""
    lines = [line.rstrip() for line in text.split("\n")]
    kept: list[str] = []
    for line in lines:
        if line or (kept and kept[-1]):
            kept.append(line)
    while kept and not kept[-1]:
        kept.pop()
    return "\n".join(kept)


def _shown(value) -> str:
    if isinstance(value, tuple):
        return f"{value[0]:.0f} s ({value[1]})"
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."
