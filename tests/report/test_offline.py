"""Fail fast, in words (issue 43): a host whose name does not resolve, or that refuses the connection, is
never retried (at urllib3's layer or the GitHub client's), and is said in one line naming the host and what
failed, without urllib3's or pinset's class names; each case ends in well under a second.

The refused port is real (a port bound on 127.0.0.1, then closed). The DNS failure is real too where the
machine can answer for `*.invalid` (RFC 6761: never resolves), and injected at the OS boundary
(socket.getaddrinfo raising gaierror) so that it is the same on every machine."""

from __future__ import annotations

import socket
import time

import pytest

import pinset.github.client as report_github
from pinset import http
from pinset.cli import main
from pinset.errors import PostError
from pinset.github.pulls import PullsAPI
from tests.bump.test_bump import project  # noqa: F401 (the fixture)
from tests.testing.fake_github import TOKEN, FakeGitHub, serving

PRIVATE = ("_HTTPSPool", "_HTTPPool", "Watched", "HTTPSConnectionPool", "HTTPConnectionPool", "NameResolutionError",
           "NewConnectionError", "MaxRetryError", "ConnectionError", "_Transient", "object at 0x", "Max retries")


def refused_url() -> str:
    fake = FakeGitHub()   # bound, never serving, then closed: nothing listens on the port
    url = fake.url
    fake.server.server_close()
    return url


@pytest.fixture
def waits(monkeypatch):
    """Every wait a retry would make (the GitHub client's and the session's), recorded instead of waited."""
    seen: list[float] = []
    monkeypatch.setattr(report_github, "_default_sleep", seen.append)
    return seen


@pytest.fixture(params=["injected", "real .invalid"])
def no_dns(request, monkeypatch):
    """An API URL whose host name does not resolve."""
    if request.param == "injected":
        def getaddrinfo(host, *args, **kwargs):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        return "https://api.github.com"
    started = time.monotonic()
    try:
        socket.getaddrinfo("pinset-test.invalid", 443)
    except socket.gaierror:
        if time.monotonic() - started > 0.5:
            pytest.skip("this machine's resolver is slow to answer for *.invalid")
        return "https://pinset-test.invalid"
    pytest.skip("this machine's resolver answers for *.invalid")   # pragma: no cover


def no_private_names(text: str) -> None:
    for name in PRIVATE:
        assert name not in text, (name, text)


def test_a_name_that_does_not_resolve_is_one_line_at_once(no_dns, waits):
    host = no_dns.split("//")[1]
    api = PullsAPI(TOKEN, no_dns)
    started = time.monotonic()
    with pytest.raises(PostError) as raised:
        api.open_pulls("o", "r")
    assert time.monotonic() - started < 1.0 and waits == []
    line = str(raised.value)
    assert line == f"GET {no_dns}/repos/o/r/pulls?state=open: {host}: name not resolved (no network, or no such host)"
    no_private_names(line)


def test_a_refused_port_is_one_line_at_once(waits):
    url = refused_url()
    api = PullsAPI(TOKEN, url)
    started = time.monotonic()
    with pytest.raises(PostError) as raised:
        api.open_pulls("o", "r")
    assert time.monotonic() - started < 1.0 and waits == []
    host = url.split("//")[1]
    assert str(raised.value) == f"GET {url}/repos/o/r/pulls?state=open: {host}: connection refused (nothing listens there)"
    no_private_names(str(raised.value))


def test_the_session_itself_never_retries_them(monkeypatch):
    """urllib3's Retry of pinset.http: no retry of a refused connection (its sleep would be called)."""
    waited: list[float] = []
    with pytest.raises(Exception) as raised:
        http.session(sleep=waited.append).get(refused_url() + "/x", timeout=http.TIMEOUT)
    assert waited == [] and http.unreachable(raised.value)
    assert http.failure(raised.value).endswith(": connection refused (nothing listens there)")


def test_a_dropped_connection_is_still_retried(waits):
    """What may pass (a dropped answer) is still retried: only the unreachable host is not."""
    with serving() as fake:
        fake.pulls = []
        fake.script.append({"method": "GET", "body": None})   # the connection closed unanswered, once
        assert PullsAPI(TOKEN, fake.url).open_pulls("o", "r") == []
        assert len(fake.requests) == 2


def test_forecast_offline_is_one_line_exit_1(make_repo, tmp_path, waits, capsys):
    from tests.testing import first_build, series, write_pins

    up, b1 = first_build(make_repo, {"a.txt": "a\n"})
    series(up, b1, [("pin", {"a.txt": "a pinned\n"})], tmp_path / "p")
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1]\npins:\n  - id: p\n"
                                             f"    patches: {tmp_path / 'p'}\n")
    url = refused_url()
    started = time.monotonic()
    code = main(["forecast", "-c", str(cfg), "--repo", "o/r", "--api-url", url])
    err = capsys.readouterr().err
    assert time.monotonic() - started < 2.0   # the git side (one local fetch) included
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and waits == [], err
    assert lines[0].endswith(f"{url.split('//')[1]}: connection refused (nothing listens there)")
    no_private_names(err)


def test_report_post_to_a_refused_port(tmp_path, capsys, monkeypatch, waits):
    from tests.report.test_report_post import RESULTS

    url = refused_url()
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    started = time.monotonic()
    rc = main(["report", *RESULTS, "--post", "o/r#7", "--api-url", url, "--markdown", str(tmp_path / "c.md")])
    err = capsys.readouterr().err
    assert rc == 1 and time.monotonic() - started < 1.0 and waits == []
    assert f"GET {url}/repos/o/r/issues/7/comments?per_page=100: {url.split('//')[1]}: connection refused" in err \
        or f"GET {url}/repos/o/r/issues/7/comments: {url.split('//')[1]}: connection refused" in err
    no_private_names(err)


def test_bump_repo_offline_is_one_line_after_the_push(project, monkeypatch, capsys, waits):
    """`bump --push origin --repo o/r` with the API unreachable: pushed first (by design), then one line naming
    the host, no retry; the local branch stays where it was."""
    from tests.bump.test_bump import local_branch, push, remote_branch

    _, dist, origin = project
    url = refused_url()
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", url)
    assert push(dist) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and err[0].startswith("pinset bump: error: GET ")
    assert err[0].endswith(f"{url.split('//')[1]}: connection refused (nothing listens there)")
    no_private_names(err[0])
    assert waits == [] and remote_branch(origin) is not None and local_branch(dist) is None
