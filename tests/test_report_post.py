"""`pinset report --post` against a local HTTP server that answers like GitHub's issue-comment endpoints."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

import regen_report_goldens as goldens
from pinset.cli import main
import pinset.report.github as github_module
from pinset.report.github import GitHub, PostError, Target

TOKEN = "ghp_s3cr3tT0kenThatMustNeverBePrinted"
FIX = goldens.FIXTURES
RESULTS = [str(p) for p in sorted((FIX / "green").glob("*.json"))] + ["-c", str(FIX / "pins/pins.yaml")]
DIGEST = json.loads((FIX / "green/sim.json").read_text())["pinset"]
MARK = f"<!-- pinset:{DIGEST} -->"


class FakeGitHub:
    """In-memory comments of one PR (owner/repo#7); `fail` makes every request answer with that error.

    `script` holds canned answers, used in order by the first requests of their method (None: any):
    dicts with `status`, `body` (a JSON value, or raw bytes; None drops the connection unanswered),
    `headers`, and `apply` (do the real work first, then give the canned answer: a lost reply)."""

    def __init__(self):
        self.comments: list[dict] = []
        self.requests: list[tuple[str, str, dict, dict | None]] = []  # method, path+query, headers, body
        self.fail: tuple[int, dict, dict] | None = None
        self.script: list[dict] = []
        self.next_id = 1000
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, body: str) -> dict:
        self.next_id += 1
        c = {"id": self.next_id, "body": body, "html_url": f"https://github.test/o/r/pull/7#issuecomment-{self.next_id}"}
        self.comments.append(c)
        return c

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
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
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

            def _serve(self, method, body, send=lambda *a: None):
                parts = urlsplit(self.path)
                if re.fullmatch(r"/repos/o/r/issues/7/comments", parts.path):
                    if method == "GET":
                        q = parse_qs(parts.query)
                        per_page, page = int(q.get("per_page", ["30"])[0]), int(q.get("page", ["1"])[0])
                        chunk = fake.comments[(page - 1) * per_page: page * per_page]
                        headers = {}
                        if page * per_page < len(fake.comments):
                            headers["Link"] = (f'<{fake.url}/repos/o/r/issues/7/comments?per_page={per_page}'
                                               f'&page={page + 1}>; rel="next"')
                        return send(200, chunk, headers)
                    if method == "POST":
                        if not body or not body.get("body"):
                            return send(422, {"message": "Validation Failed"})
                        return send(201, fake.add(body["body"]))
                m = re.fullmatch(r"/repos/o/r/issues/comments/(\d+)", parts.path)
                if m and method == "PATCH":
                    for c in fake.comments:
                        if c["id"] == int(m[1]):
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


@pytest.fixture(autouse=True)
def sleeps(monkeypatch):
    """Retries wait through github._default_sleep: record the waits instead of sleeping."""
    waits: list[float] = []
    monkeypatch.setattr(github_module, "_default_sleep", waits.append)
    return waits


@pytest.fixture
def github(monkeypatch):
    fake = FakeGitHub()
    fake.thread.start()
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def post(tmp_path, *extra, markdown=True):
    argv = ["report", *RESULTS, "--post", "o/r#7", *extra]
    if markdown:
        argv += ["--markdown", str(tmp_path / "comment.md")]
    return main(argv)


def no_token_anywhere(capsys, tmp_path):
    out = capsys.readouterr()
    for text in (out.out, out.err, *(p.read_text() for p in tmp_path.rglob("*") if p.is_file())):
        assert TOKEN not in text
    return out


def test_creates_comment_with_marker(github, tmp_path, capsys):
    github.add("an unrelated review comment")
    rc = post(tmp_path)
    out = no_token_anywhere(capsys, tmp_path)
    assert rc == 0
    assert [(m, p.split("?")[0]) for m, p, _, _ in github.requests] == [
        ("GET", "/repos/o/r/issues/7/comments"), ("POST", "/repos/o/r/issues/7/comments")]
    assert "per_page=100" in github.requests[0][1]
    assert len(github.comments) == 2
    body = github.comments[1]["body"]
    assert body.startswith(MARK + "\n") and body == (tmp_path / "comment.md").read_text()
    assert body == (goldens.GOLDEN / "green.md").read_text()
    assert github.requests[1][2]["Accept"] == "application/vnd.github+json"
    assert f"created comment on o/r#7: {github.comments[1]['html_url']}" in out.out


def test_updates_the_marked_comment_on_a_later_page(github, tmp_path, capsys):
    for i in range(130):
        github.add(f"comment {i}")
    old = github.add(MARK + "\nold report")
    for i in range(5):
        github.add(f"later {i}")
    rc = post(tmp_path)
    no_token_anywhere(capsys, tmp_path)
    assert rc == 0
    methods = [(m, p) for m, p, _, _ in github.requests]
    assert methods[:2] == [("GET", "/repos/o/r/issues/7/comments?per_page=100"),
                           ("GET", "/repos/o/r/issues/7/comments?per_page=100&page=2")]
    assert methods[2] == ("PATCH", f"/repos/o/r/issues/comments/{old['id']}")
    assert len(github.comments) == 136  # nothing created
    assert old["body"] == (goldens.GOLDEN / "green.md").read_text()


def test_unchanged_comment_is_not_rewritten(github, tmp_path, capsys):
    github.add((goldens.GOLDEN / "green.md").read_text())
    rc = post(tmp_path)
    assert rc == 0
    assert [m for m, *_ in github.requests] == ["GET"]
    assert "unchanged comment on o/r#7" in capsys.readouterr().out


def test_blocked_report_posts_and_exits_1(github, tmp_path, capsys):
    argv = ["report", *map(str, sorted((FIX / "blocked").glob("*.json"))), "--post", "o/r#7"]
    assert main(argv) == 1
    assert len(github.comments) == 1 and "**❌ blocked:**" in github.comments[0]["body"]
    no_token_anywhere(capsys, tmp_path)


def test_bad_credentials_401(github, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN + "-expired")
    rc = post(tmp_path)
    out = capsys.readouterr()
    assert rc == 1
    assert "GET " + github.url + "/repos/o/r/issues/7/comments: HTTP 401: the token in GITHUB_TOKEN was refused " \
           "(expired or wrong) (Bad credentials)" in out.err
    assert f"the rendered report is in {tmp_path / 'comment.md'}" in out.err
    assert (tmp_path / "comment.md").read_text() == (goldens.GOLDEN / "green.md").read_text()
    assert TOKEN not in out.out + out.err
    assert github.comments == []


def test_rate_limit_403_names_the_reset_time(github, tmp_path, capsys):
    github.fail = (403, {"message": "API rate limit exceeded for user ID 1."},
                   {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1790000000"})
    rc = post(tmp_path)
    out = no_token_anywhere(capsys, tmp_path)
    assert rc == 1
    assert "HTTP 403: GitHub rate limit reached; posting is blocked until 2026-09-21 14:13:20 UTC " \
           "(API rate limit exceeded for user ID 1.)" in out.err
    assert (tmp_path / "comment.md").is_file()


def test_forbidden_403_without_rate_limit(github, tmp_path, capsys):
    github.fail = (403, {"message": "Resource not accessible by integration"}, {"X-RateLimit-Remaining": "4999"})
    assert post(tmp_path) == 1
    err = no_token_anywhere(capsys, tmp_path).err
    assert "HTTP 403: the token may not comment on this repository" in err and "rate limit" not in err


def test_secondary_rate_limit_429_retry_after(github, tmp_path, capsys):
    github.fail = (429, {"message": "You have exceeded a secondary rate limit"}, {"Retry-After": "60"})
    assert post(tmp_path) == 1
    assert "HTTP 429: GitHub rate limit reached; posting is blocked for 60 s" in capsys.readouterr().err


def test_validation_failed_422(github, tmp_path, capsys):
    github.fail = (422, {"message": "Validation Failed",
                         "errors": [{"resource": "IssueComment", "code": "custom", "message": "body is too long"}]}, {})
    rc = post(tmp_path)
    err = no_token_anywhere(capsys, tmp_path).err
    assert rc == 1
    assert "HTTP 422: GitHub rejected the comment (Validation Failed)" in err and "body is too long" in err


def test_failure_without_markdown_keeps_report_in_cache(github, tmp_path, capsys, isolated_cache):
    github.fail = (422, {"message": "Validation Failed"}, {})
    rc = post(tmp_path, markdown=False)
    err = capsys.readouterr().err
    kept = isolated_cache / "reports" / f"report-{DIGEST}.md"
    assert rc == 1
    assert f"the rendered report is in {kept}" in err.replace("\n", "")
    assert kept.read_text() == (goldens.GOLDEN / "green.md").read_text()


def test_unreachable_server(tmp_path, capsys, monkeypatch):
    fake = FakeGitHub()  # bound, never serving, then closed: connection refused
    url = fake.url
    fake.server.server_close()
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    rc = main(["report", *RESULTS, "--post", "o/r#7", "--api-url", url, "--markdown", str(tmp_path / "c.md")])
    out = capsys.readouterr()
    assert rc == 1
    assert f"GET {url}/repos/o/r/issues/7/comments: ConnectionError" in out.err
    assert (tmp_path / "c.md").is_file() and TOKEN not in out.out + out.err


def test_dry_run_prints_requests_with_token_redacted(github, tmp_path, capsys):
    rc = post(tmp_path, "--dry-run", markdown=False)
    out = capsys.readouterr().out
    assert rc == 0
    assert github.requests == []  # nothing sent
    assert f"GET {github.url}/repos/o/r/issues/7/comments?per_page=100" in out
    assert f"POST {github.url}/repos/o/r/issues/7/comments" in out
    assert "Authorization: Bearer ***" in out and TOKEN not in out
    body = json.loads(out[out.index("{"):out.index("\n}\n") + 2])
    assert body["body"] == (goldens.GOLDEN / "green.md").read_text()


def test_missing_token_and_bad_target_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert main(["report", *RESULTS, "--post", "o/r#7"]) == 2
    assert "--post needs a token in GITHUB_TOKEN" in capsys.readouterr().err
    assert main(["report", *RESULTS, "--post", "o/r/pull/7"]) == 2
    assert "is not owner/repo#N" in capsys.readouterr().err
    assert main(["report", *RESULTS, "--dry-run"]) == 2


def test_post_without_pin_set_identity(github, tmp_path, capsys):
    rc = main(["report", str(FIX / "green/bench-h200.json"), "--post", "o/r#7"])
    assert rc == 2
    assert "pin set (and its comment marker) is unknown" in capsys.readouterr().err
    assert github.requests == []


def test_client_refuses_body_without_marker(github):
    with pytest.raises(PostError, match="no pin set marker"):
        GitHub(TOKEN, github.url).post(Target("o", "r", 7), MARK, "no marker here")
    assert github.requests == []


def test_client_refuses_body_over_githubs_limit(github):
    with pytest.raises(PostError, match="more than GitHub's 65536"):
        GitHub(TOKEN, github.url).post(Target("o", "r", 7), MARK, MARK + "\n" + "x" * 65536)
    assert github.requests == []
