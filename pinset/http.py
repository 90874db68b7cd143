"""One HTTP session for GitHub and PyPI: bounded in time, retried where a retry is safe.

- Deadlines. requests' `timeout` bounds each wait for a byte, not a request: a server that answers and then
  trickles one byte a second holds a plain `requests.get` for ever. Every request made under `deadline(s)`
  has its socket shut down by a watchdog once `s` seconds have passed, wherever it waits (headers, body),
  and ends in DeadlineExceeded naming the deadline.
- Retries. urllib3's `Retry` on the session's adapter: connection errors and 429/5xx answers of idempotent
  methods (GET, HEAD, PUT, DELETE, OPTIONS; never POST or PATCH, which may have taken effect), with a
  doubling backoff, honouring `Retry-After`, bounded in count and in the longest wait. Callers keep only
  what the adapter cannot know: GitHub's rate-limit reset times, PyPI's download resume (Range).
- Redirects are never followed here (allow_redirects=False is the callers' rule for the token): see
  report/github.py, which follows them by hand within the API origin.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry

CONNECT_TIMEOUT = 15.0   # s, to open a connection
READ_TIMEOUT = 30.0      # s, of silence while waiting for a byte
RETRIES = 3              # after the first try
BACKOFF = 1.0            # s: waits of 1, 2, 4 s between tries (capped at MAX_BACKOFF)
MAX_BACKOFF = 30.0
MAX_RETRY_AFTER = 60.0   # s; a server asking for a longer wait is answered with a failure, not a hang
RETRY_STATUS = (429, 500, 502, 503, 504)
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

_local = threading.local()


class DeadlineExceeded(requests.exceptions.Timeout):
    """A request ran past its total deadline (a slow or trickling server)."""


class _Watch:
    """The sockets of the requests made under one deadline; fire() shuts them all down."""

    def __init__(self, seconds: float):
        self._socks: list
        self.seconds, self.expired, self._socks, self._lock = seconds, False, [], threading.Lock()
        self.started = time.monotonic()

    def add(self, sock) -> None:
        with self._lock:
            self._socks.append(sock)
            if self.expired:
                _shut(sock)

    def fire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shut(sock)


def _shut(sock) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError):
        pass


@contextmanager
def deadline(seconds: float, what: str = "request"):
    """Every request of this thread inside the block ends within `seconds` (DeadlineExceeded otherwise)."""
    watch = _Watch(seconds)
    outer = getattr(_local, "watch", None)
    _local.watch = watch
    timer = threading.Timer(seconds, watch.fire)
    timer.daemon = True
    timer.start()
    try:
        yield watch
    except (requests.RequestException, OSError, urllib3.exceptions.HTTPError):
        if watch.expired:
            raise DeadlineExceeded(f"{what}: no complete answer within {seconds:g} s (deadline)") from None
        raise
    finally:
        timer.cancel()
        _local.watch = outer
    if watch.expired:  # the last read happened to end just as the watchdog fired
        raise DeadlineExceeded(f"{what}: no complete answer within {seconds:g} s (deadline)")


if TYPE_CHECKING:   # a mixin of urllib3's connection classes (the pools below make them)
    from urllib3.connection import HTTPConnection as _Connection
else:
    _Connection = object


class _Watched(_Connection):
    """A connection that hands its socket to the deadline of the thread that sends a request on it."""

    def getresponse(self, *args, **kwargs):
        watch = getattr(_local, "watch", None)
        if watch is not None and getattr(self, "sock", None) is not None:
            watch.add(self.sock)
        return super().getresponse(*args, **kwargs)


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = type("WatchedHTTPConnection", (_Watched, HTTPConnectionPool.ConnectionCls), {})


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = type("WatchedHTTPSConnection", (_Watched, HTTPSConnectionPool.ConnectionCls), {})


class _Adapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def proxy_manager_for(self, proxy, **kwargs):
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
        return manager


class _Retry(Retry):
    """Retry whose waits go through `sleep_function` (tests count them instead of waiting), doubling from
    BACKOFF (1, 2, 4 s), and that does not retry when the server asks for a wait longer than
    MAX_RETRY_AFTER: the answer goes back to the caller, which names it."""

    sleep_function = staticmethod(time.sleep)

    def new(self, **kw):
        retry = super().new(**kw)
        retry.sleep_function = self.sleep_function
        return retry

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
        left = _left()
        if left is not None and left <= 0:   # the deadline has passed: no further try
            raise urllib3.exceptions.MaxRetryError(_pool, url, error)
        if response is not None:
            after = self.get_retry_after(response)
            if after is not None and after > MAX_RETRY_AFTER:
                raise urllib3.exceptions.MaxRetryError(_pool, url, error)
        return super().increment(method, url, response, error, _pool, _stacktrace)

    def get_backoff_time(self) -> float:
        tries = len([h for h in self.history if h.status is None or h.status in RETRY_STATUS])
        return 0.0 if tries == 0 else min(self.backoff_factor * 2 ** (tries - 1), MAX_BACKOFF)

    def sleep_for_retry(self, response=None):
        after = self.get_retry_after(response) if response is not None else None
        if after:
            _within_deadline(after)
            self.sleep_function(after)
            return True
        return False

    def _sleep_backoff(self):
        backoff = self.get_backoff_time()
        if backoff > 0:
            _within_deadline(backoff)
            self.sleep_function(backoff)


def _left() -> float | None:
    """Seconds left to this thread's deadline (None: no deadline)."""
    watch = getattr(_local, "watch", None)
    return None if watch is None else watch.seconds - (time.monotonic() - watch.started)


def _within_deadline(wait: float) -> None:
    """A retry's wait is part of the request's time: one that would pass the deadline is not waited."""
    left = _left()
    if left is not None and wait >= left:
        _local.watch.fire()   # deadline() then names the deadline, whatever requests wraps this in
        raise DeadlineExceeded(f"a retry wait of {wait:g} s would pass the deadline of "
                               f"{_local.watch.seconds:g} s ({max(left, 0):.1f} s left)")


def retry_policy(total: int = RETRIES, methods=IDEMPOTENT, sleep=None, backoff: float = BACKOFF) -> Retry:
    retry = _Retry(total=total, connect=total, read=total, status=total, other=0, redirect=0,
                   backoff_factor=backoff, status_forcelist=RETRY_STATUS, allowed_methods=frozenset(methods),
                   respect_retry_after_header=True, raise_on_status=False, raise_on_redirect=False)
    retry.sleep_function = sleep or time.sleep
    return retry


def session(retries: int = RETRIES, *, methods=IDEMPOTENT, sleep=None, backoff: float = BACKOFF,
            user_agent: str = "pinset") -> requests.Session:
    """A Session whose every http(s) request is retried by `retry_policy` and watched by `deadline`.
    `methods`: those retried (PATCH of a whole body is safe too, for GitHub); `sleep`: how waits wait;
    `backoff`: the first wait, doubling."""
    s = requests.Session()
    adapter = _Adapter(max_retries=retry_policy(retries, methods, sleep, backoff))
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    s.headers["User-Agent"] = user_agent
    return s


TIMEOUT = (CONNECT_TIMEOUT, READ_TIMEOUT)
