"""`pinset bump`: the pin set moved to a newer build as one commit on a branch, pushed, kept as one PR.

The logic is pinset/bump/ (explicit parameters, nothing printed); this module reads the arguments and the
token (GITHUB_TOKEN, GH_TOKEN or `gh auth token`, as `report --post`: never printed, never written), and says what happened.
"""

from __future__ import annotations

import os
import sys

from pinset.bump import BLOCKED, COMMITTED, CURRENT, DEFAULT_BRANCH, DRY_RUN, HELD, BumpOptions, BumpResult, bump
from pinset.commands.common import add_cache_arg, check_inputs, pins_read
from pinset.commands.paths import INPUT_FILE, OUTPUT_FILE, add_path
from pinset.errors import PinsetError
from pinset.github.client import DEFAULT_API_URL, TOKEN_SOURCES, GitHub, find_token, parse_api_url, parse_repo
from pinset.output import console, err_console, remove_stale, write_json
from pinset.store import Store


def add_parser(sub):
    p = sub.add_parser(
        "bump",
        description="Move the shipped build (the first of pins.yaml's builds) to BUILD (default: what `pinset pick` "
                    "picks among the builds newer than it) as one commit on --branch, made in a temporary worktree "
                    "(your checkout, branch, index and uncommitted files are never touched; the bump starts from "
                    "HEAD). Every required pin must apply on BUILD (else exit 1, nothing committed); every series "
                    "that applies but not exactly is refreshed (as `refresh --write`, with its proof). --push REMOTE "
                    "pushes the branch (force-with-lease on the value read, on that branch only) and, with --repo, "
                    "opens the one pull request of the branch or updates it (token: $GITHUB_TOKEN, $GH_TOKEN or "
                    "`gh auth token`). A bump rewrites only commits it made (trailer `Pinset-Bump:`): a --branch, local "
                    "or remote, holding another commit is never moved or pushed (exit 1, said in one line and in the "
                    "pull request; see --overwrite-branch). Exit 0 when the branch and PR are up to date, 1 when the "
                    "pin set cannot move or the branch is held, 2 on bad input.")
    add_path(p, "results", role=INPUT_FILE, nargs="*", help="result files of this run (sim, verify, kld, bench) for "
                                                            "the PR body, as `pinset report` takes them")
    add_path(p, "-c", "--config", role=INPUT_FILE, derived=pins_read, default="pins.yaml",
             help="pin set file (default: pins.yaml)")
    add_cache_arg(p)
    p.add_argument("--onto", metavar="BUILD", help="the build to move to (default: pick's among the newer builds)")
    p.add_argument("--branch", default=DEFAULT_BRANCH, help=f"the branch of the bump commit (default: {DEFAULT_BRANCH})")
    p.add_argument("--push", metavar="REMOTE", help="push the branch to this git remote")
    p.add_argument("--repo", metavar="OWNER/NAME", help="with --push: open or update the pull request in this repository")
    p.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
                   help="GitHub REST API base URL (default: $GITHUB_API_URL or https://api.github.com)")
    add_path(p, "--json", role=OUTPUT_FILE, help="write what happened as JSON here (`-`: standard output): outcome, "
                                                 "old and new build, branch, commit, pull request URL (docs/nightly.md)")
    p.add_argument("--overwrite-branch", action="store_true",
                   help="replace --branch (local and on the remote) even though it holds commits pinset did not make "
                        "(a person's fix pushed onto it); without it such a branch is never moved (exit 1)")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would be committed (pins.yaml diff, refreshed files) and the PR body; "
                        "no branch moves, nothing is pushed or sent")
    return p


def run(args) -> int:
    if args.repo and not args.push:
        raise PinsetError("--repo needs --push REMOTE (the pull request's branch must be on GitHub first)")
    check_inputs({f"result file {n + 1}": path for n, path in enumerate(args.results)})
    repo = parse_repo(args.repo) if args.repo else None
    github = None
    if repo:
        api_url = parse_api_url(args.api_url)
        token = find_token(api_url)
        if not token and not args.dry_run:
            raise PinsetError(f"--repo needs a token in {TOKEN_SOURCES} (or use --dry-run)")
        github = GitHub(token, api_url)
    remove_stale([args.json])   # an earlier run's file must not stand in for this one when it fails
    options = BumpOptions(args.onto, args.branch, args.push, repo, args.dry_run, list(args.results),
                          overwrite_branch=args.overwrite_branch)
    result = bump(args.config, Store.open(args.cache), options, github,
                  say=lambda text: err_console.print(f"[dim]{text}[/]", soft_wrap=True),
                  warn=lambda text: err_console.print(f"[yellow]warning:[/] {text}", soft_wrap=True))
    show(result)
    if args.json:
        write_json(args.json, result.to_json())
    return result.exit_code


def show(result: BumpResult) -> None:
    """What happened, one line each (plain prints where a line is for grepping in CI logs)."""
    if result.outcome == HELD:
        print(f"stopped: {result.held_line()}")
        if result.pull:
            print(f"{result.pull.action} comment on the pull request: {result.pull.url}")
        if result.note:
            print(result.note)
        return
    if result.outcome == BLOCKED:
        console.print(f"[red]the pin set cannot move to {result.new}[/]: nothing committed, nothing pushed", soft_wrap=True)
        for f in result.failing:
            print(f"{f.pin} on {result.new}: {f.status}; {f.fix}")
        return
    if result.outcome == CURRENT:
        console.print(f"up to date: {result.note}", soft_wrap=True)
        return
    for r in result.refreshed:
        console.print(f"[bold]{r.pin}[/]: {r.mode} -> exact on {result.new} ({len(r.files)} patches)", soft_wrap=True)
    commit = (result.commit or "")[:12]
    if result.outcome == DRY_RUN:
        print(f"would commit on {result.branch} ({result.old} -> {result.new}):")
        sys.stdout.write(result.diff if result.diff.endswith("\n") else result.diff + "\n")
        for r in result.refreshed:
            print(f"refreshed {r.pin}: {', '.join(r.files)}")
        print(f"\npull request title: {result.title}\npull request body:\n")
        sys.stdout.write(result.body)
        if result.requests:
            print("\nrequests:\n")
            sys.stdout.write(result.requests)
        print("nothing committed on a branch, nothing pushed or sent (--dry-run)")
        return
    moved = "moved" if result.branch_moved else "unchanged"
    print(f"{result.branch} at {commit} ({result.old} -> {result.new}; branch {moved})")
    if result.outcome == COMMITTED:
        return
    print(f"pushed {result.branch}" if result.pushed else f"{result.branch} on the remote is up to date")
    if result.pull:
        print(f"{result.pull.action} pull request: {result.pull.url}")
