"""Slow servers and the one retrying session (pinset.http): a real server on 127.0.0.1 (threads) that
answers and then trickles one byte a second cannot hold `report --post`, the PyPI JSON or a download
past their deadlines; 5xx/429 are retried with backoff and Retry-After, POST never by the session."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import pinset.github.client as github_module
from pinset import http
from pinset.cli import main
from pinset.errors import UpstreamError
from pinset.upstream import pypi
from tests.report.test_report_post import RESULTS
from tests.testing import local_only

TOKEN = "ghp_deadlineTestToken0123456789"
_pause = time.sleep  # the server's own: a test may stub time.sleep for the client's waits


class Server:
    """answers[path] = (status, headers, body, trickle): with trickle (True, or how many bytes go at once
    first), the body goes one byte a second."""

    def __init__(self):
        self.answers: dict[str, list] = {}
        self.seen: list[tuple[str, str, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _any(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                path = self.path.split("?")[0]
                server.seen.append((method, path, dict(self.headers)))
                queue = server.answers.get(path) or server.answers.get("*")
                status, headers, body, trickle = queue.pop(0) if len(queue) > 1 else queue[0]
                self.send_response(status)
                for k, v in {"Content-Length": str(len(body)), "Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    if not trickle:
                        self.wfile.write(body)
                        return
                    first = 0 if trickle is True else trickle
                    self.wfile.write(body[:first])
                    for i in range(first, len(body)):
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                        _pause(1)
                except OSError:
                    return

            def do_GET(self):
                self._any("GET")

            def do_POST(self):
                self._any("POST")

            def do_PATCH(self):
                self._any("PATCH")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    s = Server()
    local_only(monkeypatch)
    yield s
    s.close()


@pytest.fixture
def waits(monkeypatch):
    recorded: list[float] = []
    monkeypatch.setattr(github_module, "_default_sleep", recorded.append)
    return recorded


def test_a_trickling_github_is_cut_at_the_request_deadline(server, waits, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", server.url)
    monkeypatch.setattr(github_module, "REQUEST_DEADLINE", 2.0)
    server.answers["*"] = [(200, {}, b"[" + b" " * 500 + b"]", True)]
    started = time.monotonic()
    code = main(["report", *RESULTS, "--post", "o/r#7", "--markdown", str(tmp_path / "c.md")])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1 and took < 8, (took, err)
    assert "no complete answer within 2 s (deadline)" in err and (tmp_path / "c.md").exists()
    assert len(server.seen) == 1  # a deadline is not retried
    assert TOKEN not in err


def test_the_whole_post_has_a_deadline(server, waits, monkeypatch, tmp_path, capsys):
    """Each answer on time, but so slow together (a next link after a next link) that the post's deadline ends it."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", server.url)
    monkeypatch.setattr(github_module, "POST_DEADLINE", 3.0)
    page = f"{server.url}/repos/o/r/issues/7/comments"
    server.answers["*"] = [(200, {"Link": f'<{page}?page=x>; rel="next"'}, b"[ ]", True)]
    started = time.monotonic()
    code = main(["report", *RESULTS, "--post", "o/r#7", "--markdown", str(tmp_path / "c.md")])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1 and took < 9, (took, err)
    assert "deadline" in err


def test_a_trickling_pypi_json_is_cut_at_its_deadline(server, monkeypatch):
    monkeypatch.setenv("PINSET_PYPI_URL", server.url)
    monkeypatch.setattr(pypi, "JSON_DEADLINE", 2.0)
    server.answers["*"] = [(200, {}, json.dumps({"releases": {}}).encode() + b" " * 100, True)]
    started = time.monotonic()
    with pytest.raises(UpstreamError, match=r"too slow: GET .* no complete answer within 2 s"):
        pypi.project_releases("llama-cpp-python", "pypi:llama-cpp-python")
    assert time.monotonic() - started < 8


def test_a_trickling_download_resumes_then_stops_at_its_deadlines(server, monkeypatch, tmp_path):
    """Each attempt is cut at DOWNLOAD_DEADLINE, and the next resumes (Range) from what the part file holds."""
    monkeypatch.setattr(pypi, "DOWNLOAD_DEADLINE", 1.5)
    monkeypatch.setattr(pypi, "ATTEMPTS", 3)
    monkeypatch.setattr(pypi.time, "sleep", lambda s: None)
    server.answers["*"] = [(200, {}, b"x" * (pypi.CHUNK + 1000), pypi.CHUNK + 10)]
    started = time.monotonic()
    with pytest.raises(UpstreamError, match=r"download of .* failed \(127.0.0.1:\d+: no complete answer within 1.5 s \(deadline\)\)"):
        pypi._download(f"{server.url}/f.tar.gz", tmp_path, "f.tar.gz", "0" * 64, "pypi:x==1", progress=False)
    assert time.monotonic() - started < 12
    ranges = [h.get("Range") for m, p, h in server.seen]
    assert ranges[0] is None and all(r and r.startswith("bytes=") for r in ranges[1:]) and len(ranges) == 3
    assert ranges[1] == f"bytes={pypi.CHUNK}-"  # what had come before the deadline is kept
    assert (tmp_path / "f.tar.gz.part").stat().st_size >= pypi.CHUNK  # kept for the next run to resume


def test_the_session_retries_5xx_and_429_with_backoff_and_retry_after(server):
    recorded = []
    s = http.session(sleep=recorded.append)
    server.answers["/a"] = [(503, {}, b"", False), (429, {"Retry-After": "5"}, b"", False), (200, {}, b"ok", False)]
    r = s.get(server.url + "/a", timeout=http.TIMEOUT)
    assert (r.status_code, r.content) == (200, b"ok") and recorded == [1.0, 5.0]


def test_the_session_does_not_retry_a_post_nor_wait_for_a_far_retry_after(server):
    recorded = []
    s = http.session(sleep=recorded.append)
    server.answers["/p"] = [(503, {}, b"", False), (200, {}, b"ok", False)]
    assert s.post(server.url + "/p", data=b"x", timeout=http.TIMEOUT).status_code == 503
    server.answers["/g"] = [(429, {"Retry-After": "3600"}, b"", False), (200, {}, b"ok", False)]
    assert s.get(server.url + "/g", timeout=http.TIMEOUT).status_code == 429
    assert recorded == [] and [m for m, p, _ in server.seen] == ["POST", "GET"]


def test_retries_are_bounded(server):
    recorded = []
    s = http.session(sleep=recorded.append)
    server.answers["/x"] = [(500, {}, b"", False)]
    assert s.get(server.url + "/x", timeout=http.TIMEOUT).status_code == 500
    assert recorded == [1.0, 2.0, 4.0] and len(server.seen) == 4
