"""PR state for the verbs that simulate (sim, bump): asked once per run, before the pins are applied, so a
`skip-unless-open` pin whose PR is merged or closed is left out (pinset/sim/prs.py, pinset/github/pr_state.py)."""

from __future__ import annotations

import os

from pinset.config.schema import PinSet
from pinset.sim.prs import PrStates


def add_pr_state_arg(parser) -> None:
    parser.add_argument("--no-pr-state", action="store_true",
                        help="do not ask GitHub for the PR pins' pull requests (state unknown: applied as if open)")


def ask_pr_states(pinset: PinSet, args) -> PrStates:
    """Every PR pin's pull request (token: $GITHUB_TOKEN, else $GH_TOKEN; API: $GITHUB_API_URL); a state that
    could not be asked is `unknown`, and `note` says why: the verb says it once with its result (never before
    the run, whose failure is one line)."""
    if getattr(args, "no_pr_state", False) or not any(pin.pr is not None for pin in pinset.pins):
        return PrStates([])   # no PR pin: no token asked for (gh), no GitHub client imported
    from pinset.github.client import DEFAULT_API_URL
    from pinset.github.pr_state import env_token, pr_states

    return pr_states(pinset, env_token(), os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL)
