"""`pinset pick`: the newest upstream build the pin set can ship on (optionally confirmed by verify)."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from pinset import ci_annotations
from pinset.commands.common import add_config_args, count, only_with, open_config
from pinset.commands.paths import OUTPUT_FILE, OUTPUT_FOLDER, add_path
from pinset.commands.prs import add_pr_state_arg, ask_pr_states
from pinset.commands.verify import warn
from pinset.nightly.markdown import pick_markdown, why_text, write_results
from pinset.nightly.model import NOT_GREEN, NOT_TRIED, PICKED, VERIFY_FAILED, PickResult
from pinset.nightly.pick import pick
from pinset.output import console, err_console
from pinset.sim.pins import carried_symbols, prepare_pins
from pinset.sim.run import pick_builds
from pinset.upstream.builds import resolve_builds
from pinset.upstream.mirror import Mirror
from pinset.upstream.select import order_oldest_first
from pinset.verify.gates import Gates, VerifyOptions
from pinset.verify.plan import parse_ops
from pinset.verify.run import check_toolchain, confirmation

STYLE = {PICKED: "green", NOT_GREEN: "red", VERIFY_FAILED: "red", NOT_TRIED: "dim"}


def add_parser(sub):
    p = sub.add_parser("pick")
    add_config_args(p)
    p.add_argument("--verify", action="store_true",
                   help="confirm the picked build with `pinset verify`; fall back to the next older green build "
                        "when a gate fails")
    p.add_argument("--cuda", action="store_true", help="with --verify: also the CUDA build and GPU gates")
    p.add_argument("-j", "--jobs", type=count(1), help="with --verify: parallel compile jobs (default: all cores)")
    add_path(p, "--logs", role=OUTPUT_FOLDER, help="with --verify: folder for program output (default: in the cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while building")
    add_path(p, "--json", role=OUTPUT_FILE, help="write the pick JSON here")
    add_path(p, "--markdown", role=OUTPUT_FILE, help="write a markdown summary here")
    add_pr_state_arg(p)
    return p


def run(args) -> int:
    only_with("--verify", args.verify, {"--cuda": args.cuda, "-j/--jobs": args.jobs is not None,
                                        "--logs": args.logs is not None, "--no-progress": args.no_progress})
    full, store = open_config(args)
    prs = ask_pr_states(full, args)
    pinset = prs.without_skipped(full)   # a skip-unless-open pin whose PR is not open: never picked over
    names = pick_builds(pinset, args.builds)
    cuda_flags, arch = [], None
    if args.verify:
        settings = check_toolchain(pinset, args.cuda, [], warn=warn)
        cuda_flags, arch = list(settings.cuda_flags), settings.cuda_architectures
    with Mirror(store.mirror) as mirror:
        builds = order_oldest_first(resolve_builds(names, pinset.upstream, pinset.path.parent, store, mirror), mirror)
        prepared = prepare_pins(pinset, store, mirror)
        confirm = None
        if args.verify:
            options = VerifyOptions(cuda=args.cuda, ops=parse_ops(None), cuda_architectures=arch, jobs=args.jobs,
                                    cuda_flags=cuda_flags, progress=not args.no_progress,
                                    log_dir=Path(args.logs) if args.logs else store.dir("logs", "pick"),
                                    settings=settings if args.cuda else None)
            gates = Gates(pinset, store, mirror, options, say=err_console.print)  # progress: stderr
            confirm = confirmation(gates, lambda result: carried_symbols(prepared, result))

        result = pick(pinset, mirror, prepared, list(reversed(builds)), confirm,
                      say=lambda text: err_console.print(f"[dim]{text}[/]"))
    result.pinset_digest = full.digest
    console.print(pick_table(result))
    for line in prs.lines():
        console.print(f"[yellow]{escape(line)}[/]", soft_wrap=True)
    console.print(f"[green]picked[/] {result.picked}" if result.ok else "[red]no build is green[/]")
    if result.dropped:
        console.print(f"[yellow]dropped optional pins[/] on {result.picked}: {', '.join(r.pin or '' for r in result.dropped)}")
    write_results(result, args.json, args.markdown)
    lines = {p.id: p.line for p in full.pins}
    for r in result.dropped:   # GitHub Actions only: at the pin's line
        ci_annotations.annotate(ci_annotations.WARNING, f"optional pin dropped on {result.picked}: {r.summary()}",
                                file=pinset.path, line=lines.get(r.pin), title="pinset pick")
    ci_annotations.step_summary("## pinset pick\n\n" + pick_markdown(result))
    return 0 if result.ok else 1


def pick_table(result: PickResult) -> Table:
    """Every build's verdict and reasons, newest first, as pick_markdown."""
    table = Table(title="pinset pick (newest first)")
    for column in ("build", "commit", "verdict", "why"):
        table.add_column(column)
    for b in result.builds:
        style = STYLE[b.verdict]
        table.add_row(b.build, (b.commit or "")[:12], f"[{style}]{b.verdict}[/]", why_text(b, "\n"))
    return table
