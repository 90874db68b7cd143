"""The token appears nowhere but the Authorization header: one redaction for all that pinset prints or writes.

Every value of the token variables (SECRET_ENV: GITHUB_TOKEN, GH_TOKEN...) and the credentials of any
URL (`https://x-access-token:TOKEN@host/...`, `https://user:pass@host`, `https://TOKEN@host`) are replaced by
`***`, wherever the text came from: pins.yaml's description or URLs, a result file, git's or a server's words.
Applied in the three places everything passes through: result files (output.write_text), the process's
stdout and stderr (cli.main wraps them, so rich's consoles, print and progress lines are all covered), and
the PR comment body (github.client), which is sent, not printed.
"""

from __future__ import annotations

import os
import re

REDACTED = "***"
MIN_SECRET = 6  # a shorter value would redact ordinary words; no real token is this short
# Credentials pinset may hold for `report --post` (and that gh, git credential helpers and CI set).
# No child program needs them: builds, tests, feature checks and llama.cpp programs run the pin set's
# code, so they never see them (runner.child_env drops them).
SECRET_ENV = ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_PAT", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")
# userinfo of a URL: with a password (user:pass@) on any scheme; a bare user@ only on http(s), where it is a
# token (https://TOKEN@github.com), not a login name as in ssh://git@host.
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/@?#\"'<>\[\]]+)@")


def _credentials(m: re.Match) -> str:
    scheme, userinfo = m.group(1), m.group(2)
    if ":" in userinfo or scheme.lower() in ("http://", "https://"):
        return f"{scheme}{REDACTED}@"
    return m.group(0)


_ADDED: set[str] = set()   # tokens this process holds that no variable does (`gh auth token`'s)


def add_secret(value: str) -> None:
    """A token this process holds from elsewhere than SECRET_ENV (the gh CLI): redacted like theirs from now on."""
    if value and len(value.strip()) >= MIN_SECRET:
        _ADDED.add(value.strip())


def secrets() -> list[str]:
    """The token values in the environment now (stripped as clean_token strips them) and those added
    (add_secret), longest first."""
    found = set(_ADDED)
    for name in SECRET_ENV:
        value = os.environ.get(name)
        for candidate in (value, (value or "").strip()):
            if candidate and len(candidate.strip()) >= MIN_SECRET:
                found.add(candidate.strip())
    return sorted(found, key=len, reverse=True)


def redact(text: str, extra: tuple[str, ...] = ()) -> str:
    """`text` with every token value (and `extra` secrets) and every URL's credentials replaced by ***."""
    if not text:
        return text
    for secret in (*extra, *secrets()):
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    if "@" in text:
        text = _URL_CREDENTIALS.sub(_credentials, text)
    return text


def redact_url(url: str) -> str:
    """A URL as it may be shown: its credentials replaced (for messages built from an upstream URL)."""
    return redact(url)


class RedactingStream:
    """A text stream (sys.stdout, sys.stderr) whose every write is redacted first; all else is the stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text) if isinstance(text, str) else text)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def wrap_streams(sys_module) -> tuple:
    """Wrap sys.stdout and sys.stderr (once); returns what to put back."""
    saved = (sys_module.stdout, sys_module.stderr)
    for name in ("stdout", "stderr"):
        stream = getattr(sys_module, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys_module, name, RedactingStream(stream))
    return saved
