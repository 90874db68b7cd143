"""Posting the report as one PR comment per pin set (found again by its hidden marker), and opening or
updating the one pull request of a branch (`pinset bump`), via the REST API.

The token goes only to the API origin (scheme, host and port of the API URL): a pagination link or a
redirect to anywhere else is refused, since following it would either leak the token or let another
server decide which comment we edit. Redirects are followed by hand so that this rule is ours: requests
strips the Authorization header on a host change but keeps it on an http -> https change of the same
host, and older versions kept it on any change but the host. Every message shows the token redacted and
every failure - HTTP error, malformed answer, network - is one GitHubError line (the command exits 1 and
keeps the rendered report), never a traceback.

HTTP goes through pinset.http's one session: 5xx/429 answers and dropped connections of GET and PATCH (a whole
body: idempotent) are retried there, with a doubling backoff and Retry-After; what only GitHub's API says (a
403 rate limit with its reset time) and the POST of the comment (retried only after listing the comments again,
so a POST whose answer was lost is not posted twice) are retried here. Every call has a total deadline
(REQUEST_DEADLINE, its retries included) and the whole post one more (POST_DEADLINE): a server that answers
and then trickles a byte a second cannot hold the job.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from http.client import HTTPException
from types import EllipsisType
from typing import Callable
from urllib.parse import urljoin, urlsplit

import requests
import requests.auth

from pinset import http
from pinset.errors import GitHubError, PinsetError
from pinset.redact import redact

DEFAULT_API_URL = "https://api.github.com"
REPO_RE = re.compile(r"^(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)$")
_GITHUB_URL_RE = re.compile(r"^(?:https?://|ssh://git@|git://|git@)github\.com[/:](?P<owner>[A-Za-z0-9_.-]+)/"
                            r"(?P<name>[A-Za-z0-9_.-]+?)(?:\.git)?/?$")
TARGET_RE = re.compile(r"^(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)#(?P<number>[1-9][0-9]*)$")
REDACTED = "***"
MAX_BODY = 65536  # GitHub refuses longer comment bodies (422)
TIMEOUT = (15, 30)     # s to connect, s of silence while reading
REQUEST_DEADLINE = 120.0  # s per call, its retries included
POST_DEADLINE = 600.0     # s for the whole post (listing, who-am-I, create or update)
BACKOFF = 2.0          # s before the first retry, doubling
MAX_TRIES = 4          # per call: the first try and up to three retries
MAX_WAIT = 60.0        # longest single wait before a retry (s); a later rate-limit reset means giving up
MAX_TOTAL_WAIT = 180.0  # all waits of one call together (s)
MAX_REDIRECTS = 5
MAX_PAGES = 1000       # of 100 comments; a next link that never ends is a broken server
MAX_ANSWER = 64 << 20  # bytes; a page of 100 comments of 65536 characters fits
REDIRECTS = (301, 302, 303, 307, 308)
_default_sleep = time.sleep  # tests swap it to count waits instead of waiting


class _Transient(Exception):
    """A failure worth retrying (5xx, network, rate limit); `wait` is what the server asked for."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.message, self.wait = message, wait


@dataclass(frozen=True)
class Target:
    owner: str
    repo: str
    number: int

    def __str__(self) -> str:
        return f"{self.owner}/{self.repo}#{self.number}"


@dataclass(frozen=True)
class Repo:
    owner: str
    repo: str

    def __str__(self) -> str:
        return f"{self.owner}/{self.repo}"

    def __iter__(self):
        """owner, name = repo (forecast and the PR-state query unpack it)."""
        return iter((self.owner, self.repo))


def parse_repo(text: str, flag: str = "--repo", example: str = "unslothai/llama.cpp") -> Repo:
    """OWNER/NAME as the user wrote it (the one parser of a repository name); bad input names the flag."""
    m = REPO_RE.match(text.strip())
    if not m or m["repo"] in (".", ".."):
        raise PinsetError(f"{flag}: {text!r} is not OWNER/NAME (e.g. {example})")
    return Repo(m["owner"], m["repo"])


def repo_of(upstream: str | None) -> Repo | None:
    """OWNER/NAME of a github.com upstream URL; None for a local path, a mirror or another host."""
    m = _GITHUB_URL_RE.match((upstream or "").strip())
    return Repo(m["owner"], m["name"]) if m else None


def clean_token(raw: str | None, name: str = "GITHUB_TOKEN") -> str | None:
    """A token (from `name`) without surrounding whitespace (a token read from a file often ends in a newline);
    None when empty. Anything else that cannot go into a header is refused without echoing the token."""
    token = (raw or "").strip()
    if not token:
        return None
    bad = next((i for i, ch in enumerate(token) if not "!" <= ch <= "~"), None)
    if bad is not None:
        raise PinsetError(f"{name} has a space, control or non-ASCII character at position {bad + 1} "
                          f"of {len(token)}; refusing to send it")
    return token


TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")   # read in this order, then `gh auth token`
TOKEN_SOURCES = "GITHUB_TOKEN, GH_TOKEN or `gh auth token`"   # how messages name them
GH_TIMEOUT = 10.0   # s for `gh auth token` (it reads a file or the system keyring; it asks no server)


def find_token(api_url: str = DEFAULT_API_URL, environ=None) -> str | None:
    """The token of the first source that has one: GITHUB_TOKEN, GH_TOKEN (the gh CLI's variable), then the gh
    CLI's stored login (`gh auth token --hostname HOST`, HOST the API's: github.com for api.github.com), when gh is
    installed. A token from gh is added to the secrets every output is redacted of (pinset.redact), like the
    variables' values; it goes to the API origin only, as every token does."""
    import os
    import shutil

    from pinset import runner
    from pinset.redact import add_secret

    env = os.environ if environ is None else environ
    for name in TOKEN_VARIABLES:
        token = clean_token(env.get(name), name)
        if token:
            return token
    gh = shutil.which("gh", path=env.get("PATH"))
    if gh is None:
        return None
    host = (urlsplit(api_url).hostname or "github.com").lower()
    host = "github.com" if host == "api.github.com" else host
    done = runner.run([gh, "auth", "token", "--hostname", host], timeout=GH_TIMEOUT,
                      env={"GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1"})
    if not done.ok:   # not logged in to that host (gh says so on stderr): no token, as without gh
        return None
    token = done.stdout.strip()
    if token:
        add_secret(token)
    return clean_token(token, "`gh auth token`")


def parse_api_url(text: str) -> str:
    """The API base URL, checked: http(s), a host, no credentials, query or fragment (it is printed)."""
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        parts = None
    if (not parts or parts.scheme not in ("http", "https") or not parts.hostname or parts.username is not None
            or parts.password is not None or parts.query or parts.fragment):
        shown = re.sub(r"//[^/]*@", "//...@", re.split(r"[?#]", text, maxsplit=1)[0])  # may hold a secret
        raise PinsetError(f"--api-url / GITHUB_API_URL: {_one_line(shown, 200)!r} is not an http(s) URL "
                          "of the form https://host[:port][/path] (no user:password@, ?query or #fragment)")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise PinsetError(f"--api-url / GITHUB_API_URL: {_one_line(text.strip(), 200)!r} is plain http: the token "
                          "would cross the network unencrypted (use https://; http:// only to a server on this "
                          "machine, e.g. a test server on 127.0.0.1)")
    return text.strip().rstrip("/")


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) with the default port filled in; None for a URL that has none."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return parts.scheme.lower(), parts.hostname.lower(), port


def _one_line(text: str, limit: int = 300) -> str:
    """Server-provided text made printable on one line (no control characters, bounded length)."""
    flat = re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+", " ", str(text)).strip()
    return flat if len(flat) <= limit else flat[:limit] + "..."


def kind_of(value) -> str:
    """How a JSON value reads in a message ("a list", "a string"...)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    kinds: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return kinds.get(type(value), "a number")


def parse_target(text: str) -> Target:
    m = TARGET_RE.match(text.strip())
    if not m:
        raise PinsetError(f"--post: {text!r} is not owner/repo#N (e.g. ggml-org/llama.cpp#12345)")
    return Target(m["owner"], m["repo"], int(m["number"]))


class _Bearer(requests.auth.AuthBase):
    """Token auth that also stops requests from swapping in ~/.netrc credentials."""

    def __init__(self, token: str | None):
        self._token = token

    def __call__(self, r):
        if self._token:
            r.headers["Authorization"] = f"Bearer {self._token}"
        return r

    def __repr__(self) -> str:
        return "_Bearer(***)"


def headers(token: str | None = None) -> dict[str, str]:
    """The headers of every request; with a token, the Authorization one as --dry-run shows it (redacted:
    only _Bearer ever writes the real token, into the request itself)."""
    out = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
           "User-Agent": "pinset-report"}
    if token:
        out["Authorization"] = f"Bearer {REDACTED}"
    return out


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    body: dict | None = None


@dataclass(frozen=True)
class Answer:
    """A 2xx answer, read whole (and bounded) while the connection was open."""
    method: str
    url: str
    status: int
    content: bytes
    next_url: str | None


@dataclass(frozen=True)
class Posted:
    action: str  # "created" | "updated" | "unchanged"
    url: str     # html_url of the comment (or the API url when GitHub gave none)


COMMENT_NOTE = ("(or PATCH .../issues/comments/ID when a comment of the token's user with the marker exists; "
                "GET .../user first tells whose comments those are)")
PULL_NOTE = "(or PATCH .../pulls/N of title and body when the listing finds the branch's open pull request)"


def describe_dry_run(requests_planned: list[Request], token: str | None, note: str = COMMENT_NOTE) -> str:
    """What --dry-run prints: method, URL, headers (token redacted) and JSON body of each request; `note`
    after the POST says what it may become."""
    out = []
    for req in requests_planned:
        out.append(f"{req.method} {req.url}")
        out += [f"{k}: {v}" for k, v in headers(token).items()]
        if req.body is not None:
            out += ["", json.dumps(req.body, indent=2, ensure_ascii=False)]
        if req.method == "POST":
            out.append(note)
        out.append("")
    return "\n".join(out)


class GitHub:
    def __init__(self, token: str | None, api_url: str = DEFAULT_API_URL, session: requests.Session | None = None,
                 sleep: Callable[[float], None] | None = None, clock: Callable[[], float] | None = None):
        self.api_url = parse_api_url(api_url)
        self._origin = origin(self.api_url)
        self._token = token
        self._sleep = sleep or _default_sleep
        self.session = session or http.session(MAX_TRIES - 1, methods=http.IDEMPOTENT | {"PATCH"}, backoff=BACKOFF,
                                               sleep=lambda s: self._sleep(s))
        self.session.headers.update(headers())
        self._clock = clock or time.time
        self._ends = time.monotonic() + POST_DEADLINE
        self._login: str | None | EllipsisType = ...  # not asked yet (see whoami)

    def restart_deadline(self, seconds: float = POST_DEADLINE) -> None:
        """A new total deadline, `seconds` from now, for the calls still to come (forecast restarts it after its
        git work; the PR-state query keeps to its own short budget)."""
        self._ends = time.monotonic() + seconds

    def comments_url(self, t: Target) -> str:
        return f"{self.api_url}/repos/{t.owner}/{t.repo}/issues/{t.number}/comments"

    def comment_url(self, t: Target, comment_id: int) -> str:
        return f"{self.api_url}/repos/{t.owner}/{t.repo}/issues/comments/{comment_id}"

    @property
    def has_token(self) -> bool:
        return bool(self._token)

    def pulls_url(self, r: Repo) -> str:
        return f"{self.api_url}/repos/{r.owner}/{r.repo}/pulls"

    # --- HTTP ---------------------------------------------------------------------------------
    def call(self, method: str, url: str, json_body: dict | None = None, params: dict | None = None,
              accept: tuple[int, ...] = ()) -> Answer:
        """An idempotent call (GET, or PATCH of a whole body): the session retries 5xx, 429 and dropped
        connections, this a rate limit that names its reset; an answer with a status in `accept` is returned
        like a 2xx one (unless it is a rate limit)."""
        return self._retrying(lambda: self._once(method, url, json_body, params, accept))

    def _retrying(self, attempt: Callable):
        """attempt() until it returns; a _Transient failure (a rate limit; a failed POST, listed again first) is
        retried after the wait the server asked for (Retry-After, rate-limit reset) or a doubling backoff,
        within MAX_TRIES, MAX_TOTAL_WAIT and the post's deadline."""
        waited, tries = 0.0, 0
        while True:
            tries += 1
            try:
                return attempt()
            except _Transient as exc:
                wait = exc.wait if exc.wait is not None else 2.0 ** tries
                if tries == MAX_TRIES or wait > MAX_WAIT or waited + wait > MAX_TOTAL_WAIT \
                        or time.monotonic() + wait > self._ends:
                    raise GitHubError(exc.message + (f" (gave up after {tries} tries)" if tries > 1 else "")) from None
                self._sleep(wait)
                waited += wait

    def _once(self, method: str, url: str, json_body: dict | None, params: dict | None,
              accept: tuple[int, ...] = ()) -> Answer:
        """One request, following redirects by hand within the API origin; raises GitHubError or _Transient."""
        for _ in range(MAX_REDIRECTS + 1):
            self._check_origin(method, url, "URL")
            shown = self.clean(url, 300)  # a next link or redirect came from the server
            left = self._ends - time.monotonic()
            if left <= 0:
                raise GitHubError(f"{method} {shown}: the post ran past its deadline of {POST_DEADLINE:g} s")
            try:
                with http.deadline(min(REQUEST_DEADLINE, left), f"{method} {shown}"), \
                        self.session.request(method, url, params=params, json=json_body, timeout=TIMEOUT,
                                             allow_redirects=False, stream=True, auth=_Bearer(self._token)) as r:
                    status, reply_headers = r.status_code, r.headers
                    content = self._read(r, method, shown)
                    links = r.links
                    sent_url = r.url
                    retries = getattr(getattr(r.raw, "retries", None), "history", ())
            except http.DeadlineExceeded as exc:  # a slow or trickling server: not worth another try
                raise GitHubError(self.clean(exc)) from None
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                    HTTPException) as exc:
                said = self.clean(http.failure(exc, url))
                if http.unreachable(exc):   # no network, nothing listening: one line now, never a retry
                    raise GitHubError(f"{method} {shown}: {said}") from None
                raise _Transient(f"{method} {shown}: {said}") from None
            except (requests.RequestException, OSError, ValueError) as exc:
                raise GitHubError(f"{method} {shown}: {self.clean(http.failure(exc, url))}") from None
            if status in REDIRECTS:
                location = reply_headers.get("Location")
                if not location:
                    raise GitHubError(f"{method} {shown}: HTTP {status} redirect without a Location")
                url, params = urljoin(sent_url, location), None
                self._check_origin(method, url, f"HTTP {status} redirect")
                continue
            if 200 <= status < 300 or (status in accept and not self._rate_limited(
                    status, reply_headers, content[:2000].decode("utf-8", "replace"))):
                nxt = links.get("next", {}).get("url")
                return Answer(method, self.clean(sent_url, 300), status, content,
                              urljoin(sent_url, nxt) if nxt else None)
            self._fail(method, shown, status, reply_headers, content, tries=len(retries) + 1)
        raise GitHubError(f"{method} {self.clean(url, 300)}: more than {MAX_REDIRECTS} redirects")

    def _check_origin(self, method: str, url: str, what: str) -> None:
        if origin(url) != self._origin:
            raise GitHubError(f"{method}: {what} {self.clean(url, 200)} is not on the API origin "
                            f"{self.api_url}; not following it (the token goes to the API only)")

    def _read(self, r: requests.Response, method: str, url: str) -> bytes:
        chunks, size = [], 0
        for chunk in r.iter_content(1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER:
                raise GitHubError(f"{method} {url}: GitHub's answer is larger than {MAX_ANSWER >> 20} MiB")
        return b"".join(chunks)

    def unexpected(self, exc: Exception) -> GitHubError:
        """A failure the client did not foresee, as one redacted line (never a traceback with headers)."""
        return GitHubError(f"unexpected {type(exc).__name__}: {self.clean(exc)}")

    def clean(self, text, limit: int = 300) -> str:
        """Any text that may reach the user: token redacted, one line, bounded."""
        text = redact(str(text), (self._token,) if self._token else ())
        return _one_line(text, limit)

    def _fail(self, method: str, url: str, status: int, reply_headers, content: bytes, tries: int = 1):
        """Raise the error for a non-2xx answer: _Transient when a retry here may succeed (a rate limit; a
        failed POST, which the session does not retry); `tries`: how many the session made."""
        data = _loads(content)
        api_message = data.get("message") if isinstance(data, dict) else None
        if not isinstance(api_message, str):
            api_message = "" if data is not None else content[:200].decode("utf-8", "replace")
        api_message = self.clean(api_message, 200)
        where = f"{method} {url}: HTTP {status}"
        if self._rate_limited(status, reply_headers, api_message):
            wait, when = self._rate_limit_wait(reply_headers)
            message = f"{where}: GitHub rate limit reached; posting is blocked{when} ({api_message})"
            raise _Transient(message, wait)
        if status >= 500:
            message = f"{where}: GitHub failed" + (f" ({api_message})" if api_message else "")
            if method == "POST":
                raise _Transient(message, _seconds(reply_headers.get("Retry-After"), self._clock()))
            raise GitHubError(message + (f" (gave up after {tries} tries)" if tries > 1 else ""))
        hint = {
            401: "the token was refused (expired or wrong)",
            403: "the token may not comment on this repository (needs issues/pull-requests: write)",
            404: "no such repository or pull request, or the token cannot see it",
            422: "GitHub rejected the comment",
        }.get(status, "request failed")
        errors = data.get("errors") if isinstance(data, dict) else None
        details = " " + self.clean(json.dumps(errors), 300) if errors else ""
        raise GitHubError(f"{where}: {hint}" + (f" ({api_message})" if api_message else "") + details)

    @staticmethod
    def _rate_limited(status: int, reply_headers, api_message: str) -> bool:
        if status == 429:
            return True
        return status == 403 and (reply_headers.get("X-RateLimit-Remaining") == "0" or "Retry-After" in reply_headers
                                  or "rate limit" in api_message.lower())

    def _rate_limit_wait(self, reply_headers) -> tuple[float, str]:
        """(seconds to wait, " for N s" / " until <time>") from Retry-After, else X-RateLimit-Reset,
        else GitHub's advice for a secondary limit without either: one minute."""
        now = self._clock()
        retry_after = _seconds(reply_headers.get("Retry-After"), now)
        if retry_after is not None:
            return retry_after, f" for {retry_after:.0f} s"
        reset = reply_headers.get("X-RateLimit-Reset", "")
        if reset.isdigit() and len(reset) < 12:
            when = datetime.fromtimestamp(int(reset), timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
            return max(int(reset) - now, 0) + 1, f" until {when}"
        return 60.0, ""

    def _json(self, answer: Answer):
        data = _loads(answer.content)
        if data is None and answer.content.strip() != b"null":
            shown = self.clean(answer.content[:80].decode("utf-8", "replace"), 80) or "an empty body"
            raise GitHubError(f"{answer.method} {answer.url}: HTTP {answer.status} but GitHub's answer is not JSON "
                            f"({shown})")
        return data

    # --- comments -----------------------------------------------------------------------------
    def whoami(self) -> str | None:
        """The login the token comments as, from GET /user; None when the token may not ask (GitHub Actions'
        GITHUB_TOKEN and other app installation tokens answer 403, some GitHub Enterprise servers 404): its
        comments are then the ones by a bot."""
        if self._login is ...:
            answer = self.call("GET", f"{self.api_url}/user", accept=(403, 404))
            data = self._json(answer) if answer.status == 200 else {}
            login = data.get("login") if isinstance(data, dict) else None
            if answer.status == 200 and not (isinstance(login, str) and login):
                raise GitHubError(f"GET {answer.url}: expected the token's user (an object with a login), GitHub "
                                f"answered {kind_of(data)}")
            self._login = login
        return self._login

    def _ours(self, comment: dict) -> bool:
        """A comment this token wrote: by its user, or by a bot when the token's user cannot be asked. Another
        user's comment that carries the marker (a copy, a quote, a forgery) is never edited: that would fail
        (403) or, with a maintainer's token, overwrite that user's words."""
        user = comment.get("user")
        if not isinstance(user, dict):
            return False
        login = self.whoami()
        return user.get("login") == login if login is not None else user.get("type") == "Bot"

    def pages(self, url: str, params: dict | None, what: str):
        """The items of a listing, every page (next links followed within the API origin, a loop refused)."""
        next_url: str | None = url
        seen: set[str] = set()
        while next_url:
            if next_url in seen or len(seen) >= MAX_PAGES:
                raise GitHubError(f"GET {self.clean(next_url)}: the {what} pages do not end (a next link seen before, "
                                f"or more than {MAX_PAGES} pages)")
            seen.add(next_url)
            answer = self.call("GET", next_url, params=params)
            items = self._json(answer)
            if not isinstance(items, list):
                raise GitHubError(f"GET {answer.url}: expected a list of {what}s, GitHub answered {kind_of(items)}")
            for item in items:
                yield answer, item
            next_url = answer.next_url
            params = None  # the next link carries its own query

    def find_comment(self, t: Target, mark: str) -> dict | None:
        """The first comment on the PR by this token's user whose body contains the marker (every page is read)."""
        for answer, comment in self.pages(self.comments_url(t), {"per_page": 100}, "comment"):
            if not (isinstance(comment, dict) and _is_id(comment.get("id"))
                    and isinstance(comment.get("body") or "", str)):
                raise GitHubError(f"GET {answer.url}: expected comments (objects with an id and a body), "
                                f"GitHub answered {kind_of(comment)} in the list")
            if mark in (comment.get("body") or "") and self._ours(comment):
                return comment
        return None

    def plan(self, t: Target, body: str) -> list[Request]:
        """The requests a post makes, for --dry-run. Contacts nobody: if the listing finds a comment
        with the marker, the POST becomes a PATCH of that comment."""
        return [Request("GET", self.comments_url(t) + "?per_page=100"),
                Request("POST", self.comments_url(t), {"body": self._body(body)})]

    def _body(self, body: str) -> str:
        """The comment as sent: no token and no URL credentials, whatever pins.yaml or a result file held."""
        return redact(body, (self._token,) if self._token else ())

    def post(self, t: Target, mark: str, body: str) -> Posted:
        body = self._body(body)
        if mark not in body:
            raise GitHubError("the report has no pin set marker; refusing to post a comment that cannot be updated later")
        if len(body) > MAX_BODY:
            raise GitHubError(f"the report is {len(body)} characters, more than GitHub's {MAX_BODY} for a comment; "
                            "post fewer results at once (e.g. one comment per build)")
        existing = self.find_comment(t, mark)
        if existing:
            return self._update(t, existing, body)
        tried = False

        def create() -> Posted:
            # A POST that failed may still have created the comment: list again before a second one.
            nonlocal tried
            if tried and (found := self.find_comment(t, mark)):
                updated = self._update(t, found, body)
                return Posted("created", updated.url) if updated.action == "unchanged" else updated
            tried = True
            return self._posted("created", self._once("POST", self.comments_url(t), {"body": body}, None))

        return self._retrying(create)

    def _update(self, t: Target, existing: dict, body: str) -> Posted:
        if existing.get("body") == body:
            url = existing.get("html_url")
            return Posted("unchanged", self.clean(url) if isinstance(url, str) else self.comment_url(t, existing["id"]))
        return self._posted("updated", self.call("PATCH", self.comment_url(t, existing["id"]), {"body": body}))

    def _posted(self, action: str, answer: Answer) -> Posted:
        data = self._json(answer)
        url = data.get("html_url") or data.get("url") if isinstance(data, dict) else None
        if not (isinstance(data, dict) and _is_id(data.get("id")) and isinstance(url, str)):
            raise GitHubError(f"{answer.method} {answer.url}: HTTP {answer.status} but GitHub answered "
                            f"{kind_of(data)} that is no comment (no id or html_url); the comment may have been "
                            f"{action}, check the PR")
        return Posted(action, self.clean(url))

    # --- pull requests (`pinset bump`) -----------------------------------------------------------------
    def find_pull(self, r: Repo, branch: str) -> dict | None:
        """The open pull request whose head is `branch` of `r` (GitHub filters by head; checked here again, so a
        server that ignores the filter cannot make us edit another branch's PR)."""
        params = {"head": f"{r.owner}:{branch}", "state": "open", "per_page": 100}
        for answer, pull in self.pages(self.pulls_url(r), params, "pull request"):
            if not (isinstance(pull, dict) and _is_id(pull.get("number"))):
                raise GitHubError(f"GET {answer.url}: expected pull requests (objects with a number), GitHub answered "
                                f"{kind_of(pull)} in the list")
            head = pull.get("head")
            if isinstance(head, dict) and head.get("ref") == branch and pull.get("state", "open") == "open" \
                    and head.get("label", f"{r.owner}:{branch}") == f"{r.owner}:{branch}":
                return pull
        return None

    def default_branch(self, r: Repo) -> str:
        """The repository's default branch (the base of a bump PR when the checkout is on no branch)."""
        answer = self.call("GET", f"{self.api_url}/repos/{r.owner}/{r.repo}")
        data = self._json(answer)
        name = data.get("default_branch") if isinstance(data, dict) else None
        if not (isinstance(name, str) and name):
            raise GitHubError(f"GET {answer.url}: expected a repository with a default_branch, GitHub answered {kind_of(data)}")
        return name

    def plan_pull(self, r: Repo, branch: str, base: str, title: str, body: str) -> list[Request]:
        """The requests open_pull makes, for --dry-run (the POST becomes a PATCH when a PR is open already)."""
        return [Request("GET", f"{self.pulls_url(r)}?head={r.owner}:{branch}&state=open&per_page=100"),
                Request("POST", self.pulls_url(r), {"title": self._body(title), "head": branch, "base": base,
                                                    "body": self._body(body)})]

    def open_pull(self, r: Repo, branch: str, base: str, title: str, body: str) -> Posted:
        """Open the pull request of `branch`, or update the one open already (title, body): never a second.
        A POST answered 422 "already exists" (another run opened it since the listing) or whose answer was lost
        (5xx, dropped) is followed by a listing, and the PR found there is updated."""
        title, body = self._body(title), self._body(body)
        if len(body) > MAX_BODY:
            raise GitHubError(f"the pull request body is {len(body)} characters, more than GitHub's {MAX_BODY}")
        existing = self.find_pull(r, branch)
        if existing:
            return self._update_pull(r, existing, title, body)
        tried = False

        def create() -> Posted:
            nonlocal tried
            if tried and (found := self.find_pull(r, branch)):
                updated = self._update_pull(r, found, title, body)
                return Posted("created", updated.url) if updated.action == "unchanged" else updated
            tried = True
            answer = self._once("POST", self.pulls_url(r), {"title": title, "head": branch, "base": base, "body": body},
                                None, accept=(422,))
            if answer.status == 422:
                data = _loads(answer.content)
                said = self.clean(json.dumps(data) if data is not None else answer.content[:300].decode("utf-8", "replace"))
                if "already exists" in said.lower() and (found := self.find_pull(r, branch)):
                    return self._update_pull(r, found, title, body)
                raise GitHubError(f"POST {answer.url}: HTTP 422: GitHub rejected the pull request ({said})")
            return self._pull_posted("created", answer)

        return self._retrying(create)

    def _update_pull(self, r: Repo, pull: dict, title: str, body: str) -> Posted:
        if pull.get("title") == title and (pull.get("body") or "") == body:
            url = pull.get("html_url")
            return Posted("unchanged", self.clean(url) if isinstance(url, str) else f"{self.pulls_url(r)}/{pull['number']}")
        return self._pull_posted("updated", self.call("PATCH", f"{self.pulls_url(r)}/{pull['number']}",
                                                        {"title": title, "body": body}))

    def _pull_posted(self, action: str, answer: Answer) -> Posted:
        data = self._json(answer)
        url = data.get("html_url") or data.get("url") if isinstance(data, dict) else None
        if not (isinstance(data, dict) and _is_id(data.get("number")) and isinstance(url, str)):
            raise GitHubError(f"{answer.method} {answer.url}: HTTP {answer.status} but GitHub answered {kind_of(data)} that "
                            f"is no pull request (no number or html_url); it may have been {action}, check the repository")
        return Posted(action, self.clean(url))


def _loads(content: bytes):
    """The JSON value of an answer, None when it is not JSON (bad UTF-8, bad syntax, absurd nesting)."""
    try:
        return json.loads(content)
    except (ValueError, RecursionError):
        return None


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _seconds(retry_after: str | None, now: float) -> float | None:
    """Retry-After in seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not retry_after:
        return None
    text = retry_after.strip()
    if text.isdigit():
        return float(text)
    try:
        return max(parsedate_to_datetime(text).timestamp() - now, 0.0)
    except (TypeError, ValueError, OverflowError):
        return None
