"""One HTTP session for GitHub and PyPI: bounded in time, retried where a retry is safe.

- Deadlines. requests' `timeout` bounds each wait for a byte, not a request: a server that answers and then
  trickles one byte a second holds a plain `requests.get` for ever. Every request made under `deadline(s)`
  has its socket shut down by a watchdog once `s` seconds have passed, wherever it waits (headers, body),
  and ends in DeadlineExceeded naming the deadline.
- Retries. urllib3's `Retry` on the session's adapter: connection errors and 429/5xx answers of idempotent
  methods (GET, HEAD, PUT, DELETE, OPTIONS; never POST or PATCH, which may have taken effect), with a
  doubling backoff, honouring `Retry-After`, bounded in count and in the longest wait. Callers keep only
  what the adapter cannot know: GitHub's rate-limit reset times, PyPI's download resume (Range).
- Unreachable hosts fail fast. A name that does not resolve and a connection the host refuses are answered
  the same way on every try (no network, a wrong URL, nothing listening): never retried, at any layer
  (`Unreachable` marks them; the callers do not retry them either), and said in words by `failure()`:
  "api.github.com: name not resolved (no network, or no such host)", never urllib3's or pinset's class names.
- Redirects are never followed here (allow_redirects=False is the callers' rule for the token): see
  github/client.py, which follows them by hand within the API origin.
"""

from __future__ import annotations

import errno
import socket
import ssl
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

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
        if error is not None and unreachable(error):   # the same answer on every try: none more
            raise urllib3.exceptions.MaxRetryError(_pool, url, error)
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


def _chain(exc: BaseException | None):
    """exc, then what it wraps (requests' args, urllib3's `reason`, __cause__/__context__), each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen or not isinstance(e, BaseException):
            continue
        seen.add(id(e))
        yield e
        todo += [getattr(e, "reason", None), e.__cause__, e.__context__,
                 *(a for a in getattr(e, "args", ()) if isinstance(a, BaseException))]


def _cause(exc: BaseException) -> tuple[str, str] | None:
    """(kind, words) of the first failure in exc's chain that says what happened on the network."""
    resolution = getattr(urllib3.exceptions, "NameResolutionError", None)
    for e in _chain(exc):
        if isinstance(e, DeadlineExceeded):
            return "deadline", str(e).split(": ", 1)[-1] if str(e).startswith(("GET ", "POST ", "PATCH ")) else str(e)
        if isinstance(e, socket.gaierror) or (resolution is not None and isinstance(e, resolution)):
            return "dns", "name not resolved (no network, or no such host)"
        if isinstance(e, ConnectionRefusedError) or (isinstance(e, OSError) and e.errno == errno.ECONNREFUSED):
            return "refused", "connection refused (nothing listens there)"
    for e in _chain(exc):
        if isinstance(e, (urllib3.exceptions.ConnectTimeoutError, socket.timeout, TimeoutError)) or \
                isinstance(e, requests.exceptions.ConnectTimeout):
            return "timeout", "no answer in time"
        if isinstance(e, (ssl.SSLError, urllib3.exceptions.SSLError, requests.exceptions.SSLError)):
            return "tls", "TLS handshake failed (certificate or protocol)"
        if isinstance(e, requests.exceptions.ProxyError) or isinstance(e, urllib3.exceptions.ProxyError):
            return "proxy", "the proxy failed or refused"
        if isinstance(e, (ConnectionResetError, urllib3.exceptions.ProtocolError)) or \
                isinstance(e, requests.exceptions.ChunkedEncodingError):
            return "dropped", "the connection was dropped"
        if isinstance(e, OSError) and e.strerror:
            return "os", e.strerror.lower()
    return None


def unreachable(exc: BaseException) -> bool:
    """The host cannot be reached at all: its name did not resolve, or it refused the connection. Retrying
    gives the same answer (no network, a wrong URL, nothing listening), so nothing retries it."""
    found = _cause(exc)
    return found is not None and found[0] in ("dns", "refused")


def failure(exc: BaseException, url: str | None = None) -> str:
    """A network failure in words, naming the host: "api.github.com: name not resolved (...)"; never a
    class name of urllib3's or pinset's, nor a Python repr."""
    found = _cause(exc)
    host = _host(url) if url else None
    if host is None:
        pool = next((e for e in _chain(exc) if getattr(e, "pool", None) is not None), None)
        p = getattr(pool, "pool", None)
        if p is not None and getattr(p, "host", None):
            host = f"{p.host}:{p.port}" if p.port else p.host
    what = found[1] if found else _plain(exc) or "the connection failed"
    return f"{host}: {what}" if host else what


def _plain(exc: BaseException) -> str | None:
    """The words of a failure that is not the network's (a malformed URL, too many redirects), when they name
    no internals (urllib3's pool and connection reprs)."""
    if isinstance(exc, requests.ConnectionError):
        return None
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return None if not text or "Pool(" in text or "Connection(" in text or "object at 0x" in text else text[:200]


def _host(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.hostname if port is None or port == default else f"{parts.hostname}:{port}"


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
