"""`pinset check`: pins.yaml and its patches read as every verb reads them, and nothing else: no fetch, no
download, no cache (a pre-commit hook and a workflow's first step; under a second). Bad input is the one line
every verb gives (file, line, key), exit 2; a good pin set is one line, exit 0."""

from __future__ import annotations

from pinset.commands.common import warn_damaged_ledgers
from pinset.commands.paths import INPUT_FILE, add_path
from pinset.config.schema import load_pinset
from pinset.config.selectors import looks_like_selector


def add_parser(sub):
    p = sub.add_parser(
        "check",
        description="Read pins.yaml and every patch it names as the other verbs do (keys, ids, shas, URLs, "
                    "selectors, patch files parsed by git's own parser), and nothing else: nothing is fetched or "
                    "downloaded and the cache is not touched. Exit 0 with one line when the pin set reads, 2 "
                    "with the one line naming file, line and key when it does not.")
    add_path(p, "configs", role=INPUT_FILE, nargs="*", metavar="PINS_YAML",
             help="pin set files (default: pins.yaml)")
    add_path(p, "-c", "--config", role=INPUT_FILE, help="a pin set file, as the other verbs take it")
    return p


def run(args) -> int:
    for config in [*([args.config] if args.config else []), *args.configs] or ["pins.yaml"]:
        pinset = load_pinset(config)
        warn_damaged_ledgers(pinset)
        prs = sum(1 for p in pinset.pins if p.pr is not None)
        patches = sum(len(p.series) for p in pinset.pins if p.patches is not None)
        selectors = sum(1 for b in pinset.builds if looks_like_selector(b))
        print(f"ok: {config}: {len(pinset.pins)} pin{'s' if len(pinset.pins) != 1 else ''} ({prs} PR, "
              f"{len(pinset.pins) - prs} patch pins with {patches} patch file{'s' if patches != 1 else ''}), "
              f"{len(pinset.builds)} build{'s' if len(pinset.builds) != 1 else ''}"
              + (f" ({selectors} selector{'s' if selectors != 1 else ''})" if selectors else ""))
    return 0
