"""`pinset apply`: write the merged tree of one build to a folder (for building it)."""

from __future__ import annotations

from pathlib import Path

from pinset.commands.common import add_config_args, open_config
from pinset.errors import PinsetError
from pinset.output import check_outputs, console
from pinset.sim.run import pick_builds, simulate


def add_parser(sub):
    p = sub.add_parser("apply", help="materialise the pinned tree of one build into a folder")
    add_config_args(p, builds=False)
    p.add_argument("--build", required=True, help="the build (as in pins.yaml, or any tag/commit/pypi:...)")
    p.add_argument("--out", required=True, help="new or empty folder to write the tree into")
    p.add_argument("--bare", action="store_true", help="write the build without any pin")
    return p


def run(args) -> int:
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PinsetError(f"--out {out}: exists and is not an empty folder (nothing was written)")
    check_outputs({}, {"--out": out})
    pinset, store = open_config(args)
    sim = simulate(pinset, pick_builds(pinset, args.build), store)
    try:
        build, result = sim.build(args.build)
        sim.mirror.materialize(build.tree if args.bare else result.tree, out)
    finally:
        sim.mirror.close()
    applied = [p.id for p in result.pins if p.status == "applied"]
    console.print(f"wrote {build.name} ({build.commit[:12]})"
                  + ("" if args.bare else f" + {len(applied)} pins ({', '.join(applied) or 'none'})") + f" to {out}")
    failed = [p.id for p in result.pins if p.required and not p.ok]
    if failed and not args.bare:
        console.print(f"[red]required pins not in the tree or broken:[/] {', '.join(failed)}")
        return 1
    return 0
