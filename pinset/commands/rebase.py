"""`pinset rebase`: resolve a local series' conflict on a build by hand, in a worktree the user sees.

`PIN --onto BUILD` leaves a worktree (--worktree DIR, default `<cache>/rebase/<pin set>/pinset-rebase-PIN`, outside
the user's checkout) at BUILD with the earlier pins as
commits and `git am -3` of the series stopped at the conflict; `--continue` checks the resolution,
finishes, exports the series into the pin's folder with the resolutions recorded in its ledger, runs sim
on pins.yaml's builds and removes the worktree; `--abort` removes it and changes nothing. `OWNER#N
--as-series patches/NAME` turns a PR pin into a series pin (pinset/heal/as_series.py). See docs/heal.md.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pinset.commands.common import add_config_args, open_config, pin_named, recover_beside
from pinset.commands.paths import OUTPUT_FOLDER, add_path
from pinset.commands.refresh import one_build, the_build
from pinset.config.ledger import LedgerProblem
from pinset.config.schema import load_pinset
from pinset.errors import PinsetError
from pinset.heal.rebase import STATE, State, Stop, current_patch, has_markers, record_stop, start_rebase, unmerged
from pinset.heal.series import write_folders
from pinset.heal.style import in_upstream
from pinset.heal.worktree import Worktree, check_outside_cache, safe_name
from pinset.output import console
from pinset.sim.run import simulate
from pinset.store import cache_tmp, scratch_dir
from pinset.upstream.mirror import Mirror


def add_parser(sub):
    p = sub.add_parser(
        "rebase", help="resolve a series' conflict on a build in a worktree; record the resolution",
        description="PIN --onto BUILD: a git worktree (default in the cache: CACHE/rebase/<pin set>/pinset-rebase-PIN, "
                    "named in the output) at BUILD with every earlier "
                    "pin applied as commits and the pin's series in `git am -3`, stopped at the conflict. Resolve "
                    "the markers, `git add`, then --continue: the series is exported into the pin's folder (as "
                    "refresh does: in the queue's own style), each resolution recorded in its ledger (patches/PIN/resolutions/), sim re-run "
                    "on pins.yaml's builds, the worktree removed. --abort removes the worktree, changes nothing. "
                    "A PR pin: OWNER#N --as-series patches/NAME makes it a local series pin in pins.yaml.")
    add_config_args(p, builds=False)
    p.add_argument("pin", metavar="PIN", help="the pin id")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--onto", metavar="BUILD", help="start: the build to rebase the series onto")
    what.add_argument("--continue", dest="cont", action="store_true", help="finish after resolving and staging")
    what.add_argument("--abort", action="store_true", help="remove the worktree; change nothing")
    add_path(what, "--as-series", role=OUTPUT_FOLDER, metavar="FOLDER", help="PR pin: export it into FOLDER as a series pin")
    add_path(p, "--worktree", role=OUTPUT_FOLDER, metavar="DIR", help="the worktree (default CACHE/rebase/<pin set>/pinset-rebase-PIN: outside your checkout)")
    return p


def _as_series(args) -> int:
    from pinset.heal.as_series import as_series

    pinset, store = open_config(args)
    spec = pin_named(pinset, args.pin, args.config)
    if spec.pr is None:
        raise PinsetError(f"pin {spec.id} is a series already ({spec.patches}): `pinset rebase {spec.id} --onto BUILD`")
    if args.onto or args.worktree:
        raise PinsetError("--as-series takes no --onto/--worktree: convert first, then rebase the series")
    rel = args.as_series.rstrip("/")
    recover_beside([(pinset.path.parent / rel).resolve().parent, pinset.path.parent])
    count, fork = as_series(pinset, store, spec, rel)
    console.print(f"{spec.id}: {count} patches in {rel} (base {fork[:12]}, the PR's fork point); "
                  f"{pinset.path.name} now names the folder. Next: pinset rebase {spec.id} --onto BUILD")
    return 0


def run(args) -> int:
    if args.as_series:
        return _as_series(args)
    pinset, store = open_config(args)
    spec = pin_named(pinset, args.pin, args.config)
    if spec.patches is None:
        raise PinsetError(f"pin {spec.id} is a PR pin: its commits cannot be edited; "
                          f"`pinset rebase {spec.id} --as-series patches/NAME` makes it a local series first")
    if not spec.patches.is_dir():
        # its resolutions would have no folder to go in (patches/PIN/resolutions/), found only after the user's work
        raise PinsetError(f"pin {spec.id} is one patch file ({spec.patches}), not a folder: a rebase records its "
                          f"resolutions beside the series; move the file into a folder of its own and name that")
    if args.worktree:
        where = Path(args.worktree).absolute()
        check_outside_cache(where, store.root, "--worktree")
    else:
        where = default_worktree(store.root, pinset.path, spec.id)
        old = Path(f"pinset-rebase-{safe_name(spec.id)}").absolute()   # where pinset used to put it
        if not args.onto and not where.exists() and old.is_dir() and _is_rebase_worktree(old, store.mirror):
            where = old   # a rebase an older pinset started there: go on with it (or abort it) where it is
    if args.onto:
        return _start(args, pinset, store, spec, where)
    if args.abort:
        return _abort(store, spec.id, where)
    return _continue(args, store, spec, where, _state(where, spec.id))


def default_worktree(cache: Path, pins_yaml: Path, pin_id: str) -> Path:
    """The worktree of a rebase without --worktree: in the cache, never in the user's checkout (a tree of
    llama.cpp's size, one `git add -A` away from a commit), one folder per pin set file (its resolved path's
    digest: two checkouts rebasing the same pin do not meet) and pin. Every message names it."""
    key = hashlib.sha256(str(Path(pins_yaml).resolve()).encode(errors="surrogateescape")).hexdigest()[:12]
    return Path(cache).absolute() / "rebase" / key / f"pinset-rebase-{safe_name(pin_id)}"


def _abort(store, pin_id: str, where: Path) -> int:
    """Remove the rebase worktree. Its state is needed only to go on: a damaged one is no reason to keep the
    worktree, once its git dir shows it is one of the cache mirror's `pinset rebase` worktrees."""
    said = ""
    try:
        _state(where, pin_id)
    except PinsetError:
        if not _is_rebase_worktree(where, store.mirror):
            raise
        said = " (its `pinset rebase` state was damaged)"
    with Mirror(store.mirror) as mirror:
        Worktree(mirror, where).remove()
    console.print(f"removed {where}{said}; nothing changed")
    return 0


def _is_rebase_worktree(where: Path, mirror_dir: Path) -> bool:
    """`where/.git` names a git dir under the mirror's worktrees/ that holds a `pinset rebase` state file."""
    git_file = where / ".git"
    try:
        text = git_file.read_text(errors="replace").strip() if git_file.is_file() else ""
    except OSError:
        return False
    if not text.startswith("gitdir: "):
        return False
    git_dir = Path(text[8:]).resolve()
    return git_dir.parent == (Path(mirror_dir) / "worktrees").resolve() and (git_dir / STATE).exists()


def _state(where: Path, pin_id: str) -> State:
    if not where.is_dir():
        raise PinsetError(f"no rebase of {pin_id} in progress: {where} does not exist (start one with --onto BUILD)")
    git_file = where / ".git"
    state = None
    if git_file.is_file():
        text = git_file.read_text(errors="replace").strip()
        if text.startswith("gitdir: "):
            state = State.load(Path(text[8:]))
    if state is None or state.pin != pin_id:
        raise PinsetError(f"no rebase of {pin_id} in progress in {where} (not a `pinset rebase` worktree of it)")
    return state


def _start(args, pinset, store, spec, where: Path) -> int:
    if where.exists() or where.is_symlink():
        raise PinsetError(f"--worktree {where}: already exists (a rebase in progress? `pinset rebase {spec.id} "
                          f"--continue` or `--abort`; else remove it); nothing changed")
    with simulate(pinset, one_build(pinset, args.onto, "--onto"), store) as sim:
        build, result = the_build(sim, args.onto, "--onto")
        pin = next(p for p in result.pins if p.id == spec.id)
        if not pin.conflicts:
            hint = " (`pinset refresh` makes it apply exactly)" if pin.applied_inexactly else ""
            console.print(f"{spec.id} on {build.name}: {pin.status_text}{hint}; nothing to rebase, nothing changed")
            return 0 if pin.in_tree else 1
        tree, state, applied = start_rebase(sim, where, build, pinset, result, spec)
        if applied.ok:
            console.print(f"{spec.id}: `git am -3` applies it on {build.name} after all; finishing")
            state.save(tree.git_dir())
            return _finish(store, spec, where, state, sim.mirror)
        return _stopped(tree, state)


def _stopped(tree: Worktree, state: State) -> int:
    stages = unmerged(tree)
    patch = current_patch(tree, state.names)
    state.stops.append(Stop(patch, {path: [s.get(1, ""), s.get(2, ""), s.get(3, "")] for path, s in stages.items()
                                    if set(s) == {1, 2, 3}}))
    state.save(tree.git_dir())
    files = " ".join(sorted(stages)) or "(no markers: git could not merge; apply `git am --show-current-patch=diff` by hand)"
    console.print(f"{state.pin} conflicts on {state.build} at {patch}: resolve {files} in {tree.path}", soft_wrap=True)
    console.print(f"then stage the result: git -C {tree.path} add {' '.join(sorted(stages)) or '<files>'}", soft_wrap=True)
    console.print(f"then: pinset rebase {state.pin} --continue   (or --abort: remove the worktree, change nothing)",
                  soft_wrap=True)
    return 1


def _continue(args, store, spec, where: Path, state: State) -> int:
    with Mirror(store.mirror) as mirror:
        tree = Worktree(mirror, where)
        if not (tree.git_dir() / "rebase-apply").is_dir():
            raise PinsetError(f"no `git am` in progress in {where}: --abort removes it")
        stop = state.stops[-1] if state.stops else Stop("?")
        still = sorted(unmerged(tree))
        if still:
            console.print(f"[red]not resolved yet:[/] {' '.join(still)} (resolve, `git add`, then --continue); nothing changed")
            return 1
        marked = [p for p in stop.files if has_markers(tree.git("show", f":{p}").stdout)]
        if marked:
            console.print(f"[red]conflict markers left in:[/] {' '.join(marked)} (resolve them, `git add`, "
                          f"then --continue); nothing changed")
            return 1
        unstaged = tree.git("diff", "--name-only").stdout.split()
        if unstaged:
            console.print(f"[red]changes not staged:[/] {' '.join(unstaged)} (`git add` them, or `git checkout` "
                          f"them away, then --continue); nothing changed")
            return 1
        folder = spec.patches
        with scratch_dir(cache_tmp(store.root), "rebase-") as scratch:
            try:
                notes = record_stop(tree, state, stop, folder, scratch)
            except LedgerProblem as exc:   # a marker the whole-file check let through: nothing recorded
                console.print(f"[red]conflict markers left in:[/] {exc} (`git add` the resolved text, then "
                              f"--continue); nothing changed", soft_wrap=True)
                return 1
            for note in notes:
                console.print(f"[yellow]note:[/] {note}")
        state.save(tree.git_dir())
        done = tree.git("am", "--continue", env={"GIT_EDITOR": "true"})
        if not done.ok:
            if (tree.git_dir() / "rebase-apply").is_dir() and unmerged(tree):
                return _stopped(tree, state)
            console.print(f"[red]git am --continue:[/] {done.tail(3)}")
            return 1
        return _finish(store, spec, where, state, mirror)


def _finish(store, spec, where: Path, state: State, mirror) -> int:
    tree = Worktree(mirror, where)
    upstream, why = state.upstream or None, state.upstream_why
    if not state.upstream and not why:   # a state written before it said: the build commit, if upstream has it
        upstream = state.build_oid if in_upstream(mirror, state.build_oid) else None
        why = f"{state.build} is not known as a commit of upstream's history"
    notes: list[str] = []
    with scratch_dir(cache_tmp(store.root), "rebase-") as scratch:
        old = [spec.patches / name for name in state.names if (spec.patches / name).is_file()]
        new = tree.export(state.start, state.build_oid, scratch / "new", old, names=state.names, upstream=upstream,
                          why=why, notes=notes)
        write_folders([(spec.patches, new, state.recorded)])
    tree.remove()
    for note in notes:
        console.print(f"[yellow]note:[/] {note}", soft_wrap=True)
    shown = ", ".join(sorted(state.recorded)) or "none"
    console.print(f"wrote {len(new)} patches to {spec.patches} (base {state.build_oid[:12]}); "
                  f"resolutions recorded: {shown}")
    pinset = load_pinset(state.config)
    with simulate(pinset, list(pinset.builds), store) as sim:
        for b in sim.result.builds:
            pin = next(p for p in b.pins if p.id == spec.id)
            console.print(f"  {spec.id} on {b.build}: {pin.status_text}"
                          + (f" ({pin.apply_mode})" if pin.applied and pin.apply_mode else "")
                          + (f": {pin.detail}" if not pin.applied and pin.detail else ""), soft_wrap=True)
    return 0
