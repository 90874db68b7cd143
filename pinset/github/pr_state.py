"""Asking GitHub for the state of every PR pin's pull request (pinset/sim/prs.py holds the answer).

One GraphQL request for all pins (one aliased `repository { pullRequest }` per pin: state, draft, merged,
review decision, head, the last 100 commits); when GraphQL fails as a whole (an error answer, a server without
it), one REST request per pin (`GET /repos/O/R/pulls/N`: state, draft, merged, head; no review decision, and
how far behind is known only when the pin is the head). The client is `report --post`'s (github/client.py):
the token goes to the API origin only, never printed or written. Nothing here fails a run: without a token,
with the API host unreachable (checked within a second first, so an offline run is not slowed down) or an
answer that does not read, the states are `unknown` and one line says why.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from pinset import http
from pinset.config.schema import PinSet, PinSpec
from pinset.errors import PinsetError
from pinset.github.client import GitHub
from pinset.sim.prs import CLOSED, DRAFT, MERGED, OPEN, REVIEWS, UNKNOWN, PrState, PrStates, unknown

REACH_TIMEOUT = 1.0     # s to resolve and connect to the API host before anything is asked
CONNECT_TIMEOUT = 2.0   # s, per request once the host answered
BUDGET = 20.0           # s for every PR state request of a run together
COMMITS = 100           # the PR's last commits GraphQL lists (where the pin is among them)
TOKEN_HELP = "set GITHUB_TOKEN or GH_TOKEN, or log in with gh"


def graphql_url(api_url: str) -> str:
    """GitHub's GraphQL endpoint beside a REST base: api.github.com/graphql, or HOST/api/graphql for
    GitHub Enterprise's HOST/api/v3."""
    base = api_url.rstrip("/")
    return base[: -len("/v3")] + "/graphql" if base.endswith("/api/v3") else base + "/graphql"


def _reachable(api_url: str, timeout: float = REACH_TIMEOUT) -> str | None:
    """None when the API host resolves and takes a connection within `timeout`; else why not, in words."""
    parts = urlsplit(api_url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(None)
        except socket.gaierror:
            outcome.append(f"cannot resolve {host}")
        except ConnectionRefusedError:
            outcome.append(f"{host} port {port} refused the connection")
        except OSError as exc:
            outcome.append(f"cannot reach {host} port {port} ({(exc.strerror or type(exc).__name__).lower()})")

    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        return f"{host} did not answer within {timeout:g} s"
    return outcome[0]


class PrClient(GitHub):
    """report --post's client, asking without retries under short timeouts: PR state is a note, never worth
    holding a run for."""

    def __init__(self, token: str | None, api_url: str):
        super().__init__(token, api_url, session=http.session(0))
        self.restart_deadline(BUDGET)
        request = self.session.request

        def short(method, url, **kwargs):
            kwargs["timeout"] = (CONNECT_TIMEOUT, http.READ_TIMEOUT)
            return request(method, url, **kwargs)

        self.session.request = short  # type: ignore[method-assign,assignment]
        self.requests_made = 0

    def ask(self, method: str, url: str, body: dict | None = None):
        self.requests_made += 1
        answer = self._once(method, url, body, None)
        return self._json(answer)


def _pr_pins(pinset: PinSet) -> list[PinSpec]:
    return [p for p in pinset.pins if p.pr is not None]


def pr_states(pinset: PinSet, token: str | None, api_url: str,
              client: Callable[[str | None, str], PrClient] = PrClient) -> PrStates:
    """The state of every PR pin's pull request (empty when the set has none); never raises for GitHub's sake."""
    pins = _pr_pins(pinset)
    if not pins:
        return PrStates([])
    if not token:
        return unknown(pinset, f"PR state unknown: no token ({TOKEN_HELP}); PR pins applied as if open")
    try:
        gh = client(token, api_url)
    except PinsetError as exc:   # a malformed --api-url / GITHUB_API_URL
        return unknown(pinset, f"PR state unknown: {exc}")
    if (why := _reachable(gh.api_url)) is not None:
        return unknown(pinset, f"PR state unknown: {why}; PR pins applied as if open")
    try:
        return PrStates(_graphql(gh, pins), None, "graphql")
    except Exception as exc:  # noqa: BLE001 - any failure of GraphQL falls back to REST, which says its own
        graphql_failed = gh.clean(getattr(exc, "message", None) or exc, 200)
    states = _rest(gh, pins)
    note = None
    if all(s.state == UNKNOWN for s in states):
        note = f"PR state unknown: GraphQL failed ({graphql_failed}) and so did REST ({states[0].why})"
    return PrStates(states, note, "rest")


# --- GraphQL --------------------------------------------------------------------------------
_FIELDS = (f"state isDraft merged reviewDecision headRefOid commits(last: {COMMITS}) "
           "{ totalCount nodes { commit { oid } } }")


def query(pins: list[PinSpec]) -> str:
    """One query, one alias per pin (owner, name and number are the pins.yaml reader's checked values)."""
    parts = []
    for i, pin in enumerate(pins):
        assert pin.pr is not None and re.fullmatch(r"[\w.-]+", pin.pr.owner + pin.pr.repo)
        parts.append(f'p{i}: repository(owner: "{pin.pr.owner}", name: "{pin.pr.repo}") '
                     f"{{ pullRequest(number: {pin.pr.number}) {{ {_FIELDS} }} }}")
    return "query { " + " ".join(parts) + " }"


def _graphql(gh: PrClient, pins: list[PinSpec]) -> list[PrState]:
    data = gh.ask("POST", graphql_url(gh.api_url), {"query": query(pins)})
    if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
        errors = data.get("errors") if isinstance(data, dict) else None
        said = errors[0].get("message") if isinstance(errors, list) and errors and isinstance(errors[0], dict) else None
        raise PinsetError(f"GraphQL answered no data ({said or 'no message'})")
    answers = data["data"]
    out = []
    for i, pin in enumerate(pins):
        repo = answers.get(f"p{i}")
        pr = repo.get("pullRequest") if isinstance(repo, dict) else None
        out.append(_from_graphql(pin, pr) if isinstance(pr, dict) else
                   _unknown(pin, "no such pull request, or the token cannot see it"))
    return out


def _from_graphql(pin: PinSpec, pr: dict) -> PrState:
    raw = pr.get("state")
    if raw not in ("OPEN", "CLOSED", "MERGED"):
        return _unknown(pin, f"GraphQL gave no state ({raw!r})")
    state = MERGED if raw == "MERGED" or pr.get("merged") is True else CLOSED if raw == "CLOSED" else \
        DRAFT if pr.get("isDraft") is True else OPEN
    head = pr.get("headRefOid") if isinstance(pr.get("headRefOid"), str) else None
    commits: dict = pr["commits"] if isinstance(pr.get("commits"), dict) else {}
    oids = [n["commit"]["oid"] for n in commits.get("nodes") or []
            if isinstance(n, dict) and isinstance(n.get("commit"), dict) and isinstance(n["commit"].get("oid"), str)]
    total = commits.get("totalCount")
    behind: int | None = None
    on_head: bool | None = None
    pinned = pin.commit or ""
    if head == pinned:
        behind, on_head = 0, True
    elif pinned in oids:
        behind, on_head = len(oids) - 1 - oids.index(pinned), True
    elif isinstance(total, int) and total <= len(oids):   # the whole list was seen: the pin is not on the PR now
        on_head = False
    review = pr.get("reviewDecision") if pr.get("reviewDecision") in REVIEWS else None
    return _state(pin, state, head, behind, on_head, review)


# --- REST -----------------------------------------------------------------------------------
def _rest(gh: PrClient, pins: list[PinSpec]) -> list[PrState]:
    out = []
    for pin in pins:
        assert pin.pr is not None
        url = f"{gh.api_url}/repos/{pin.pr.owner}/{pin.pr.repo}/pulls/{pin.pr.number}"
        try:
            pr = gh.ask("GET", url)
        except Exception as exc:  # noqa: BLE001 - one pin's failure leaves that pin unknown
            out.append(_unknown(pin, gh.clean(getattr(exc, "message", None) or exc, 200)))
            continue
        if not isinstance(pr, dict) or pr.get("state") not in ("open", "closed"):
            out.append(_unknown(pin, "the REST answer is no pull request"))
            continue
        merged = pr.get("merged") is True or bool(pr.get("merged_at"))
        state = MERGED if merged else CLOSED if pr["state"] == "closed" else DRAFT if pr.get("draft") is True else OPEN
        head_obj: dict = pr["head"] if isinstance(pr.get("head"), dict) else {}
        head = head_obj.get("sha") if isinstance(head_obj.get("sha"), str) else None
        at_head = head is not None and head == pin.commit
        out.append(_state(pin, state, head, 0 if at_head else None, True if at_head else None, None))
    return out


def _state(pin: PinSpec, state: str, head, behind, on_head, review) -> PrState:
    assert pin.pr is not None
    skipped = pin.skip_unless_open and state in (CLOSED, MERGED)
    return PrState(pin.id, pin.pr.url, pin.commit or "", state, pin.required, head, behind, on_head, review, skipped)


def _unknown(pin: PinSpec, why: str) -> PrState:
    assert pin.pr is not None
    return PrState(pin.id, pin.pr.url, pin.commit or "", UNKNOWN, pin.required, why=why)


def env_token() -> str | None:
    """The token PR state is asked with, from report --post's sources (github.find_token: GITHUB_TOKEN, GH_TOKEN,
    then `gh auth token`); None when none holds one or it cannot go into a header (then the state is unknown, as
    without a token)."""
    from pinset.github.client import find_token

    try:
        return find_token()
    except PinsetError:
        return None
