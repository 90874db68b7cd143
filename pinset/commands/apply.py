"""`pinset apply`: write the merged tree of one build to a folder (for building it).

The tree is written into a hidden sibling of --out and renamed into place at the end, so an
interrupted apply (Ctrl-C, SIGKILL) never leaves a partial tree at --out; the next apply to the same
--out removes what a killed one left. A build on which a required pin fails is refused (exit 1,
nothing written): a tree that lacks a required pin must not pass for the pinned tree.
"""

from __future__ import annotations

import errno
from pathlib import Path

from pinset.commands.common import add_config_args, open_config
from pinset.commands.paths import OUTPUT_FILE, OUTPUT_FOLDER, add_path
from pinset.commands.prs import add_pr_state_arg, ask_pr_states
from pinset.errors import PinsetError
from pinset.output import console, write_json
from pinset.sim.apply_model import ApplyResult
from pinset.sim.run import pick_builds, simulate
from pinset.store import scratch_dir
from pinset.swap import swap_in


def add_parser(sub):
    p = sub.add_parser(
        "apply",
        description="Apply the pin set onto one build (in the cache's mirror, as `pinset sim` does) and write "
                    "the resulting source tree into a new or empty folder, ready to build. Your own checkout "
                    "is never touched. When a required pin fails on that build nothing is written and the "
                    "exit code is 1; --bare writes the build without any pin.")
    add_config_args(p, builds=False)
    p.add_argument("--build", required=True, help="the build (as in pins.yaml, or any tag/commit/pypi:...)")
    add_path(p, "--out", role=OUTPUT_FOLDER, required=True, help="new or empty folder to write the tree into")
    p.add_argument("--bare", action="store_true", help="write the build without any pin")
    add_path(p, "--json", role=OUTPUT_FILE, help="write what was written (build, commit, pins in the tree) as JSON here")
    add_pr_state_arg(p)
    return p


def _one_build(pinset, selection: str) -> list[str]:
    """--build names one build; a list or a selector naming several is bad input, as for --builds' errors."""
    names = pick_builds(pinset, selection, flag="--build")
    if len(names) != 1:
        raise PinsetError(f"--build {selection!r}: names {len(names)} builds; apply writes one tree")
    return names


def run(args) -> int:
    out = Path(args.out).expanduser().absolute()
    _check_out(out)
    pinset, store = open_config(args)
    prs = ask_pr_states(pinset, args)
    skipped = [s.pin for s in prs.skipped()]
    if skipped:
        console.print(f"[yellow]left out, their PR is not open (skip-unless-open):[/] {', '.join(skipped)}")
    with simulate(prs.without_skipped(pinset), _one_build(pinset, args.build), store) as sim:
        build, result = sim.build(args.build)
        failed = [p.id for p in result.pins if p.required and not p.ok]
        if failed and not args.bare:
            console.print(f"[red]required pins failed on {build.name}:[/] {', '.join(failed)} "
                          f"(see `pinset sim`); nothing written to {out} (--bare writes the build alone)")
            _json(args, ApplyResult(build.name, build.commit, str(out), args.bare, False, failed=failed, skipped=skipped))
            return 1
        write_tree(sim.mirror, build.tree if args.bare else result.tree, out)
    applied = [p.id + (f" (recorded resolution {', '.join(p.resolutions)})" if p.resolutions else "")
               + (f" (union at {', '.join(f'{u.file}:{u.line}' for u in p.unions)}: no person wrote it)"
                  if p.unions else "")
               for p in result.pins if p.applied]
    console.print(f"wrote {build.name} ({build.commit[:12]})"
                  + ("" if args.bare else f" + {len(applied)} pins ({', '.join(applied) or 'none'})") + f" to {out}")
    optional = [p.id for p in result.pins if not p.required and not p.ok]
    if optional and not args.bare:
        console.print(f"[yellow]optional pins not in the tree:[/] {', '.join(optional)}")
    if prs.note:
        console.print(prs.note, soft_wrap=True)
    _json(args, ApplyResult(build.name, build.commit, str(out), args.bare, True,
                            [] if args.bare else [p.id for p in result.pins if p.applied],
                            not_in_tree=[] if args.bare else optional, skipped=skipped))
    return 0


def _json(args, result: ApplyResult) -> None:
    if args.json:
        write_json(args.json, result.to_json())


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PinsetError(f"--out {out}: exists and is not an empty folder (nothing was written)")


def write_tree(mirror, tree: str, out: Path) -> None:
    """Write `tree` into a flock-held hidden sibling of `out`, then rename it to `out`: `out` is
    either absent/empty or the whole tree, whenever the run stops."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with scratch_dir(out.parent, f".{out.name}.pinset-tmp-") as tmp:
            mirror.materialize(tree, tmp)
            swap_in(tmp, out)   # onto nothing or an empty folder: one rename, Ctrl-C held back while it runs
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):  # the system refused mid-run: exit 1, the path
            exc.filename = exc.filename or str(out)
            raise
        raise PinsetError(f"--out {out}: {exc.strerror or exc} (nothing was written)") from None
