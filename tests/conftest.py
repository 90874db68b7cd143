"""Shared fixtures: real git repositories made in temp dirs, and an isolated pinset cache (the helpers
behind them live in tests/testing/)."""

from __future__ import annotations

import pytest

from tests.testing import GitRepo


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
