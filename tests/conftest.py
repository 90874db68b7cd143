"""Shared fixtures: real git repositories made in temp dirs, and an isolated pinset cache."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
}


class GitRepo:
    """A real git work tree for building upstream histories in tests."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "master")

    def git(self, *args: str) -> str:
        env = dict(os.environ, **GIT_ENV)
        return subprocess.run(["git", *args], cwd=self.path, env=env, check=True,
                              capture_output=True, text=True).stdout

    def write(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))

    def commit(self, message: str, files: dict[str, str | None] | None = None) -> str:
        for rel, text in (files or {}).items():
            if text is None:
                self.git("rm", "-q", rel)
            else:
                self.write(rel, text)
                self.git("add", rel)
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def tag(self, name: str, rev: str = "HEAD") -> None:
        self.git("tag", name, rev)

    def format_patch(self, rev_range: str, out: Path) -> list[Path]:
        out.mkdir(parents=True, exist_ok=True)
        names = self.git("format-patch", "-q", "-o", str(out), rev_range).split()
        return [Path(n) for n in names]


@pytest.fixture
def make_repo(tmp_path):
    def factory(name: str = "upstream") -> GitRepo:
        return GitRepo(tmp_path / name)
    return factory


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own pinset cache, never the user's."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("PINSET_CACHE", str(cache))
    return cache


def write_pins(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path
