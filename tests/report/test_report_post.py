"""`pinset report --post` against a local HTTP server that answers like GitHub's issue-comment endpoints."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import pinset.github.client as github_module
from pinset.cli import main
from pinset.errors import PinsetError, PostError
from pinset.github.client import GitHub, Target, clean_token, origin, parse_api_url
from tests import regen_report_goldens as goldens
from tests.testing.fake_github import TOKEN, FakeGitHub, serving

FIX = goldens.FIXTURES
RESULTS = [str(p) for p in sorted((FIX / "green").glob("*.json"))] + ["-c", str(FIX / "pins/pins.yaml")]
DIGEST = json.loads((FIX / "green/sim.json").read_text())["pinset"]
MARK = f"<!-- pinset:{DIGEST} -->"


@pytest.fixture(autouse=True)
def sleeps(monkeypatch):
    """Retries wait through github._default_sleep: record the waits instead of sleeping."""
    waits: list[float] = []
    monkeypatch.setattr(github_module, "_default_sleep", waits.append)
    return waits


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
    assert methods[2:] == [("GET", "/user"), ("PATCH", f"/repos/o/r/issues/comments/{old['id']}")]
    assert len(github.comments) == 136  # nothing created
    assert old["body"] == (goldens.GOLDEN / "green.md").read_text()


def test_unchanged_comment_is_not_rewritten(github, tmp_path, capsys):
    github.add((goldens.GOLDEN / "green.md").read_text())
    rc = post(tmp_path)
    assert rc == 0
    assert [(m, p.split("?")[0]) for m, p, *_ in github.requests] == [("GET", "/repos/o/r/issues/7/comments"),
                                                                       ("GET", "/user")]
    assert "unchanged comment on o/r#7" in capsys.readouterr().out


@pytest.mark.parametrize("login", [None, "alice"], ids=["GITHUB_TOKEN", "a user's token"])
def test_another_users_comment_with_the_marker_is_never_edited(github, tmp_path, capsys, login):
    """A comment that carries the marker but is not the token's (a quote, a copy, a forgery placed first) is
    left alone: editing it fails with GITHUB_TOKEN (403) and, with a maintainer's token, would overwrite that
    user's words. The token's own marked comment is the one updated, or a new one is made."""
    github.login = login
    if login:
        github.author = {"login": login, "type": "User"}
    mallory = github.add(MARK + "\n✅ ready to ship (forged)", {"login": "mallory", "type": "User"})
    bot = github.add(MARK + "\nfrom the Actions bot", {"login": "github-actions[bot]", "type": "Bot"})
    rc = post(tmp_path)
    no_token_anywhere(capsys, tmp_path)
    assert rc == 0
    assert mallory["body"] == MARK + "\n✅ ready to ship (forged)"
    green = (goldens.GOLDEN / "green.md").read_text()
    patched = [p for m, p, *_ in github.requests if m == "PATCH"]
    if login:  # a user's token: the bot's comment is not its own either, a comment of its own is made
        assert patched == [] and bot["body"] != green and github.comments[-1]["body"] == green
    else:
        assert patched == [f"/repos/o/r/issues/comments/{bot['id']}"] and bot["body"] == green
        assert len(github.comments) == 2


@pytest.mark.parametrize("answer", [{"status": 200, "body": []}, {"status": 200, "body": {"login": ""}},
                                    {"status": 401, "body": {"message": "Bad credentials"}},
                                    {"status": 500, "body": b"<html>"}])
def test_a_bad_answer_to_who_am_i_is_one_line(github, tmp_path, capsys, answer):
    github.add(MARK + "\nold")
    github.script.append({"method": "GET", "status": 200, "body": github.comments})  # the listing
    github.script += [{"method": "GET", **answer}] * 4
    assert post(tmp_path) == 1
    out = no_token_anywhere(capsys, tmp_path)
    line = out.err.splitlines()[0]
    assert "/user" in line and len(out.err.strip().splitlines()) == 2, out.err
    assert [p for m, p, *_ in github.requests if m == "PATCH"] == []

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
    assert "GET " + github.url + "/repos/o/r/issues/7/comments: HTTP 401: the token was refused " \
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
    assert f"GET {url}/repos/o/r/issues/7/comments: {url.split('//')[1]}: connection refused" in out.err
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
    assert "--post needs a token in GITHUB_TOKEN, GH_TOKEN or `gh auth token`" in capsys.readouterr().err
    assert main(["report", *RESULTS, "--post", "o/r/pull/7"]) == 2
    assert "is not owner/repo#N" in capsys.readouterr().err
    assert main(["report", *RESULTS, "--dry-run"]) == 2


def test_post_without_pin_set_identity(github, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)   # no ./pins.yaml (report reads one by default)
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


# --- the token stays on the API origin ------------------------------------------------------------

@pytest.fixture
def other():
    """A second server on another port: records whatever reaches it (it must be nothing)."""
    with serving() as fake:
        yield fake


def foreign_urls(github, other) -> dict[str, str]:
    port = github.url.rsplit(":", 1)[1]
    path = "/repos/o/r/issues/7/comments?per_page=100&page=2"
    return {"port": other.url + path, "host": f"http://localhost:{port}{path}",
            "scheme": f"https://127.0.0.1:{port}{path}"}


def one_failure_line(err: str, kept) -> str:
    """stderr of a failed post: exactly the failure line and the 'rendered report is in' line."""
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert lines[1] == f"pinset report: the rendered report is in {kept}"
    assert "Traceback" not in err and TOKEN not in err
    return lines[0]


@pytest.mark.parametrize("where", ["port", "host", "scheme"])
def test_next_link_to_another_origin_is_refused(github, other, tmp_path, capsys, where):
    evil = foreign_urls(github, other)[where]
    github.script.append({"method": "GET", "status": 200, "body": [], "headers": {"Link": f'<{evil}>; rel="next"'}})
    assert post(tmp_path) == 1
    line = one_failure_line(no_token_anywhere(capsys, tmp_path).err, tmp_path / "comment.md")
    assert f"is not on the API origin {github.url}; not following it" in line
    assert other.requests == [] and len(github.requests) == 1  # nothing sent to the other origin
    assert [h.get("Host") for _, _, h, _ in github.requests] == [github.url.split("//")[1]]
    assert github.comments == []


@pytest.mark.parametrize("where", ["port", "host", "scheme"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_redirect_to_another_origin_is_refused(github, other, tmp_path, capsys, method, where):
    evil = foreign_urls(github, other)[where]
    github.script.append({"method": method, "status": 307, "headers": {"Location": evil}})
    assert post(tmp_path) == 1
    line = one_failure_line(no_token_anywhere(capsys, tmp_path).err, tmp_path / "comment.md")
    assert f"HTTP 307 redirect {evil} is not on the API origin" in line
    assert other.requests == [] and len(github.requests) == (1 if method == "GET" else 2)
    assert github.comments == []


def test_origin_is_scheme_host_and_port():
    assert origin("https://API.github.com/x") == origin("https://api.github.com:443/y") == ("https", "api.github.com", 443)
    assert origin("http://127.0.0.1/") == ("http", "127.0.0.1", 80)
    assert len({origin(u) for u in ("https://h/", "http://h/", "https://h:8443/", "https://h.example/")}) == 4
    assert origin("/relative") is None and origin("https://h:99999/") is None


def test_redirect_within_the_origin_is_repeated_verbatim(github, tmp_path, capsys):
    # GitHub redirects a renamed repository's API calls (301/307): same method, same body
    github.script += [{"method": "GET", "status": 301, "headers": {"Location": "/repos/o/r/issues/7/comments?per_page=100"}},
                      {"method": "POST", "status": 307, "headers": {"Location": f"{github.url}/repos/o/r/issues/7/comments"}}]
    assert post(tmp_path) == 0
    no_token_anywhere(capsys, tmp_path)
    assert [m for m, *_ in github.requests] == ["GET", "GET", "POST", "POST"]
    assert all(h["Authorization"] == f"Bearer {TOKEN}" for _, _, h, _ in github.requests)
    assert len(github.comments) == 1


def test_redirect_loop_ends(github, tmp_path, capsys):
    github.script += [{"method": "GET", "status": 302, "headers": {"Location": "/loop"}}] * 6
    assert post(tmp_path) == 1
    assert "more than 5 redirects" in one_failure_line(capsys.readouterr().err, tmp_path / "comment.md")


def test_a_hostile_server_echoing_the_token_never_gets_it_printed(github, tmp_path, capsys):
    github.script.append({"status": 404, "body": {"message": f"no such thing for Bearer {TOKEN}\n\x1b[31m",
                                                  "errors": [TOKEN]}})
    assert post(tmp_path) == 1
    line = one_failure_line(no_token_anywhere(capsys, tmp_path).err, tmp_path / "comment.md")
    assert "no such thing for Bearer ***" in line and "\x1b" not in line


# --- the token itself -----------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [TOKEN + "\n", TOKEN + "\r\n", "  " + TOKEN + "\t"])
def test_token_with_surrounding_whitespace_is_stripped(github, tmp_path, capsys, monkeypatch, raw):
    monkeypatch.setenv("GITHUB_TOKEN", raw)
    assert post(tmp_path) == 0
    no_token_anywhere(capsys, tmp_path)
    assert github.requests[0][2]["Authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize("raw", [TOKEN[:8] + "\r\n" + TOKEN[8:], TOKEN[:8] + " " + TOKEN[8:], TOKEN + "\x7f",
                                 TOKEN + "é", TOKEN[:8] + "\nX-Injected: 1"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_token_that_cannot_be_a_header_is_refused_in_one_line(github, tmp_path, capsys, monkeypatch, raw, dry_run):
    monkeypatch.setenv("GITHUB_TOKEN", raw)
    assert post(tmp_path, *(["--dry-run"] if dry_run else [])) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.count("\n") == 1 and out.err.startswith("pinset report: error: GITHUB_TOKEN has a space, control")
    assert TOKEN[:8] not in out.err and TOKEN[8:] not in out.err
    assert github.requests == [] and not (tmp_path / "comment.md").exists()


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "127.0.0.1:8080", "http://", f"http://u:{TOKEN}@127.0.0.1/",
                                 f"http://{TOKEN}@127.0.0.1/", "http://127.0.0.1:99999", f"https://h/api?t={TOKEN}",
                                 f"https://h/api#{TOKEN}", "http://[::1/"])
def test_bad_api_url_is_bad_input(github, tmp_path, capsys, url):
    assert post(tmp_path, "--api-url", url) == 2
    err = no_token_anywhere(capsys, tmp_path).err
    assert err.count("\n") == 1 and "is not an http(s) URL" in err
    assert github.requests == [] and not (tmp_path / "comment.md").exists()


@pytest.mark.parametrize("url", ["http://api.github.com", "http://ghe.example.com/api/v3", "http://10.0.0.5:8080",
                                 "HTTP://api.github.com/"])
def test_plain_http_to_another_machine_is_refused(github, tmp_path, capsys, url, monkeypatch):
    """The token would cross the network in clear text: refused before anything is sent (a server on this
    machine, 127.0.0.1 / ::1 / localhost, as in these tests, may be plain http)."""
    monkeypatch.setenv("GITHUB_API_URL", url)
    for argv in ([], ["--dry-run"]):
        assert post(tmp_path, *argv) == 2
        err = no_token_anywhere(capsys, tmp_path).err
        assert err.count("\n") == 1 and "is plain http: the token would cross the network unencrypted" in err
    assert github.requests == [] and not (tmp_path / "comment.md").exists()
    for local in ("http://localhost:1", "http://[::1]:1", "http://127.0.0.2:1"):
        assert parse_api_url(local) == local

# --- malformed answers: one line, exit 1 ----------------------------------------------------------

MALFORMED_LISTINGS = {
    "object": ({"message": "hi"}, "expected a list of comments, GitHub answered an object"),
    "string": ("comments", "expected a list of comments, GitHub answered a string"),
    "null": (b"null", "expected a list of comments, GitHub answered null"),
    "html": (b"<!DOCTYPE html><html><body>Unicorn!</body></html>", "GitHub's answer is not JSON (<!DOCTYPE html>"),
    "empty": (b"", "GitHub's answer is not JSON (an empty body)"),
    "invalid": (b'[{"id": 1, "body": ', "GitHub's answer is not JSON"),
    "not utf-8": (b'["\xff\xfe"]', "GitHub's answer is not JSON"),
    "deep": (b"[" * 100_000, "GitHub's answer is not JSON"),
    "numbers": ([1, 2], "expected comments (objects with an id and a body), GitHub answered a number in the list"),
    "no id": ([{"body": MARK}], "expected comments (objects with an id and a body), GitHub answered an object"),
    "bool id": ([{"id": True, "body": MARK}], "expected comments"),
    "body not text": ([{"id": 3, "body": ["x"]}], "expected comments"),
}


@pytest.mark.parametrize("name", MALFORMED_LISTINGS)
def test_malformed_listing(github, tmp_path, capsys, name):
    body, expected = MALFORMED_LISTINGS[name]
    github.script.append({"method": "GET", "status": 200, "body": body})
    assert post(tmp_path) == 1
    line = one_failure_line(no_token_anywhere(capsys, tmp_path).err, tmp_path / "comment.md")
    assert line.startswith(f"pinset report: posting to o/r#7 failed: GET {github.url}/repos/o/r/issues/7/comments")
    assert expected in line
    assert github.comments == []


@pytest.mark.parametrize("body", [{}, [], "ok", b"", b"<html>", {"id": 5}, {"html_url": "x"}, {"id": 5, "html_url": 3}])
def test_malformed_answer_to_the_post(github, tmp_path, capsys, body):
    github.script.append({"method": "POST", "status": 201, "body": body})
    assert post(tmp_path) == 1
    line = one_failure_line(no_token_anywhere(capsys, tmp_path).err, tmp_path / "comment.md")
    assert f"POST {github.url}/repos/o/r/issues/7/comments: HTTP 201 but" in line


@pytest.mark.parametrize("body", [[1, 2], "oops", b"<html>502</html>", b"", None.__class__.__name__.encode()])
def test_malformed_error_answers(github, tmp_path, capsys, body):
    github.fail = (404, body, {})
    assert post(tmp_path) == 1
    line = one_failure_line(no_token_anywhere(capsys, tmp_path).err, tmp_path / "comment.md")
    assert "HTTP 404: no such repository or pull request" in line


def test_an_unforeseen_failure_is_one_redacted_line(github, tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError(f"bug with {TOKEN} in it\nsecond line")
    monkeypatch.setattr(GitHub, "find_comment", broken)
    assert post(tmp_path) == 1
    line = one_failure_line(no_token_anywhere(capsys, tmp_path).err, tmp_path / "comment.md")
    assert line.endswith("unexpected RuntimeError: bug with *** in it second line")


# --- retries --------------------------------------------------------------------------------------

def test_5xx_and_dropped_connections_are_retried_with_backoff(github, tmp_path, capsys, sleeps):
    github.script += [{"method": "GET", "status": 502, "body": b"<html>Bad gateway</html>"},
                      {"method": "GET", "body": None},
                      {"method": "GET", "status": 503, "body": {"message": "busy"}, "headers": {"Retry-After": "3"}}]
    assert post(tmp_path) == 0
    no_token_anywhere(capsys, tmp_path)
    assert sleeps == [2.0, 4.0, 3.0]
    assert [m for m, *_ in github.requests] == ["GET"] * 4 + ["POST"]
    assert len(github.comments) == 1


def test_retries_are_bounded(github, tmp_path, capsys, sleeps):
    github.fail = (500, {"message": "Server Error"}, {})
    assert post(tmp_path) == 1
    line = one_failure_line(capsys.readouterr().err, tmp_path / "comment.md")
    assert line.endswith("HTTP 500: GitHub failed (Server Error) (gave up after 4 tries)")
    assert len(github.requests) == 4 and sleeps == [2.0, 4.0, 8.0]


def test_429_retry_after_is_honoured(github, tmp_path, capsys, sleeps):
    github.script.append({"status": 429, "body": {"message": "secondary rate limit"}, "headers": {"Retry-After": "7"}})
    assert post(tmp_path) == 0
    assert sleeps == [7.0] and len(github.comments) == 1


def test_403_rate_limit_waits_for_a_near_reset(github, tmp_path, capsys, sleeps):
    reset = int(time.time()) + 5
    github.script.append({"status": 403, "body": {"message": "API rate limit exceeded"},
                          "headers": {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}})
    assert post(tmp_path) == 0
    assert len(sleeps) == 1 and 4 <= sleeps[0] <= 7


def test_403_secondary_rate_limit_without_headers_waits_a_minute(github, tmp_path, capsys, sleeps):
    github.script.append({"status": 403, "body": {"message": "You have exceeded a secondary rate limit."}})
    assert post(tmp_path) == 0
    assert sleeps == [60.0]


@pytest.mark.parametrize("headers", [{"Retry-After": "3600"},
                                     {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)}])
def test_a_far_reset_gives_up_at_once_naming_it(github, tmp_path, capsys, sleeps, headers):
    github.fail = (403, {"message": "API rate limit exceeded"}, headers)
    assert post(tmp_path) == 1
    line = one_failure_line(capsys.readouterr().err, tmp_path / "comment.md")
    assert "GitHub rate limit reached; posting is blocked " in line
    assert ("for 3600 s" if "Retry-After" in headers else " until 20") in line
    assert sleeps == [] and len(github.requests) == 1


def test_a_post_whose_answer_was_lost_is_not_posted_twice(github, tmp_path, capsys, sleeps):
    github.script.append({"method": "POST", "status": 502, "body": b"", "apply": True})
    assert post(tmp_path) == 0
    out = no_token_anywhere(capsys, tmp_path)
    assert len(github.comments) == 1
    assert [m for m, *_ in github.requests] == ["GET", "POST", "GET", "GET"]  # the relisting asks whose it is
    assert f"created comment on o/r#7: {github.comments[0]['html_url']}" in out.out


def test_a_post_that_failed_is_posted_again_after_relisting(github, tmp_path, capsys, sleeps):
    github.script.append({"method": "POST", "body": None})  # connection dropped before anything was done
    assert post(tmp_path) == 0
    assert len(github.comments) == 1
    assert [m for m, *_ in github.requests] == ["GET", "POST", "GET", "POST"]


def test_a_rejected_post_is_not_retried(github, tmp_path, capsys, sleeps):
    github.script.append({"method": "POST", "status": 422, "body": {"message": "Validation Failed"}})
    assert post(tmp_path) == 1
    assert [m for m, *_ in github.requests] == ["GET", "POST"] and sleeps == []


def test_urls_from_the_server_are_shown_redacted_on_one_line(github, tmp_path, capsys):
    link = f"{github.url}/elsewhere?t={TOKEN}&x=%0a\x1b[2J"
    github.script.append({"method": "GET", "status": 200, "body": [], "headers": {"Link": f'<{link}>; rel="next"'}})
    assert post(tmp_path) == 1
    line = one_failure_line(no_token_anywhere(capsys, tmp_path).err, tmp_path / "comment.md")
    assert f"GET {github.url}/elsewhere?t=***&x=%0a" in line and "HTTP 404" in line and "\x1b" not in line
    assert github.requests[1][1].startswith("/elsewhere")  # same origin: followed, with the token


@pytest.mark.parametrize("loop", ["same page", "endless"])
def test_pages_that_never_end(github, tmp_path, capsys, monkeypatch, loop):
    monkeypatch.setattr(github_module, "MAX_PAGES", 5)
    for page in range(1, 8):
        link = f"{github.url}/repos/o/r/issues/7/comments?page={1 if loop == 'same page' else page + 1}"
        github.script.append({"method": "GET", "status": 200, "body": [], "headers": {"Link": f'<{link}>; rel="next"'}})
    assert post(tmp_path) == 1
    assert "the comment pages do not end" in one_failure_line(capsys.readouterr().err, tmp_path / "comment.md")
    assert len(github.requests) == (2 if loop == "same page" else 5) and github.comments == []


def test_an_oversized_answer_is_refused(github, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(github_module, "MAX_ANSWER", 1 << 20)
    github.script.append({"method": "GET", "status": 200, "body": b"[" + b" " * (2 << 20) + b"]"})
    assert post(tmp_path) == 1
    assert "GitHub's answer is larger than 1 MiB" in one_failure_line(capsys.readouterr().err, tmp_path / "comment.md")


def test_a_report_that_cannot_be_kept_is_one_more_line(github, tmp_path, capsys, monkeypatch):
    github.fail = (500, {"message": "Server Error"}, {})
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("PINSET_CACHE", str(blocker / "cache"))
    assert post(tmp_path, markdown=False) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "HTTP 500" in err[0]
    assert err[1].startswith("pinset report: the rendered report could not be kept: ")


# --- property-based: whatever the input or the answer, pinset's own error or a result -------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["id", "body", "html_url", "url", "message", "errors", "x"]), inner, max_size=4),
                    max_leaves=12)


@given(st.text())
def test_token_and_api_url_checks_raise_only_pinset_errors(text):
    assert origin(text) is None or len(origin(text)) == 3
    try:
        token = clean_token(text)
        assert token is None or (token == text.strip() and token.isprintable() and " " not in token)
    except PinsetError as exc:
        assert re.fullmatch(r"GITHUB_TOKEN has a space, control or non-ASCII character at position \d+ of \d+; "
                            r"refusing to send it", str(exc))
    try:
        assert origin(parse_api_url(text)) is not None
    except PinsetError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(listing=JSON | st.binary(max_size=40), created=JSON | st.binary(max_size=40),
       list_status=st.sampled_from([200, 200, 200, 204, 304, 404, 429, 502]),
       status=st.sampled_from([200, 201, 204, 400, 403, 404, 410, 429, 500, 503]))
def test_any_answer_gives_a_result_or_one_post_error(github, listing, created, list_status, status):
    github.comments.clear()
    github.script[:] = [{"method": "GET", "status": list_status, "body": listing},
                        {"method": "POST", "status": status, "body": created}]
    client = GitHub(TOKEN, github.url, sleep=lambda s: None)
    try:
        posted = client.post(Target("o", "r", 7), MARK, MARK + "\nreport")
        assert posted.action in ("created", "updated", "unchanged") and "\n" not in posted.url
    except PostError as exc:
        assert "\n" not in str(exc) and TOKEN not in str(exc)
