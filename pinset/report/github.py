"""Posting the report as one PR comment per pin set (found again by its hidden marker), via the REST API.

The token is only ever put in the Authorization header of the session; every message, the dry run and
errors show it redacted. HTTP failures become one clear PostError (the command exits 1 and keeps the
rendered report on disk), never a traceback with headers in it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

import requests
import requests.auth

from pinset.errors import PinsetError

DEFAULT_API_URL = "https://api.github.com"
TARGET_RE = re.compile(r"^(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)#(?P<number>[1-9][0-9]*)$")
REDACTED = "***"
MAX_BODY = 65536  # GitHub refuses longer comment bodies (422)
TIMEOUT = 30


class PostError(Exception):
    """Posting failed (HTTP error, rate limit, network): exit 1, the report itself is kept."""


@dataclass(frozen=True)
class Target:
    owner: str
    repo: str
    number: int

    def __str__(self) -> str:
        return f"{self.owner}/{self.repo}#{self.number}"


def parse_target(text: str) -> Target:
    m = TARGET_RE.match(text.strip())
    if not m:
        raise PinsetError(f"--post: {text!r} is not owner/repo#N (e.g. ggml-org/llama.cpp#12345)")
    return Target(m["owner"], m["repo"], int(m["number"]))


class _Bearer(requests.auth.AuthBase):
    """Token auth that also stops requests from swapping in ~/.netrc credentials."""

    def __init__(self, token: str):
        self._token = token

    def __call__(self, r):
        r.headers["Authorization"] = f"Bearer {self._token}"
        return r

    def __repr__(self) -> str:
        return "_Bearer(***)"


def headers(token: str | None, redact: bool = False) -> dict[str, str]:
    out = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
           "User-Agent": "pinset-report"}
    if token:
        out["Authorization"] = f"Bearer {REDACTED if redact else token}"
    return out


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    body: dict | None = None


@dataclass(frozen=True)
class Posted:
    action: str  # "created" | "updated" | "unchanged"
    url: str     # html_url of the comment (or the API url when GitHub gave none)


def describe_dry_run(requests_planned: list[Request], token: str | None) -> str:
    """What --dry-run prints: method, URL, headers (token redacted) and JSON body of each request."""
    out = []
    for req in requests_planned:
        out.append(f"{req.method} {req.url}")
        out += [f"{k}: {v}" for k, v in headers(token, redact=True).items()]
        if req.body is not None:
            out += ["", json.dumps(req.body, indent=2, ensure_ascii=False)]
        if req.method == "POST":
            out.append("(or PATCH .../issues/comments/ID when a comment with the marker exists)")
        out.append("")
    return "\n".join(out)


class GitHub:
    def __init__(self, token: str | None, api_url: str = DEFAULT_API_URL, session: requests.Session | None = None):
        self.api_url = api_url.rstrip("/")
        self._token = token
        self.session = session or requests.Session()
        self.session.headers.update(headers(None))
        if token:
            self.session.auth = _Bearer(token)

    def comments_url(self, t: Target) -> str:
        return f"{self.api_url}/repos/{t.owner}/{t.repo}/issues/{t.number}/comments"

    def comment_url(self, t: Target, comment_id: int) -> str:
        return f"{self.api_url}/repos/{t.owner}/{t.repo}/issues/comments/{comment_id}"

    # --- HTTP ---------------------------------------------------------------------------------
    def _call(self, method: str, url: str, **kw) -> requests.Response:
        try:
            response = self.session.request(method, url, timeout=TIMEOUT, **kw)
        except requests.RequestException as exc:
            raise PostError(f"{method} {url}: {type(exc).__name__}: {self._scrub(str(exc))}") from None
        if response.status_code >= 400:
            raise PostError(self._http_message(method, url, response))
        return response

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, REDACTED) if self._token else text

    def _http_message(self, method: str, url: str, r: requests.Response) -> str:
        try:
            api_message = r.json().get("message", "")
        except ValueError:
            api_message = r.text[:200]
        api_message = self._scrub(str(api_message))
        where = f"{method} {url}: HTTP {r.status_code}"
        remaining = r.headers.get("X-RateLimit-Remaining")
        if r.status_code in (403, 429) and (remaining == "0" or "Retry-After" in r.headers):
            when = ""
            reset = r.headers.get("X-RateLimit-Reset")
            if reset and reset.isdigit():
                when = " until " + datetime.fromtimestamp(int(reset), timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
            elif r.headers.get("Retry-After"):
                when = f" for {r.headers['Retry-After']} s"
            return f"{where}: GitHub rate limit reached; posting is blocked{when} ({api_message})"
        hint = {
            401: "the token in GITHUB_TOKEN was refused (expired or wrong)",
            403: "the token may not comment on this repository (needs issues/pull-requests: write)",
            404: "no such repository or pull request, or the token cannot see it",
            422: "GitHub rejected the comment",
        }.get(r.status_code, "request failed")
        details = ""
        try:
            errors = r.json().get("errors")
            if errors:
                details = " " + self._scrub(json.dumps(errors))[:300]
        except ValueError:
            pass
        return f"{where}: {hint}" + (f" ({api_message})" if api_message else "") + details

    # --- comments -----------------------------------------------------------------------------
    def find_comment(self, t: Target, mark: str) -> dict | None:
        """The first comment on the PR whose body contains the marker (every page is read)."""
        url: str | None = self.comments_url(t)
        params: dict | None = {"per_page": 100}
        while url:
            response = self._call("GET", url, params=params)
            try:
                comments = response.json()
            except ValueError:
                raise PostError(f"GET {url}: GitHub answered with something that is not JSON") from None
            for comment in comments:
                if mark in (comment.get("body") or ""):
                    return comment
            url = response.links.get("next", {}).get("url")
            params = None  # the next link carries its own query
        return None

    def plan(self, t: Target, body: str) -> list[Request]:
        """The requests a post makes, for --dry-run. Contacts nobody: if the listing finds a comment
        with the marker, the POST becomes a PATCH of that comment."""
        return [Request("GET", self.comments_url(t) + "?per_page=100"),
                Request("POST", self.comments_url(t), {"body": body})]

    def post(self, t: Target, mark: str, body: str) -> Posted:
        if mark not in body:
            raise PostError("the report has no pin set marker; refusing to post a comment that cannot be updated later")
        if len(body) > MAX_BODY:
            raise PostError(f"the report is {len(body)} characters, more than GitHub's {MAX_BODY} for a comment; "
                            "post fewer results at once (e.g. one comment per build)")
        existing = self.find_comment(t, mark)
        if existing:
            if existing.get("body") == body:
                return Posted("unchanged", existing.get("html_url") or self.comment_url(t, existing["id"]))
            r = self._call("PATCH", self.comment_url(t, existing["id"]), json={"body": body})
            action = "updated"
        else:
            r = self._call("POST", self.comments_url(t), json={"body": body})
            action = "created"
        try:
            data = r.json()
        except ValueError:
            data = {}
        return Posted(action, data.get("html_url") or data.get("url") or self.comments_url(t))
