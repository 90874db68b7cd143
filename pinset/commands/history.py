"""`pinset history`: the result files of many nightly runs -> the pin set's health night after night, as one
self-contained HTML page, markdown and JSON (docs/history.md)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from pinset.commands.common import pins_read
from pinset.commands.paths import INPUT_FILE, INPUT_FOLDER, OUTPUT_FILE, add_path
from pinset.errors import PinsetError
from pinset.output import write_text
from pinset.results import stamped

# what the verb imports to make its tables and plots (the `measure` extra where the light install lacks them)
NEEDS = ("pandas", "matplotlib")


def add_parser(sub):
    p = sub.add_parser("history", description=(
        "The pin set's health night after night: each pin's state on every build of every night (red since "
        "when, blamed on which upstream commit, how often refreshed), bench ratios, KLD, verify's gates and "
        "forecast alarms over the nights. Reads a folder with one subfolder per run (results/2026-11-04/*.json) "
        "or, with --branch, that layout on a git branch. Exit 1 when a required pin is red on the last night."))
    add_path(p, "runs", role=INPUT_FOLDER, nargs="?", default=".", metavar="RESULTS",
             help="the folder of runs (one subfolder per night), or with --branch the git repository (default: .)")
    p.add_argument("--branch", metavar="REF", help="read the runs from this branch (or any ref) of the repository")
    add_path(p, "-c", "--config", role=INPUT_FILE, derived=pins_read, help="pins.yaml: adds the pin set's and pins' descriptions")
    add_path(p, "--html", role=OUTPUT_FILE, help="write one self-contained page here (inline CSS and images)")
    add_path(p, "--markdown", role=OUTPUT_FILE,
             help="write markdown here (an issue or job summary; its plots as FILE-bench.png, FILE-kld.png beside it)")
    add_path(p, "--json", role=OUTPUT_FILE, help="write the history as JSON here (kind \"history\")")
    p.add_argument("--title", default="pinset history", help="the page's title (default: pinset history)")
    return p


def run(args) -> int:
    missing = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise PinsetError(f"pinset history needs {' and '.join(missing)}: pip install 'pinset[measure]'")
    from pinset.history.load import branch_entries, folder_entries, load_runs
    from pinset.history.model import build_history
    from pinset.history.render import render_html, render_markdown, write_pngs

    descriptions, description = None, None
    if args.config:
        from pinset.config.schema import load_pinset

        pinset = load_pinset(args.config, require_pins=False)
        descriptions = {p.id: p.description for p in pinset.pins}
        description = pinset.description
    source = Path(args.runs)
    entries = branch_entries(source, args.branch) if args.branch else folder_entries(source)
    runs, skipped = load_runs(entries)
    for s in skipped:
        print(f"pinset history: {s.line()}", file=sys.stderr)
    history = build_history(runs, skipped, descriptions)
    if args.json:   # one line: a year of nights is megabytes, and json's C encoder writes no indent
        write_text(args.json, json.dumps(stamped(history.to_json()), separators=(",", ":")) + "\n")
    if args.html:
        write_text(args.html, render_html(history, args.title, description))
    if args.markdown:
        target = Path(args.markdown)
        pngs = write_pngs(history, target)
        for name, png in pngs.items():
            _write_bytes(target.parent / name, png)
        images = {name.rsplit("-", 1)[1].removesuffix(".png"): name for name in pngs}
        write_text(target, render_markdown(history, images, args.title))
    red = [p for p in history.pins if p.red_since and p.required]
    nights = history.night_names
    print(f"pinset history: {len(nights)} night{'s' if len(nights) != 1 else ''}, {len(history.pins)} pins"
          + (f", red: {', '.join(p.id for p in red)}" if red else ", none red")
          + (f", {len(skipped)} file{'s' if len(skipped) != 1 else ''} skipped" if skipped else ""))
    return 1 if red else 0


def _write_bytes(path: Path, data: bytes) -> None:
    from pinset.store import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
