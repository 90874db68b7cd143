"""`pinset report`: sim/verify/kld/bench results (from one or many machines) -> one verdict and PR comment."""

from __future__ import annotations

import os
import sys

from pinset.commands.common import add_cache_arg, pins_read_unless
from pinset.commands.paths import INPUT_FILE, OUTPUT_FILE, add_path
from pinset.config.schema import load_pinset
from pinset.errors import GitHubError, PinsetError
from pinset.github.client import (
    DEFAULT_API_URL,
    TOKEN_SOURCES,
    GitHub,
    describe_dry_run,
    find_token,
    parse_api_url,
    parse_target,
)
from pinset.output import write_json, write_text
from pinset.report import OtherPinSet, build_report, post_report
from pinset.store import Store


def add_parser(sub):
    p = sub.add_parser("report")
    add_path(p, "results", role=INPUT_FILE, nargs="*", help="JSON result files written by sim, verify, kld and bench")
    add_path(p, "-c", "--config", role=INPUT_FILE, derived=pins_read_unless(),
             help="pins.yaml: adds the pin set's and pins' descriptions and lists its pins without a result "
                  "(must be the pin set the results were made with; default: ./pins.yaml when there is one, "
                  "left out with a warning when it is another pin set)")
    add_path(p, "--expect", role=INPUT_FILE, metavar="MATRIX_JSON",
                   help="the `pinset matrix` JSON of this run: a cell without its results is listed as not tested "
                        "(failed or cancelled cells never go missing silently)")
    add_path(p, "--markdown", role=OUTPUT_FILE, help="write the PR comment here (default: print it)")
    add_path(p, "--json", role=OUTPUT_FILE, help="write the verdict as JSON here")
    p.add_argument("--post", metavar="OWNER/REPO#N", help="post or update the comment on this PR (token: $GITHUB_TOKEN, $GH_TOKEN or `gh auth token`)")
    p.add_argument("--dry-run", action="store_true", help="with --post: print the requests instead of sending them")
    p.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
                   help="GitHub REST API base URL (default: $GITHUB_API_URL or https://api.github.com)")
    add_cache_arg(p, help="cache folder, where the report is kept if posting fails "
                          "(default: $PINSET_CACHE or $XDG_CACHE_HOME/pinset)")
    return p


def run(args) -> int:
    target = parse_target(args.post) if args.post else None
    if args.dry_run and not target:
        raise PinsetError("--dry-run only applies to --post")
    api_url = parse_api_url(args.api_url) if target else None
    token = find_token(api_url or DEFAULT_API_URL) if target else None
    if target and not args.dry_run and not token:
        raise PinsetError(f"--post needs a token in {TOKEN_SOURCES} (or use --dry-run)")

    default = args.config is None and os.path.isfile("pins.yaml")   # read like every verb reads it
    pinset = load_pinset(args.config or "pins.yaml", require_pins=False) if args.config or default else None
    try:
        report = build_report(args.results, pinset, args.expect)
    except OtherPinSet as exc:
        if not default:
            raise
        print(f"pinset report: warning: ./{exc} (./pins.yaml left out: pass -c to name the pin set's file)",
              file=sys.stderr)
        report = build_report(args.results, None, args.expect)
    if target and not report.digest:  # bad input: refused before anything is written
        raise PinsetError("--post: no sim or verify result and no -c pins.yaml, so the pin set (and its "
                          "comment marker) is unknown")
    _write(args, report, printed=not args.markdown and not target)
    status = 0 if report.verdict.ok else 1
    if target:
        assert api_url is not None
        return _post(args, report, target, token, api_url) or status
    return status


def _write(args, report, printed: bool) -> None:
    """--markdown and --json; the report on stdout when it goes nowhere else, else its verdict line."""
    if args.markdown:
        write_text(args.markdown, report.markdown)
    if args.json:
        write_json(args.json, report.to_json())
    if printed:
        sys.stdout.write(report.markdown)
        sys.stdout.flush()
    else:
        print(report.verdict.line().replace("**", ""))


def _post(args, report, target, token: str | None, api_url: str) -> int:
    """--post (or --dry-run): 1 when posting failed (the rendered report kept, its path said), else 0."""
    github = GitHub(token, api_url)
    if args.dry_run:
        sys.stdout.write(describe_dry_run(github.plan(target, report.markdown), token))
        return 0
    try:
        posted = post_report(github, target, report)
    except GitHubError as exc:
        # plain prints: one unwrapped line each, so CI logs can be grepped
        print(f"pinset report: posting to {target} failed: {exc}", file=sys.stderr)
        try:
            print(f"pinset report: the rendered report is in {args.markdown or _keep(args, report)}",
                  file=sys.stderr)
        except (OSError, PinsetError) as keep_error:  # the cache may be unusable too
            print(f"pinset report: the rendered report could not be kept: {keep_error}", file=sys.stderr)
        return 1
    print(f"{posted.action} comment on {target}: {posted.url}")
    return 0


def _keep(args, report) -> str:
    """Posting failed and no --markdown was given: keep the report in the cache, not the user's checkout."""
    path = Store.open(args.cache).dir("reports") / f"report-{report.digest}.md"
    write_text(path, report.markdown)
    return str(path)

