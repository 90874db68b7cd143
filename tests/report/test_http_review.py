"""Second review of the HTTP deadline (pinset/http.py): the session's own retry waits (Retry-After, backoff)
are inside the deadline too. A fake server on 127.0.0.1 answers 503 with `Retry-After: 2` every time; under
a 1 s deadline the request must end near 1 s, not after three 2 s waits."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pinset import http


class _Busy(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503)
        self.send_header("Retry-After", "2")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def busy():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/x"
    server.shutdown()
    server.server_close()


def test_retry_waits_stay_inside_the_deadline(busy):
    started = time.monotonic()
    with pytest.raises(http.DeadlineExceeded, match="deadline"), http.deadline(1.0, "GET busy"):
        http.session().get(busy, timeout=http.TIMEOUT)
    assert time.monotonic() - started < 2.5


def test_without_a_deadline_the_retries_still_run(busy):
    waits = []
    r = http.session(sleep=waits.append).get(busy, timeout=http.TIMEOUT)
    assert r.status_code == 503 and waits == [2, 2, 2]
