"""`pinset matrix`: the CI cells to run (build x GPU class) as a GitHub Actions matrix, for `fromJSON()`.

Only builds on which the sim is green get cells: a build whose pins do not apply has nothing to verify, and
its red sim result already blocks the report. Each cell carries the exact pinset command lines it runs, so
the workflow holds no pinset logic of its own and `pinset report --expect` can name every cell that never
delivered a result.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from pinset.commands.common import add_config_args
from pinset.commands.paths import INPUT_FILE, OUTPUT_FILE, UNGUARDED, add_path
from pinset.config.schema import PinSet, load_pinset
from pinset.errors import PinsetError
from pinset.matrix.cells import green_builds, matrix
from pinset.output import write_text
from pinset.sim.run import pick_builds


def add_parser(sub):
    p = sub.add_parser("matrix")
    add_config_args(p)
    add_path(p, "--sim", role=INPUT_FILE, type=Path, help="sim JSON of this pin set (default: run the sim now)")
    p.add_argument("--gpus", help="comma-separated GPU classes of pins.yaml's `gpus:` (default: all)")
    add_path(p, "--kld-model", role=UNGUARDED,
             help="GGUF model: each cell also runs `pinset kld` on it (a path on the runner)")
    add_path(p, "--bench-model", role=UNGUARDED,
             help="GGUF model: each cell also runs `pinset bench` on it (a path on the runner)")
    p.add_argument("--bench-args", default="-p 512 -n 128 -ngl 99",
                   help="llama-bench options of the bench cells (default: \"-p 512 -n 128 -ngl 99\")")
    p.add_argument("--verify-args", default="",
                   help="extra options of each cell's `pinset verify` (e.g. \"--op-jobs 4\")")
    add_path(p, "--results-dir", role=UNGUARDED, default="pinset-results",  # on the runner
             help="where the cells write their JSON and logs: RESULTS_DIR/ARTIFACT each (default pinset-results)")
    p.add_argument("--pinset-command", default="pinset", help="how the cells call pinset (default: pinset)")
    add_path(p, "--json", role=OUTPUT_FILE, type=Path, help="write the matrix here instead of stdout")
    return p


def run(args) -> int:
    pinset = load_pinset(args.config, require_pins=False)
    build_names = pick_builds(pinset, args.builds)
    classes = pick_classes(pinset, args.gpus)
    for flag in ("verify_args", "bench_args", "pinset_command"):
        _split(getattr(args, flag), "--" + flag.replace("_", "-"))
    if not _split(args.pinset_command, "--pinset-command"):
        raise PinsetError("--pinset-command: empty (how the cells call pinset, e.g. \"python3 -m pinset\")")
    if not args.results_dir.strip("/ "):
        raise PinsetError(f"--results-dir {args.results_dir!r}: a folder name is needed (the cells' results would "
                          "land in the file system's root)")
    green, red = green_builds(pinset, build_names, args.sim, args.cache)
    for build, why in red:
        print(f"pinset matrix: {build} left out: the sim is red ({why})", file=sys.stderr)
    if not green:
        print(f"pinset matrix: no build is green in the sim ({len(red)} red), so there is no cell to run; "
              "an empty matrix would fail the workflow without saying why", file=sys.stderr)
        return 1
    result = matrix(pinset, args.config, green, classes, kld_model=args.kld_model, bench_model=args.bench_model,
                    bench_args=args.bench_args, verify_args=args.verify_args, results_dir=args.results_dir,
                    pinset_command=args.pinset_command)
    text = json.dumps(result.to_json(), separators=(",", ":")) + "\n"
    if args.json:  # one line, so that `echo "matrix=$(cat FILE)" >> "$GITHUB_OUTPUT"` holds all of it
        write_text(args.json, text)
        print(f"pinset matrix: {len(result.cells)} cells written to {args.json}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def pick_classes(pinset: PinSet, selection: str | None):
    if not pinset.gpus:
        raise PinsetError(f"{pinset.path.name} has no `gpus:` (name the GPU classes to verify on, e.g. "
                          "gpus: {h200: {runs-on: [self-hosted, h200], architectures: \"90\"}})")
    if not selection:
        return list(pinset.gpus)
    names = [n.strip() for n in selection.split(",") if n.strip()]
    if not names:
        raise PinsetError("--gpus: empty list")
    return [pinset.gpu_class(n) for n in dict.fromkeys(names)]


def _split(text: str, flag: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise PinsetError(f"{flag}: {exc}") from None
