"""`pinset import`: write a pins.yaml from Unsloth's pr-set.json (with its feature-checks.json) or an Ollama-style
checkout.

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

from pinset.commands.common import add_cache_arg
from pinset.commands.paths import INPUT_FILE, OUTPUT_FILE, add_path
from pinset.config import importers
from pinset.config.import_model import ImportedPin, ImportResult
from pinset.config.schema import load_pinset
from pinset.errors import ConfigError, PinsetError
from pinset.output import write_json, write_text


def add_parser(sub):
    p = sub.add_parser(
        "import", help="write a pins.yaml from a pr-set.json (+ feature-checks.json) or an Ollama-style checkout",
        description="Write a pins.yaml from where another distributor keeps its pin set, read as it is: Unsloth's "
                    "pr-set.json (its `_doc` kept as comments, an ordered list of PR commit URLs, PRs of a fork "
                    "fetched from the fork, `\"required\": false` = skip once the PR is not open) with, optionally, "
                    "its feature-checks.json (checks on their owner pins, owner-less ones on the pin set, "
                    "`unchecked` reasons); or an Ollama-style checkout (Makefile.sync's UPSTREAM and FETCH_HEAD, "
                    "an abbreviated one resolved against upstream; llama/patches as one folder pin with "
                    "`each: true`). Each pin gets a YAML comment naming where it came from. The result is checked "
                    "as every verb reads pins.yaml before it is written; nothing else is written.")
    add_path(p, "source", role=INPUT_FILE, nargs="+", derived=lambda args: import_inputs(args.source),
             help="a pr-set.json file (and its feature-checks.json), or the folder of an Ollama-style checkout")
    add_path(p, "-o", "--out", role=OUTPUT_FILE, required=True, help="the pins.yaml to write")
    add_path(p, "--onto", role=INPUT_FILE, metavar="PINS_YAML",
             help="with a feature-checks.json alone: the pins.yaml whose pins its owners name; -o gets that file's "
                  "text with the checks added, nothing else changed")
    p.add_argument("--format", choices=("pr-set", "ollama"),
                   help="the source's format (default: pr-set for a file, ollama for a folder)")
    p.add_argument("--upstream", help="upstream of the pin set (default: the source's, else "
                                      f"{importers.DEFAULT_UPSTREAM})")
    p.add_argument("--builds", help="comma-separated builds (default: the source's; Ollama: FETCH_HEAD; "
                                    f"else {importers.DEFAULT_BUILDS}, upstream's newest tag)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    add_cache_arg(p, help="cache folder, where upstream is fetched to resolve an abbreviated FETCH_HEAD "
                          "(default: $PINSET_CACHE or $XDG_CACHE_HOME/pinset)")
    add_path(p, "--json", role=OUTPUT_FILE, help="write what was imported (pins, builds, notes) as JSON here")
    return p


def run(args) -> int:
    sources = [Path(s).expanduser() for s in args.source]
    out = Path(args.out).expanduser().absolute()
    for source in sources:
        if not source.exists():
            raise PinsetError(f"{source}: no such file or folder")
    if out.exists() and not args.force:
        raise PinsetError(f"--out {out}: exists (give --force to replace it)")
    for source in sources:
        if out.resolve() == source.resolve():
            raise PinsetError(f"--out {out}: is the source")
    builds = [b.strip() for b in args.builds.split(",")] if args.builds else None
    if builds is not None and not all(builds):
        raise PinsetError(f"--builds {args.builds!r}: an empty entry")
    if args.onto:
        return _onto(args, sources, out)
    source, checks = _sources(sources)
    kind = args.format or ("ollama" if source.is_dir() else "pr-set")
    if kind == "ollama":
        if checks is not None:
            raise PinsetError(f"{checks}: a feature-checks.json goes with a pr-set.json, not an Ollama checkout")
        imported = importers.from_ollama(source.resolve(), out, args.upstream, builds)
        imported = _resolve_fetch_head(imported, source, builds is None, out, args.cache)
    else:
        imported = importers.from_pr_set(source, args.upstream, builds)
        if checks is not None:
            imported = importers.with_feature_checks(imported, checks)
    text = importers.to_yaml(imported, f"pinset import --format {kind} {' '.join(map(str, sources))}\n"
                                       "(edit freely: every pin keeps a comment naming its source)")
    _check(text, out)
    write_text(out, text)
    for note in imported.notes:
        print(f"pinset import: note: {note}", file=sys.stderr)
    count = len(imported.pins)
    what = f"{count} pin{'s' if count != 1 else ''}"
    if kind == "ollama":
        what = f"1 folder pin (each of its {len(list(source.joinpath('llama', 'patches').glob('*.patch')))} patches a pin)"
    checks_said = sum(len(p.get("checks", ())) for p in imported.pins) + len(imported.checks)
    if checks is not None:
        what += f", {checks_said} check{'s' if checks_said != 1 else ''} ({len(imported.checks)} of the pin set)"
    print(f"pinset import: {what} from {', '.join(map(str, sources))} written to {out}", file=sys.stderr)
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


def _onto(args, sources: list[Path], out: Path) -> int:
    """`pinset import feature-checks.json --onto pins.yaml -o OUT`: that pins.yaml with the checks added."""
    onto = Path(args.onto).expanduser()
    if len(sources) != 1 or not sources[0].is_file() or not importers.is_feature_checks(sources[0]):
        raise PinsetError("--onto takes one source, a feature-checks.json (its checks go onto that pin set's pins)")
    for given, name in ((args.upstream, "--upstream"), (args.builds, "--builds"), (args.format, "--format")):
        if given:
            raise PinsetError(f"{name}: not with --onto (the pin set is the one --onto names)")
    text, imported = importers.feature_checks_onto(sources[0], onto)
    _check(text, out)
    write_text(out, text)
    for note in imported.notes:
        print(f"pinset import: note: {note}", file=sys.stderr)
    added = sum(len(p.get("checks", ())) for p in imported.pins) + len(imported.checks)
    print(f"pinset import: {added} check{'s' if added != 1 else ''} ({len(imported.checks)} of the pin set) from "
          f"{sources[0]} onto {onto} written to {out}", file=sys.stderr)
    return 0


def _sources(sources: list[Path]) -> tuple[Path, Path | None]:
    """(the pin set's source, Unsloth's feature-checks.json or None): a feature-checks.json is told by its content
    and needs the pr-set.json whose pins its owners name."""
    if len(sources) > 2:
        raise PinsetError("give one source, or a pr-set.json and its feature-checks.json")
    checks = [s for s in sources if s.is_file() and importers.is_feature_checks(s)]
    rest = [s for s in sources if s not in checks]
    if len(checks) > 1 or (len(sources) == 2 and not checks):
        raise PinsetError(f"two sources: a pr-set.json and a feature-checks.json (got {' and '.join(map(str, sources))})")
    if not rest:
        raise PinsetError(f"{checks[0]}: a feature-checks.json maps checks onto the pins its owners name: give the "
                          f"pr-set.json too (pinset import pr-set.json {checks[0].name} -o pins.yaml), or the "
                          "pins.yaml that has them (--onto pins.yaml)")
    return rest[0], (checks[0] if checks else None)


def _resolve_fetch_head(imported: importers.Imported, source: Path, from_makefile: bool, out: Path,
                        cache: str | None) -> importers.Imported:
    """An abbreviated FETCH_HEAD (Ollama's `FETCH_HEAD=ec98e2002`) as the full commit of upstream it names, as git
    resolves it in a clone of upstream: unknown or ambiguous is bad input naming the candidates."""
    prefix = importers.abbreviated_build(imported, from_makefile)
    if prefix is None:
        return imported
    from pinset.store import Store
    from pinset.upstream.builds import commits_named, upstream_url
    from pinset.upstream.mirror import Mirror

    url = upstream_url(imported.upstream, out.parent)   # as the pins.yaml written there reads it
    store = Store.open(cache)
    with Mirror(store.mirror) as mirror:
        found = commits_named(prefix, url, mirror)
    where = f"{source / 'Makefile.sync'}: FETCH_HEAD {prefix}"
    if not found:
        raise importers.ImportProblem(f"{where}: no commit of upstream {url} starts with it")
    if len(found) > 1:
        raise importers.ImportProblem(f"{where}: ambiguous, {len(found)} commits of upstream {url} start with it "
                                      f"({', '.join(c[:12] for c in found[:5])}): write more of the commit")
    return importers.with_build(imported, found[0])


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


def import_inputs(sources) -> dict[str, str]:
    """What `pinset import` reads from its sources (path -> what it is), for the outputs rule: a pr-set.json or
    feature-checks.json itself; of an Ollama-style checkout its Makefile.sync and its patch queue (a sealed input
    folder: no output over a patch in it and no new `*.patch` in it)."""
    found: dict[str, str] = {}
    for source in ([sources] if isinstance(sources, (str, os.PathLike)) else sources or []):
        found.update(_inputs_of(source))
    return found


def _inputs_of(source: str | os.PathLike) -> dict[str, str]:
    path = Path(source).expanduser()
    if not path.is_dir():
        return {str(path): str(path)}
    found = {str(path / "Makefile.sync"): f"Makefile.sync of the checkout {source}"}
    queue = path / "llama" / "patches"
    if queue.is_dir():
        found[str(queue)] = f"the patch queue of the checkout {source}"
    return found
