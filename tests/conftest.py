"""Shared fixtures: real git repositories made in temp dirs, and an isolated pinset cache (the helpers
behind them live in tests/testing/)."""

from __future__ import annotations

import fcntl
import os

import pytest

from tests.testing import GitRepo
from tests.testing.fake_github import TOKEN, serving


@pytest.fixture
def make_repo(tmp_path):
    def factory(name: str = "upstream") -> GitRepo:
        return GitRepo(tmp_path / name)
    return factory


@pytest.fixture
def github(monkeypatch):
    """A fake GitHub on 127.0.0.1 (tests/testing/fake_github.py) that GITHUB_TOKEN and GITHUB_API_URL name."""
    with serving() as fake:
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("GITHUB_API_URL", fake.url)
        yield fake


@pytest.fixture(autouse=True)
def no_machine_token(tmp_path_factory, monkeypatch):
    """No token of the machine's reaches a test: GITHUB_TOKEN and GH_TOKEN unset, and a gh CLI installed here
    (GitHub's runners have one) reads an empty configuration, so `gh auth token` has none either."""
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GH_CONFIG_DIR", str(tmp_path_factory.getbasetemp() / "gh-config-empty"))


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own pinset cache, never the user's; and no token of the user's (PR pins' state is
    asked from GitHub when one is set: tests that want it take the `github` fixture)."""
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("PINSET_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def snapshot_seed(tmp_path_factory):
    """A store with every llama.cpp snapshot (SNAPSHOTS) imported, once per test run: pytest-xdist's workers
    share one (the first imports it under a lock, the others open it), so the ~25 s of imports per worker
    are paid once.

    Never a test's store: tests take `copy_store(seed, folder)` (tests/testing/snapshots.py), so none sees
    what another wrote. Returns (seed store, version -> Build)."""
    from pinset.store import Store
    from tests.testing.snapshots import SNAPSHOTS, import_snapshots

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's folder, above gw0, gw1
    with open(shared / "snapshot-seed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes: the others then find every ref
        seed = Store.open(shared / "snapshot-seed" / "cache")
        return seed, import_snapshots(seed, tuple(SNAPSHOTS))


@pytest.fixture(scope="session")
def history_nights(tmp_path_factory):
    """Four nights of results written by the verbs themselves (tests/testing/nights.py), once per session:
    tests read them (copy them before changing anything)."""
    import shutil

    from tests.testing.nights import make_nights

    verify = all(shutil.which(t) for t in ("cmake", "ninja", "cc", "ctest"))
    return make_nights(tmp_path_factory.mktemp("nights"), verify=verify)


# The files that run longest on the 2-core CI machine, longest first (reports/speed/ci-time-r8.txt): each builds
# something for real (the CPU gate's llama.cpp build, nvcc's compile check), minutes where most files take seconds.
LONGEST = ("tests/verify/test_verify_cpu_gate.py", "tests/packaging/test_cuda_compile_check.py")


def pytest_configure(config):
    # pytest-xdist's --dist loadfile hands out files by test count, largest first, which left these one-test
    # files to the very end, one worker building alone while the other sat idle; the order below is kept instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """Longest files first (LONGEST, then the other `slow` files), then the rest, the larger files first, each
    file's tests in their own order: on two workers the long ones start at once instead of forming the tail."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    slow = {name for name, tests in files.items() if any(t.get_closest_marker("slow") for t in tests)}

    def rank(name: str) -> tuple[int, int, int]:
        known = LONGEST.index(name) if name in LONGEST else len(LONGEST)  # node ids: from the rootdir
        return known, name not in slow, -len(files[name])

    items[:] = [item for name in sorted(files, key=rank) for item in files[name]]
