"""Adversarial archives for the streamed sdist import (review of #19): whatever the archive holds, the streamed
import ends as the old unpack + `git add -A` ended -- the same commit and tree, or a refusal of the same kind --
and leaves no ref, no pack and no scratch behind when it refuses. Real git, real tarballs."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from pinset.errors import PinsetError
from pinset.store import Store
from pinset.upstream.mirror import Mirror
from tests.testing.sdist_import import import_sdist

CHANGELOG = "## [1.0]\n- update llama.cpp to ggml-org/llama.cpp@0c1e57098\n"
TOP = "pkg-1.0/"
VENDOR = TOP + "vendor/llama.cpp/"
REF = "refs/pinset/pypi/pkg/1.0"


def entry(name: str, data: bytes = b"x\n", *, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644):
    """A member of the vendored tree (`name` below vendor/llama.cpp/)."""
    info = tarfile.TarInfo(VENDOR + name)
    info.type, info.linkname, info.mode = kind, link, mode
    info.size = len(data) if kind in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    return info, data


BASE = [entry("CMakeLists.txt", b"project(x)\n"), entry("ggml/src/a.c", b"int a;\n"),
        entry("dirlink", kind=tarfile.SYMTYPE, link="ggml/src")]

CASES = {
    "absolute path": [entry("/etc/passwd")],
    "dot-dot": [entry("ggml/../../escape")],
    "symlink escaping": [entry("out", kind=tarfile.SYMTYPE, link="../../..")],
    "absolute symlink": [entry("abs", kind=tarfile.SYMTYPE, link="/etc/passwd")],
    "path through a symlink": [entry("dirlink/b.c")],
    "symlink to a symlink's parent": [entry("here", kind=tarfile.SYMTYPE, link="sub/.."),
                                      entry("up", kind=tarfile.SYMTYPE, link="here/..")],
    "hard link": [entry("hard.c", kind=tarfile.LNKTYPE, link=VENDOR + "ggml/src/a.c")],
    "hard link outside": [entry("hard2.c", kind=tarfile.LNKTYPE, link="/etc/passwd")],
    "character device": [entry("dev", kind=tarfile.CHRTYPE)],
    "fifo": [entry("fifo", kind=tarfile.FIFOTYPE)],
    "a file and a folder of one name": [entry("ggml")],
    "a name given twice": [entry("CMakeLists.txt", b"second\n")],
    "a symlink and a file of one name": [entry("CMakeLists.txt", kind=tarfile.SYMTYPE, link="ggml/src/a.c")],
    "nested .git": [entry("sub/.git", b"gitdir: /tmp\n")],
    "nested .git folder": [entry("sub/.git/config", b"[core]\n")],
    ".gitattributes": [entry(".gitattributes", b"*.c text eol=crlf\n"), entry("b.c", b"lf\n")],
    "double slash": [entry("ggml//b.c")],
    "dot segment": [entry("ggml/./b.c")],
    "trailing slash on a file": [entry("ggml/b/")],
    "newline in a name": [entry("new\nline.c")],
    "tab in a name": [entry("tab\tname.c")],
    "backslash in a name": [entry("back\\slash.c")],
    "quote in a name": [entry('"quoted".c')],
    "leading and trailing spaces": [entry(" spaced .c")],
    "non-UTF-8 bytes in a name": [entry("caf\udce9.c")],
    "an executable with set-uid": [entry("suid.sh", b"#!/bin/sh\n", mode=0o4755)],
    "group-executable only": [entry("gx.sh", b"#!/bin/sh\n", mode=0o654)],
    "a symlink to nowhere": [entry("dangling", kind=tarfile.SYMTYPE, link="no/such/file")],
    "a symlinked .gitignore": [entry(".gitignore", kind=tarfile.SYMTYPE, link="CMakeLists.txt")],
    "an ignored file": [entry(".gitignore", b"*.o\n"), entry("obj.o", b"\x7fELF")],
}


def _fix_changelog(members):
    # entry() put the CHANGELOG under the vendored tree: it belongs at the package's top
    info, data = entry("CHANGELOG.md", CHANGELOG.encode())
    info.name = TOP + "CHANGELOG.md"
    return [(info, data), *members]


def write_sdist(path: Path, members, fmt: int) -> Path:
    with tarfile.open(path, "w:gz", format=fmt, encoding="utf-8", errors="surrogateescape") as tar:
        for info, data in _fix_changelog(members):
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def outcome(tmp_path: Path, sdist: Path, streamed: bool) -> tuple:
    """('ok', commit, tree) or ('refused', exception class); checks nothing is left behind on a refusal."""
    store = Store.open(tmp_path / ("new" if streamed else "old"))
    with Mirror(store.root / "mirror.git") as mirror:
        try:
            commit = import_sdist(sdist, REF, store, mirror, streamed)
        except PinsetError as exc:
            result: tuple = ("refused", type(exc).__name__)
            if streamed:
                assert mirror.rev_parse(REF) is None
                assert list((mirror.path / "objects" / "pack").glob("*.pack")) == []
        else:
            mirror.check_tree(mirror.tree_of(commit))
            result = ("ok", commit, mirror.tree_of(commit))
    assert list((store.root / "tmp").iterdir()) == []
    return result


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=["pax", "gnu"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_streamed_import_ends_as_the_unpacked_one(tmp_path, case, fmt):
    sdist = write_sdist(tmp_path / "s.tar.gz", [*BASE, *CASES[case]], fmt)
    assert outcome(tmp_path, sdist, True) == outcome(tmp_path, sdist, False)


@pytest.mark.parametrize("cut", [0.02, 0.3, 0.6, 0.9, 0.999])
def test_a_truncated_sdist_is_refused_at_any_point_of_the_stream(tmp_path, cut):
    members = [*BASE, *(entry(f"f{n}.c", bytes([n % 251]) * 3000 + str(n).encode()) for n in range(60))]
    whole = write_sdist(tmp_path / "s.tar.gz", members, tarfile.PAX_FORMAT).read_bytes()
    sdist = tmp_path / "cut.tar.gz"
    sdist.write_bytes(whole[:int(len(whole) * cut)])
    assert outcome(tmp_path, sdist, True) == outcome(tmp_path, sdist, False) == ("refused", "SdistUnreadable")
