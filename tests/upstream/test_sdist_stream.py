"""An sdist's vendored tree streamed into `git fast-import` is the tree and commit `git add -A` of the
unpacked files gave (the old import): the same ids, so every cache built before stays valid. Real git,
real tarballs; the old path is run beside the new one on the same archive."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from pinset.errors import UpstreamError
from pinset.store import Store
from pinset.upstream import builds, pypi
from pinset.upstream.mirror import Mirror
from tests.testing import ROOT
from tests.testing.sdist_import import import_sdist

CHANGELOG = "## [1.0]\n- update llama.cpp to ggml-org/llama.cpp@0c1e57098\n"
TOP = "pkg-1.0/"
VENDOR = TOP + "vendor/llama.cpp/"


def member(name: str, data: bytes = b"", mode: int = 0o644, link: str | None = None) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    if link is not None:
        info.type, info.linkname = tarfile.SYMTYPE, link
    else:
        info.size = len(data)
    info.mode = mode
    return info, data


def make_sdist(path: Path, members) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in [member(TOP + "CHANGELOG.md", CHANGELOG.encode()), *members]:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


TREE = [
    member(VENDOR + "CMakeLists.txt", b"project(x)\n"),
    member(VENDOR + "scripts/run.sh", b"#!/bin/sh\necho hi\n", 0o755),
    member(VENDOR + "scripts/owner-only-x.sh", b"#!/bin/sh\n", 0o700),
    member(VENDOR + "scripts/group-x-only.txt", b"not executable for git\n", 0o654),
    member(VENDOR + "scripts/cmake", link="../CMakeLists.txt"),
    member(VENDOR + "ggml/src/deep/nested/kernel.cu", b"__global__ void k() {}\r\nCRLF kept\r\n"),
    member(VENDOR + "ggml/src/empty.h", b""),
    member(VENDOR + "models/bin.gguf", bytes(range(256)) * 300),
    member(VENDOR + ".gitignore", b"build/\n*.o\n"),
    member(VENDOR + ".gitmodules", b"[submodule \"x\"]\n"),
    member(VENDOR + "docs/with space.md", b"spaces in a name\n"),
    member(VENDOR + "docs/unicod\u00e9.md", b"utf-8 name\n"),
    member(VENDOR + "dirlink", link="ggml/src"),
]


def import_both(tmp_path: Path, sdist: Path) -> tuple[tuple[str, str], tuple[str, str]]:
    """(commit, tree) of the streamed import and of the old unpack + `git add -A`, each into a fresh cache."""
    def imported(name: str, streamed: bool) -> tuple[str, str]:
        store = Store.open(tmp_path / name)
        with Mirror(store.root / "mirror.git") as mirror:
            ref = "refs/pinset/pypi/pkg/1.0"
            commit = import_sdist(sdist, ref, store, mirror, streamed)
            assert mirror.rev_parse(ref) == commit
            mirror.check_tree(mirror.tree_of(commit))
            tree = mirror.tree_of(commit)
        assert list((store.root / "tmp").iterdir()) == []  # no scratch left
        return commit, tree
    return imported("new", True), imported("old", False)


def test_streamed_import_gives_the_ids_of_git_add(tmp_path):
    sdist = make_sdist(tmp_path / "s.tar.gz", TREE)
    new, old = import_both(tmp_path, sdist)
    assert new == old
    store = tmp_path / "new" / "mirror.git"
    listing = subprocess.run(["git", "--git-dir", str(store), "ls-tree", "-r", new[1]], capture_output=True,
                             text=True, check=True).stdout
    modes = {line.split("\t")[1]: line.split()[0] for line in listing.splitlines()}
    assert modes["scripts/run.sh"] == modes["scripts/owner-only-x.sh"] == "100755"
    assert modes["scripts/group-x-only.txt"] == modes["ggml/src/empty.h"] == "100644"
    assert modes["scripts/cmake"] == modes["dirlink"] == "120000"
    assert len(modes) == len(TREE)
    # one pack, no loose objects: nothing was written file by file
    objects = store / "objects"
    assert [p for p in objects.iterdir() if len(p.name) == 2] == []
    assert len(list((objects / "pack").glob("*.pack"))) == 1


def test_a_tree_git_add_would_filter_takes_the_old_path_with_the_same_ids(tmp_path, monkeypatch):
    attrs = member(VENDOR + ".gitattributes", b"*.txt text eol=crlf\n")
    sdist = make_sdist(tmp_path / "s.tar.gz", [*TREE, attrs, member(VENDOR + "a.txt", b"lf\n")])
    calls = []
    real = Mirror.import_directory
    monkeypatch.setattr(Mirror, "import_directory", lambda self, *a: calls.append(a) or real(self, *a))
    new, old = import_both(tmp_path, sdist)
    assert new == old
    assert len(calls) == 2  # the streamed import gave way to the unpacked one, and the old path itself


@pytest.mark.parametrize("names, reason", [
    (["a", "a"], "twice"), (["a", "a/b"], "file and a folder"), ([".gitattributes"], "specially"),
    (["sub/.git"], "specially"), (["sub/.GIT/x"], "specially"), (["GIT~1/x"], "specially"),
    (["a\nb"], "specially"), (['"q'], "specially"), (["a//b"], "specially"),
])
def test_plain_tree_names_what_git_add_reads_otherwise(names, reason):
    members = [tarfile.TarInfo(n) for n in names]
    assert reason in (pypi.plain_tree(members) or "")


def test_a_symlink_through_a_symlink_is_not_plain():
    hop, through = tarfile.TarInfo("l1"), tarfile.TarInfo("sub/l2")
    hop.type, hop.linkname = tarfile.SYMTYPE, "sub"
    through.type, through.linkname = tarfile.SYMTYPE, "../l1/x"
    assert "through a symlink" in pypi.plain_tree([hop, tarfile.TarInfo("sub/x"), through])
    assert pypi.plain_tree([hop, tarfile.TarInfo("sub/x")]) is None


def test_truncated_sdist_is_unreadable_and_leaves_nothing(tmp_path):
    whole = make_sdist(tmp_path / "s.tar.gz", TREE).read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole[:len(whole) // 2])
    store = Store.open(tmp_path / "cache")
    with Mirror(store.root / "mirror.git") as mirror:
        with pytest.raises(pypi.SdistUnreadable):
            builds._import_tree(cut, "pkg", "1.0", "refs/pinset/pypi/pkg/1.0", store, mirror)
        assert mirror.rev_parse("refs/pinset/pypi/pkg/1.0") is None
        assert list((mirror.path / "objects" / "pack").iterdir()) == []
        assert not list(mirror.path.glob("fast_import_crash_*"))
    assert list((store.root / "tmp").iterdir()) == []


@pytest.mark.parametrize("bad", [member(VENDOR + "../../escape", b"x"), member(VENDOR + "out", link="../../..")])
def test_a_refused_member_stops_the_streamed_import(tmp_path, bad):
    sdist = make_sdist(tmp_path / "s.tar.gz", [*TREE, bad])
    store = Store.open(tmp_path / "cache")
    with Mirror(store.root / "mirror.git") as mirror:
        with pytest.raises(pypi.SdistUnreadable):
            builds._import_tree(sdist, "pkg", "1.0", "refs/pinset/pypi/pkg/1.0", store, mirror)
        assert list((mirror.path / "objects" / "pack").iterdir()) == []
    assert list((store.root / "tmp").iterdir()) == []


def test_no_vendored_tree_and_no_changelog_commit_are_named(tmp_path):
    store = Store.open(tmp_path / "cache")
    with Mirror(store.root / "mirror.git") as mirror:
        with pytest.raises(UpstreamError, match="no vendored vendor/llama.cpp tree"):
            builds._import_tree(make_sdist(tmp_path / "a.tar.gz", []), "pkg", "1.0", "refs/x", store, mirror)
        with pytest.raises(UpstreamError, match="names no llama.cpp commit for 2.0"):
            builds._import_tree(make_sdist(tmp_path / "b.tar.gz", TREE), "pkg", "2.0", "refs/x", store, mirror)


def _real_sdists() -> list[Path]:
    folder = os.environ.get("PINSET_SDIST_CACHE")
    return sorted(Path(folder).expanduser().glob("llama_cpp_python-*.tar.gz"))[-2:] if folder else []


@pytest.mark.slow
@pytest.mark.skipif(not _real_sdists(), reason="needs PINSET_SDIST_CACHE with llama-cpp-python sdists")
@pytest.mark.parametrize("sdist", _real_sdists(), ids=lambda p: p.name)
def test_real_sdists_stream_to_the_ids_of_git_add(tmp_path, sdist):
    version = sdist.name[len("llama_cpp_python-"):-len(".tar.gz")]

    def imported(name: str, streamed: bool) -> str:
        store = Store.open(tmp_path / name)
        with Mirror(store.root / "mirror.git") as mirror:
            ref = f"refs/pinset/pypi/llama-cpp-python/{version}"
            if streamed:
                return builds._import_tree(sdist, "llama-cpp-python", version, ref, store, mirror)
            with store.scratch("old-") as tree_dir:
                upstream = pypi.extract_vendored_tree(sdist, "llama-cpp-python", version, tree_dir)
                return mirror.import_directory(tree_dir, ref, builds._import_message("llama-cpp-python", version, upstream))

    with tarfile.open(sdist) as tar:  # the streamed path, not its fallback to the old one
        assert pypi.plain_tree(pypi._vendored_members(tar, version)[1]) is None
    assert imported("new", True) == imported("old", False)


def test_a_blob_the_mirror_holds_loose_is_not_packed_again(tmp_path):
    """fast-import skips only what packs hold: a second, packed copy would hide damage of the loose one."""
    sdist = make_sdist(tmp_path / "s.tar.gz", TREE)
    store = Store.open(tmp_path / "cache")
    with Mirror(store.root / "mirror.git") as mirror:
        loose = mirror.git_ok("hash-object", "-w", "--stdin", input=b"project(x)\n", binary=True).decode().strip()
        builds._import_tree(sdist, "pkg", "1.0", "refs/pinset/pypi/pkg/1.0", store, mirror)
        (index,) = (mirror.path / "objects" / "pack").glob("*.idx")
        packed = mirror.git_ok("show-index", input=index.read_bytes(), binary=True).decode()
        assert loose not in packed
        everything = mirror.git_ok("rev-list", "--objects", "refs/pinset/pypi/pkg/1.0").split()
        assert len(packed.splitlines()) == len([o for o in everything if len(o) == 40]) - 1  # all but the loose blob


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def test_fast_import_dies_with_a_sigkilled_caller_and_gets_the_scrubbed_environment(tmp_path):
    import signal
    import sys
    import time

    cache, pid_file = tmp_path / "cache", tmp_path / "fi.pid"
    code = ("import time\nfrom pathlib import Path\nfrom pinset.store import Store\nfrom pinset.upstream.mirror import Mirror\n"
            f"store = Store.open(Path({str(cache)!r}))\nm = Mirror(store.root / 'mirror.git')\n"
            "s = store.scratch('sdist-')\nimp = m.tree_import(s.path)\nimp.add_blob(b'x')\n"
            f"Path({str(pid_file)!r}).write_text(str(imp._session.proc.pid))\ntime.sleep(300)\n")
    caller = subprocess.Popen([sys.executable, "-c", code],
                              env={**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_TOKEN": "ghp_secret_for_the_test"})
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and caller.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert caller.poll() is None and pid_file.exists()
    child = int(pid_file.read_text())
    assert _alive(child) and b"fast-import" in Path(f"/proc/{child}/cmdline").read_bytes()
    assert b"ghp_secret_for_the_test" not in Path(f"/proc/{child}/environ").read_bytes()
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    with Mirror(Store.open(cache).root / "mirror.git") as mirror:  # the next run clears the dead run's scratch
        assert list((mirror.path / "objects" / "pack").iterdir()) == []
        assert not list(mirror.path.glob("fast_import_crash_*"))
    assert [p.name for p in (cache / "tmp").iterdir() if not p.name.startswith("mirror-")] == []
