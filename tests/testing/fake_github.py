"""A fake GitHub on 127.0.0.1: the issue-comment endpoints `pinset report --post` uses, the pull-request
endpoints of `pinset bump` (list by head, create, update; 422 for a second PR of a head) and the pull request
list and reviews `pinset forecast` reads, in memory, with canned answers to inject faults (errors, dropped
connections, lost replies, rate limits). `prs` holds pull requests of any repository as `pinset sim` asks for
their state: through GraphQL (POST /graphql, one aliased `repository { pullRequest }` per pin) and REST
(GET /repos/OWNER/NAME/pulls/N)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TOKEN = "ghp_s3cr3tT0kenThatMustNeverBePrinted"


@contextmanager
def serving(fake: FakeGitHub | None = None) -> Iterator[FakeGitHub]:
    """`fake` (by default a new one) answering on its port for the block, its socket closed after it."""
    fake = fake or FakeGitHub()
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


class FakeGitHub:
    """In-memory comments of one PR (owner/repo#7); `fail` makes every request answer with that error.

    `script` holds canned answers, used in order by the first requests of their method (None: any):
    dicts with `status`, `body` (a JSON value, or raw bytes; None drops the connection unanswered),
    `headers`, and `apply` (do the real work first, then give the canned answer: a lost reply)."""

    def __init__(self, token: str = TOKEN):
        self.token = token
        self.comments: list[dict] = []
        self.issue_comments: dict[int, list[dict]] = {}   # comments of other issues and PRs than #7 (by number)
        self.requests: list[tuple[str, str, dict, dict | None]] = []  # method, path+query, headers, body
        self.fail: tuple[int, dict, dict] | None = None
        self.script: list[dict] = []
        self.next_id = 1000
        self.pulls: list[dict] = []   # PRs of o/r as GET /repos/o/r/pulls lists them (number, title, body, head, state)
        self.default_branch = "master"
        self.login: str | None = None  # the token's user (a PAT); None: GET /user answers 403 like GITHUB_TOKEN
        self.author = {"login": "github-actions[bot]", "type": "Bot"}  # who the token's comments are by
        self.reviews: dict[int, list[dict]] = {}   # PR number -> its reviews
        self.max_per_page = 100   # GitHub's cap on per_page (lower it to make a short list span pages)
        self.public = False   # True: GETs need no token (a public repository read without one)
        # "OWNER/NAME#N" -> {"state": OPEN|CLOSED|MERGED, "draft", "review", "commits": [oids, oldest first]}
        self.prs: dict[str, dict] = {}
        self.graphql = True   # False: POST /graphql answers 404 like a server without GraphQL
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, body: str, user: dict | None = None, number: int = 7) -> dict:
        self.next_id += 1
        c = {"id": self.next_id, "body": body,
             "html_url": f"https://github.test/o/r/pull/{number}#issuecomment-{self.next_id}", "user": user or self.author}
        self.comments_of(number).append(c)
        return c

    def comments_of(self, number: int) -> list[dict]:
        return self.comments if number == 7 else self.issue_comments.setdefault(number, [])

    def add_pull(self, head: str, title: str = "t", body: str = "", state: str = "open") -> dict:
        pull = {"number": len(self.pulls) + 1, "title": title, "body": body, "state": state, "base": {"ref": "master"},
                "head": {"ref": head, "label": f"o:{head}"}, "html_url": f"https://github.test/o/r/pull/{len(self.pulls) + 1}"}
        self.pulls.append(pull)
        return pull

    def add_pr(self, key: str, commits: list[str], state: str = "OPEN", draft: bool = False,
               review: str | None = None) -> dict:
        """A pull request `key` ("owner/name#N") whose commits are `commits` (its head the last)."""
        pr = {"state": state, "draft": draft, "review": review, "commits": list(commits)}
        self.prs[key] = pr
        return pr

    def graphql_answer(self, query: str) -> dict:
        """The answer to a query of aliased `repository(owner:, name:) { pullRequest(number:) { ... } }`."""
        data: dict = {}
        errors = []
        for alias, owner, name, number in re.findall(
                r'(\w+): repository\(owner: "([^"]+)", name: "([^"]+)"\) \{ pullRequest\(number: (\d+)\)', query):
            pr = self.prs.get(f"{owner}/{name}#{number}")
            if pr is None:
                data[alias] = {"pullRequest": None}
                errors.append({"type": "NOT_FOUND", "path": [alias, "pullRequest"],
                               "message": f"Could not resolve to a PullRequest with the number of {number}."})
                continue
            m = re.search(r"commits\(last: (\d+)\)", query)
            last = int(m[1]) if m else 100
            data[alias] = {"pullRequest": {
                "state": pr["state"], "isDraft": pr["draft"], "merged": pr["state"] == "MERGED",
                "reviewDecision": pr["review"], "headRefOid": pr["commits"][-1],
                "commits": {"totalCount": len(pr["commits"]),
                            "nodes": [{"commit": {"oid": c}} for c in pr["commits"][-last:]]}}}
        return {"data": data, **({"errors": errors} if errors else {})}

    def rest_pull(self, owner: str, name: str, number: int) -> dict | None:
        pr = self.prs.get(f"{owner}/{name}#{number}")
        if pr is None:
            return None
        return {"number": number, "state": "open" if pr["state"] == "OPEN" else "closed", "draft": pr["draft"],
                "merged": pr["state"] == "MERGED", "merged_at": "2026-12-01T00:00:00Z" if pr["state"] == "MERGED" else None,
                "head": {"sha": pr["commits"][-1]}, "html_url": f"https://github.com/{owner}/{name}/pull/{number}"}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, data, headers=None):
                raw = data if isinstance(data, bytes) else json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                fake.requests.append((method, self.path, dict(self.headers), body))
                anonymous = fake.public and method == "GET" and "Authorization" not in self.headers
                if self.headers.get("Authorization") != f"Bearer {fake.token}" and not anonymous:
                    return self._send(401, {"message": "Bad credentials"})
                if fake.fail:
                    return self._send(*fake.fail)
                canned = next((a for a in fake.script if a.get("method") in (None, method)), None)
                if canned:
                    fake.script.remove(canned)
                    if canned.get("apply"):
                        self._serve(method, body)
                    if canned.get("body", b"") is None:
                        self.close_connection = True  # no answer at all
                        return None
                    return self._send(canned["status"], canned.get("body", b""), canned.get("headers"))
                return self._serve(method, body, self._send)

            def _page(self, items, send):
                """One page of `items` (per_page, page) with GitHub's Link header to the next one."""
                parts = urlsplit(self.path)
                q = parse_qs(parts.query)
                per_page, page = int(q.get("per_page", ["30"])[0]), int(q.get("page", ["1"])[0])
                per_page = min(per_page, fake.max_per_page)
                headers = {}
                if page * per_page < len(items):
                    query = {k: v[0] for k, v in q.items() if k not in ("page", "per_page")}
                    extra = "".join(f"&{k}={v}" for k, v in sorted(query.items()))
                    headers["Link"] = (f'<{fake.url}{parts.path}?per_page={per_page}&page={page + 1}{extra}>; '
                                       f'rel="next", <{fake.url}{parts.path}?page=1>; rel="first"')
                return send(200, items[(page - 1) * per_page: page * per_page], headers)

            def _serve(self, method, body, send=lambda *a: None):
                parts = urlsplit(self.path)
                if parts.path == "/graphql" and method == "POST":
                    if not fake.graphql:
                        return send(404, {"message": "Not Found"})
                    return send(200, fake.graphql_answer((body or {}).get("query") or ""))
                m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/pulls/(\d+)", parts.path)
                if m and method == "GET" and f"{m[1]}/{m[2]}#{m[3]}" in fake.prs:
                    return send(200, fake.rest_pull(m[1], m[2], int(m[3])))
                if parts.path == "/repos/o/r/pulls" and method == "GET":
                    q = parse_qs(parts.query)
                    head, state = q.get("head", [None])[0], q.get("state", ["open"])[0]
                    return self._page([p for p in fake.pulls if (head is None or p["head"].get("label") == head)
                                       and (state == "all" or p.get("state", "open") == state)], send)
                m = re.fullmatch(r"/repos/o/r/pulls/(\d+)/reviews", parts.path)
                if m and method == "GET":
                    return self._page(fake.reviews.get(int(m[1]), []), send)
                if parts.path == "/user" and method == "GET":
                    if fake.login is None:
                        return send(403, {"message": "Resource not accessible by integration"})
                    return send(200, {"login": fake.login, "type": "User"})
                m = re.fullmatch(r"/repos/o/r/issues/(\d+)/comments", parts.path)
                if m:
                    number = int(m[1])
                    comments = fake.comments_of(number)
                    if method == "GET":
                        q = parse_qs(parts.query)
                        per_page, page = int(q.get("per_page", ["30"])[0]), int(q.get("page", ["1"])[0])
                        chunk = comments[(page - 1) * per_page: page * per_page]
                        headers = {}
                        if page * per_page < len(comments):
                            headers["Link"] = (f'<{fake.url}/repos/o/r/issues/{number}/comments?per_page={per_page}'
                                               f'&page={page + 1}>; rel="next"')
                        return send(200, chunk, headers)
                    if method == "POST":
                        if not body or not body.get("body"):
                            return send(422, {"message": "Validation Failed"})
                        return send(201, fake.add(body["body"], number=number))
                if parts.path == "/repos/o/r" and method == "GET":
                    return send(200, {"full_name": "o/r", "default_branch": fake.default_branch})
                if parts.path == "/repos/o/r/pulls":
                    if method == "POST":
                        if not body or not body.get("head") or not body.get("base") or not body.get("title"):
                            return send(422, {"message": "Validation Failed"})
                        if any(p["head"]["ref"] == body["head"] and p["state"] == "open" for p in fake.pulls):
                            return send(422, {"message": "Validation Failed", "errors": [
                                {"resource": "PullRequest", "code": "custom",
                                 "message": f"A pull request already exists for o:{body['head']}."}]})
                        pull = fake.add_pull(body["head"], body["title"], body.get("body") or "")
                        pull["base"] = {"ref": body["base"]}
                        return send(201, pull)
                m = re.fullmatch(r"/repos/o/r/pulls/(\d+)", parts.path)
                if m and method == "PATCH":
                    for pull in fake.pulls:
                        if pull["number"] == int(m[1]):
                            pull.update({k: v for k, v in (body or {}).items() if k in ("title", "body")})
                            return send(200, pull)
                m = re.fullmatch(r"/repos/o/r/issues/comments/(\d+)", parts.path)
                if m and method == "PATCH":
                    for c in [*fake.comments, *(c for cs in fake.issue_comments.values() for c in cs)]:
                        if c["id"] == int(m[1]):
                            if c["user"] != fake.author:  # like GitHub for a token that may not edit others' words
                                return send(403, {"message": "Resource not accessible by integration"})
                            c["body"] = body["body"]
                            return send(200, c)
                return send(404, {"message": "Not Found"})

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

        return Handler
