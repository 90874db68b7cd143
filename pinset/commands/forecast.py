"""`pinset forecast`: which open upstream PRs will break (fix, carry, move) a pin, before they land."""

from __future__ import annotations

import os

from rich.markup import escape
from rich.table import Table

from pinset.commands.common import add_config_args, open_config
from pinset.commands.paths import OUTPUT_FILE, add_path
from pinset.errors import PinsetError
from pinset.forecast.markdown import ICON, ORDER, forecast_markdown, rebase_line
from pinset.forecast.model import BREAKS, CARRIES, ForecastResult
from pinset.forecast.run import forecast
from pinset.github.client import DEFAULT_API_URL, find_token, parse_api_url, parse_repo, repo_of
from pinset.github.pulls import PullsAPI
from pinset.output import console, write_result

STYLE = {"breaks": "red", "carries": "cyan", "fixes": "green", "moves": "yellow"}


def add_parser(sub):
    p = sub.add_parser(
        "forecast",
        description="List upstream's open PRs (GitHub REST API, every page), fetch their heads from git "
                    "(refs/pull/*/head, one fetch), and for each PR that changes a file some pin changes, merge it "
                    "onto the build (git merge-tree) and simulate the whole pin set on the build and on build+PR. "
                    "Prints per PR what it does to each pin: breaks, fixes, carries, moves. Exit 1 when a PR "
                    "breaks a required pin. Token: $GITHUB_TOKEN, $GH_TOKEN or `gh auth token` (optional; never printed). See docs/forecast.md.")
    add_config_args(p, builds=False)
    p.add_argument("--onto", help="the build the PRs are merged into (default: the newest build of pins.yaml)")
    p.add_argument("--repo", help="OWNER/NAME of upstream on GitHub (default: from a github.com `upstream:`)")
    p.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
                   help="GitHub REST API base URL (default: $GITHUB_API_URL or https://api.github.com)")
    add_path(p, "--json", role=OUTPUT_FILE, help="write the forecast JSON here")
    add_path(p, "--markdown", role=OUTPUT_FILE, help="write the tracking issue's markdown here")
    return p


def run(args) -> int:
    api_url = parse_api_url(args.api_url)
    token = find_token(api_url)
    pinset, store = open_config(args)
    if args.repo:
        repo = parse_repo(args.repo, example="ggml-org/llama.cpp")
    else:
        found = repo_of(pinset.upstream)
        if found is None:
            raise PinsetError(f"{pinset.path}: upstream {pinset.upstream!r} is not a github.com URL: "
                              "name its repository with --repo OWNER/NAME")
        repo = found
    done = forecast(pinset, store, args.onto, repo, PullsAPI(token, api_url),
                    say=lambda line: console.print(f"[dim]{escape(line)}[/]"))
    result = done.result
    console.print(forecast_table(result))
    for pr in result.prs:
        for e in pr.pins_with(BREAKS):
            console.print(f"  [red]#{pr.number} breaks {escape(e.id)}[/]: {escape(e.detail or 'does not apply')}")
            console.print(f"    prepare the fix: {escape(rebase_line(result, pr, e.id))}", soft_wrap=True)
    verdict = "[green]ok[/]: no open PR breaks a required pin" if result.ok \
        else "[red]not ok[/]: an open PR breaks a required pin"
    console.print(verdict)
    write_result(result, args.json, args.markdown, forecast_markdown)
    return 0 if result.ok else 1


def forecast_table(result: ForecastResult) -> Table:
    """The PRs that change a pin's fate, breaking and carrying ones first (ranked within)."""
    table = Table(title=f"pinset forecast: {len(result.prs)} open PRs of {result.repo} onto {result.build}")
    for name in ("PR", "state", "title / URL", "pins"):
        table.add_column(name, overflow="fold")
    judged = sorted((pr for pr in result.prs if pr.pins),
                    key=lambda pr: (not pr.pins_with(BREAKS), not pr.pins_with(CARRIES)))
    for pr in judged:
        pins = ", ".join(f"{ICON[e.effect]} [{STYLE[e.effect]}]{escape(e.id)} {e.effect}[/]"
                         for kind in ORDER for e in pr.pins_with(kind))
        table.add_row(f"#{pr.number}", pr.state, f"{escape(pr.title)}\n[dim]{escape(pr.url)}[/]", pins)
    not_merging = [pr for pr in result.prs if pr.merges is False]
    if not_merging:
        table.add_row("", "", f"[dim]do not merge onto {escape(result.build)}: "
                              f"{', '.join(f'#{pr.number}' for pr in not_merging)}[/]", "")
    return table
