"""`pinset cache info|clean`: what the cache holds by kind, and removing what can be made again.

Neither subcommand creates the cache: `info` on a missing one lists zeros. `clean` leaves the mirror (the
upstream history, slow to fetch again) and ccache (it bounds its own size), and whatever a running pinset
holds (store.py's locks).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from pinset import cache_usage
from pinset.commands.paths import INPUT_FOLDER, OUTPUT_FILE, add_path
from pinset.errors import PinsetError
from pinset.output import write_text
from pinset.store import default_cache_dir

SCHEMA = 1


def add_parser(sub):
    p = sub.add_parser(
        "cache", help="what the cache holds (info) and removing what can be made again (clean)",
        description="The cache holds the upstream mirror, downloaded sdists, build folders (the bulk: hundreds of "
                    "MB each), PR diffs, KLD references, logs and sim's remembered answers (memo/, moved/). `info` "
                    "sizes it by kind; `clean` removes build folders, sdists, PR diffs, KLD references, logs and "
                    "remembered answers (never the mirror or ccache), skipping whatever a running pinset holds.")
    verbs = p.add_subparsers(dest="cache_command", metavar="SUBCOMMAND")
    verbs.required = True
    info = verbs.add_parser("info", help="size of the cache by kind", description=(
        "Size the cache by kind: mirror, sdists, builds, ccache, results (PR diffs, KLD references, logs), "
        "memo (sim's remembered answers), scratch and other; bytes on disk, entries and files. A missing cache "
        "is listed as empty, not made."))
    add_path(info, "--json", role=OUTPUT_FILE, stdout="-", nargs="?", const="-", metavar="FILE",
             help="JSON on stdout, or into FILE")
    clean = verbs.add_parser("clean", help="remove build folders, sdists, PR diffs, KLD references and logs",
                             description=(
        "Remove build folders and (without --builds) downloaded sdists, PR diffs, KLD references, logs, "
        "sim's remembered answers (memo/, moved/: any age, a missing one is worked out again) and dead runs' "
        "scratch folders: all made again on demand. Never the mirror or ccache, never an "
        "unfinished download, never what a running pinset holds, never anything outside the cache."))
    clean.add_argument("--older-than", type=_days, metavar="DAYS",
                       help="only entries not used for DAYS days (a number > 0, e.g. 14 or 0.5)")
    clean.add_argument("--builds", action="store_true", help="only build folders")
    clean.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    add_path(clean, "--json", role=OUTPUT_FILE, stdout="-", nargs="?", const="-", metavar="FILE",
             help="JSON on stdout, or into FILE")
    for q in (info, clean):
        # the folder these verbs read and clean: no output may be it or an entry of it (clean could remove it)
        add_path(q, "--cache", role=INPUT_FOLDER, help="cache folder (default: $PINSET_CACHE or $XDG_CACHE_HOME/pinset)")
    return p


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > 100_000:
        raise argparse.ArgumentTypeError(f"must be a number of days > 0 (and at most 100000), got {text!r}")
    return value


def _root(args) -> Path:
    root = Path(args.cache).expanduser() if args.cache else default_cache_dir()
    if root.exists() and not root.is_dir():
        raise PinsetError(f"cache {root}: exists and is not a folder")
    return root.resolve() if root.exists() else root.absolute()


def _emit_json(target: str, doc: dict) -> None:
    write_text(target, json.dumps(doc, indent=2) + "\n")   # `-`: standard output (pinset.output)


def run(args) -> int:
    root = _root(args)
    if args.cache_command == "info":
        return _info(root, args)
    return _clean(root, args)


def _info(root: Path, args) -> int:
    kinds = cache_usage.usage(root)
    total = sum(k.bytes for k in kinds)
    if args.json:
        _emit_json(args.json, {"schema": SCHEMA, "cache": str(root), "bytes": total,
                               "kinds": [k.to_json() for k in kinds]})
        return 0
    print(f"cache {root}" + ("" if root.is_dir() else " (does not exist yet)"))
    width = max(len(k.kind) for k in kinds)
    for k in kinds:
        print(f"  {k.kind:<{width}}  {cache_usage.human(k.bytes):>9}  {k.entries:>5} entries  {k.files:>7} files")
    print(f"  {'total':<{width}}  {cache_usage.human(total):>9}")
    return 0


def _clean(root: Path, args) -> int:
    result = cache_usage.clean(root, older_than_days=args.older_than, builds_only=args.builds,
                               dry_run=args.dry_run) if root.is_dir() else cache_usage.CleanResult([], [], [])
    if args.json:
        _emit_json(args.json, {"schema": SCHEMA, "cache": str(root), "dry_run": args.dry_run,
                               "freed_bytes": result.freed,
                               "removed": [e.to_json(root) for e in result.removed],
                               "in_use": [e.to_json(root) for e in result.in_use],
                               "scratch_removed": len(result.scratch)})
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for e in result.removed:
        if e.kind != "memo":
            print(f"{verb} {e.kind}: {e.path.relative_to(root)} ({cache_usage.human(e.bytes)})")
    memo = [e for e in result.removed if e.kind == "memo"]
    if memo:   # thousands of small files: one line (--json lists each)
        print(f"{verb} memo: {len(memo)} remembered sim answers under "
              f"{', '.join(f + '/' for f in cache_usage.MEMO_FOLDERS)} ({cache_usage.human(sum(e.bytes for e in memo))})")
    for e in result.in_use:
        print(f"kept {e.kind}: {e.path.relative_to(root)} (in use by a running pinset, or written within the last hour)")
    print(f"cache {root}: {verb} {len(result.removed)} entries, {cache_usage.human(result.freed)}"
          + (f"; {len(result.scratch)} scratch folders of dead runs" if result.scratch else ""))
    return 0
