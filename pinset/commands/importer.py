"""`pinset import`: write a pins.yaml from an Unsloth-style pr-set.json or an Ollama-style checkout.

Only the named output is written, and only once the text it would hold reads as a valid pin set (through
the one reader, config/schema.py, from the output's own folder so relative patch paths are checked where
they will be read): an importer can never leave a pins.yaml that the other verbs refuse. An existing file
is refused unless --force.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from pinset.commands.paths import INPUT_FILE, OUTPUT_FILE, add_path
from pinset.config import importers
from pinset.config.import_model import ImportedPin, ImportResult
from pinset.config.schema import load_pinset
from pinset.errors import ConfigError, PinsetError
from pinset.output import write_json, write_text


def add_parser(sub):
    p = sub.add_parser(
        "import", help="write a pins.yaml from a pr-set.json or an Ollama-style checkout",
        description="Write a pins.yaml from where another distributor keeps its pin set: an Unsloth-style "
                    "pr-set.json (an ordered list of PR commit URLs, each optionally `required: false`), or an "
                    "Ollama-style checkout (Makefile.sync's UPSTREAM and FETCH_HEAD, llama/patches/*.patch as "
                    "one pin each, in name order). Each pin gets a YAML comment naming where it came from. "
                    "The result is checked as every verb reads pins.yaml before it is written; nothing else "
                    "is written.")
    add_path(p, "source", role=INPUT_FILE, derived=lambda args: import_inputs(args.source),
             help="a pr-set.json file, or the folder of an Ollama-style checkout")
    add_path(p, "-o", "--out", role=OUTPUT_FILE, required=True, help="the pins.yaml to write")
    p.add_argument("--format", choices=("pr-set", "ollama"),
                   help="the source's format (default: pr-set for a file, ollama for a folder)")
    p.add_argument("--upstream", help="upstream of the pin set (default: the source's, else "
                                      f"{importers.DEFAULT_UPSTREAM})")
    p.add_argument("--builds", help="comma-separated builds (default: the source's; Ollama: FETCH_HEAD; "
                                    f"else {importers.DEFAULT_BUILDS}, upstream's newest tag)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    add_path(p, "--json", role=OUTPUT_FILE, help="write what was imported (pins, builds, notes) as JSON here")
    return p


def run(args) -> int:
    source = Path(args.source).expanduser()
    out = Path(args.out).expanduser().absolute()
    if not source.exists():
        raise PinsetError(f"{source}: no such file or folder")
    if out.exists() and not args.force:
        raise PinsetError(f"--out {out}: exists (give --force to replace it)")
    if out.resolve() == source.resolve():
        raise PinsetError(f"--out {out}: is the source")
    builds = [b.strip() for b in args.builds.split(",")] if args.builds else None
    if builds is not None and not all(builds):
        raise PinsetError(f"--builds {args.builds!r}: an empty entry")
    kind = args.format or ("ollama" if source.is_dir() else "pr-set")
    if kind == "ollama":
        imported = importers.from_ollama(source.resolve(), out, args.upstream, builds)
    else:
        imported = importers.from_pr_set(source, args.upstream, builds)
    text = importers.to_yaml(imported, f"pinset import --format {kind} {source}\n"
                                       "(edit freely: every pin keeps a comment naming its source)")
    _check(text, out)
    write_text(out, text)
    for note in imported.notes:
        print(f"pinset import: note: {note}", file=sys.stderr)
    print(f"pinset import: {len(imported.pins)} pins from {source} written to {out}", file=sys.stderr)
    if args.json:
        write_json(args.json, import_result(imported, source, kind, out).to_json())
    return 0


def import_result(imported, source: Path, kind: str, out: Path) -> ImportResult:
    """The JSON form of an import (kind "import"), from the pin mappings written."""
    pins = [ImportedPin(str(pin["id"]), "pr" if "pr" in pin else "patches", str(pin.get("_from", "")),
                        pin.get("required", True) is not False, pin.get("skip-unless-open", False) is True)
            for pin in imported.pins]
    return ImportResult(str(source), kind, str(out), imported.upstream, list(imported.builds), pins,
                        list(imported.notes))


def _check(text: str, out: Path) -> None:
    """The text read back as pins.yaml from the output's folder; its errors name the output's lines."""
    made = []  # the output's missing folders: made for the probe, removed again when the text is refused
    folder = out.parent
    while not folder.exists():
        made.append(folder)
        folder = folder.parent
    for missing in reversed(made):
        missing.mkdir()
    probe = out.with_name(f".{out.name}.import-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        probe.write_text(text, encoding="utf-8")
        load_pinset(probe)
    except ConfigError as exc:
        probe.unlink(missing_ok=True)
        for missing in made:
            missing.rmdir()
        raise PinsetError(f"the imported pin set would not be valid: "
                          f"{str(exc).replace(str(probe), out.name)}") from None
    finally:
        probe.unlink(missing_ok=True)


def import_inputs(source: str | os.PathLike) -> dict[str, str]:
    """What `pinset import` reads from `source` (path -> what it is), for the outputs rule: a pr-set.json itself;
    of an Ollama-style checkout its Makefile.sync and its patch queue (a sealed input folder: no output over a
    patch in it and no new `*.patch` in it)."""
    path = Path(source).expanduser()
    if not path.is_dir():
        return {str(path): str(path)}
    found = {str(path / "Makefile.sync"): f"Makefile.sync of the checkout {source}"}
    queue = path / "llama" / "patches"
    if queue.is_dir():
        found[str(queue)] = f"the patch queue of the checkout {source}"
    return found
