"""A token inside an `upstream:` or `repo:` URL (`http://x-access-token:TOKEN@host/...`, issue 40 class 5)
reaches no ref name, file name, file, git config, log line or output: refs of a remote are named by a digest
of its redacted URL (Mirror's url_key), and refs an older pinset named by the raw URL are removed when the
mirror opens. Upstream is a real bare repository served over git's dumb HTTP protocol by a static file
server on 127.0.0.1, so git really fetches from the URL that holds the token."""

from __future__ import annotations

import functools
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.store import Store
from pinset.upstream.builds import UPSTREAM_REFS, fetch_fork, fetch_upstream_refs
from pinset.upstream.mirror import Mirror, url_key
from tests.testing import GIT_ENV, first_build, series, write_pins

TOKEN = "ghs_urlTokenThatMustNeverReachARefOrAFile"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def git(cwd: Path, *args: str) -> str:
    import os
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def served(make_repo, tmp_path):
    """(upstream work repo, URL with a token of its bare copy served over dumb HTTP, the pin's series folder)."""
    up, b1 = first_build(make_repo, {"a.txt": "".join(f"line {i}\n" for i in range(30))})
    series(up, b1, [("pin", {"a.txt": "".join(f"line {i}\n" for i in range(30)).replace("line 5\n", "line 5 pinned\n")})],
           tmp_path / "patches" / "p")
    up.commit("b2", {"b.txt": "b\n"})
    up.tag("b2")
    up.git("checkout", "-q", "-b", "fork")
    up.commit("a fork's commit", {"c.txt": "c\n"})
    up.git("update-ref", "refs/pull/1/head", "HEAD")
    up.git("checkout", "-q", "master")
    up.git("branch", "-D", "fork")
    root = tmp_path / "srv"
    root.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(up.path), str(root / "up.git"))
    git(root / "up.git", "fetch", "-q", str(up.path), "+refs/pull/*:refs/pull/*")
    git(root / "up.git", "update-server-info")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield up, f"http://x-access-token:{TOKEN}@127.0.0.1:{server.server_address[1]}/up.git", tmp_path / "patches" / "p"
    finally:
        server.shutdown()
        server.server_close()


def no_token_in(folder: Path) -> None:
    for p in folder.rglob("*"):
        assert TOKEN not in str(p), p
        if p.is_file() and not p.is_symlink():
            assert TOKEN.encode() not in p.read_bytes(), p


def test_sim_fetch_and_preimage_refs_hold_no_token(served, tmp_path, isolated_cache, capsys):
    up, url, patches = served
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {url}\nbuilds: [b1, b2]\npins:\n  - id: p\n"
                                             f"    patches: {patches}\n")
    out_json = tmp_path / "sim.json"
    assert main(["sim", "-c", str(cfg), "--json", str(out_json)]) == 0
    store = Store.open(str(isolated_cache))
    with Mirror(store.mirror) as mirror:
        tips = fetch_upstream_refs(url, mirror)
        assert up.head() in tips
        fork = up.git("rev-parse", "refs/pull/1/head").strip()
        assert not mirror.has_commit(fork)
        fetch_fork(url, fork, "refs/pull/1/head", mirror)
        assert mirror.has_commit(fork)
        refs = mirror.git_ok("for-each-ref", "--format=%(refname)")
        config = mirror.git_ok("config", "--list")
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err and TOKEN not in out_json.read_text()
    assert TOKEN not in refs and TOKEN not in config and "x-access-token" not in refs
    key = url_key(url)
    assert f"{UPSTREAM_REFS}{key}/heads/master" in refs and key == url_key(url.replace(TOKEN, "another-token"))
    no_token_in(isolated_cache)


def test_refs_named_by_a_raw_url_are_removed_when_the_mirror_opens(served, isolated_cache):
    """What an older pinset left: refs/pinset/upstream-refs/<the URL's characters>/..., refs/pinset/fork/<...>/
    (a token among them), loose and packed; gone at the next open, the new names kept."""
    up, url, _ = served
    store = Store.open(str(isolated_cache))
    with Mirror(store.mirror) as mirror:
        fetch_upstream_refs(url, mirror)
        old = "http_x-access-token_" + TOKEN + "_127_0_0_1_up_git"
        mirror.git_ok("update-ref", f"refs/pinset/upstream-refs/{old}/heads/master", up.head())
        mirror.git_ok("pack-refs", "--all")
        mirror.git_ok("update-ref", f"refs/pinset/fork/{old}/heads/x", up.head())
        mirror.git_ok("update-ref", f"refs/pinset/fork/{old}/pr", up.head())
    with Mirror(store.mirror) as mirror:
        refs = mirror.git_ok("for-each-ref", "--format=%(refname)")
    assert TOKEN not in refs and f"{UPSTREAM_REFS}{url_key(url)}/heads/master" in refs
    no_token_in(isolated_cache)


def test_a_fork_url_with_a_token_in_repo_is_not_written_by_rebase_as_series(served, tmp_path):
    """`rebase --as-series` turns a PR pin into a series and notes where the PR came from in a comment: the
    `repo:` URL is redacted there (the file is the user's, shared)."""
    from types import SimpleNamespace

    from pinset.heal.as_series import edit_pin

    text = ("upstream: https://github.com/o/r\nbuilds: [b1]\npins:\n  - id: x\n    pr: https://github.com/f/r/pull/1\n"
            f"    repo: {served[1]}\n    commit: {'a' * 40}\n")
    spec = SimpleNamespace(id="x", repo=served[1], commit="a" * 40, pr=SimpleNamespace(url="https://github.com/f/r/pull/1"))
    edited = edit_pin(tmp_path / "pins.yaml", text, spec, "patches/x", "b" * 40)
    assert TOKEN not in edited and "http://***@127.0.0.1" in edited
