"""Unpacking an sdist's vendored tree never writes outside its folder: with tarfile's "data" filter where Python
has it, with pinset's own member check where it does not (Python < 3.10.12). Both paths run here."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from pinset.errors import UpstreamError
from pinset.upstream import pypi

CHANGELOG = "## [1.0]\n- update llama.cpp to ggml-org/llama.cpp@0c1e57098\n"
TOP = "pkg-1.0/"
VENDOR = TOP + "vendor/llama.cpp/"


def make_sdist(path: Path, *extra: tarfile.TarInfo) -> Path:
    """A small sdist: CHANGELOG.md, vendor/llama.cpp/CMakeLists.txt, a symlink inside the tree, then `extra`."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in ((TOP + "CHANGELOG.md", CHANGELOG), (VENDOR + "CMakeLists.txt", "project(x)\n"),
                           (VENDOR + "scripts/run.sh", "#!/bin/sh\n")):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data.encode()))
        tar.addfile(link(VENDOR + "scripts/cmake", "../CMakeLists.txt"))
        for info in extra:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return path


def link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


def regular(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info


def device(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info


@pytest.fixture(params=[True, False], ids=["data-filter", "fallback"])
def filters(request, monkeypatch):
    if request.param and not pypi.EXTRACTION_FILTERS:
        pytest.skip("this Python has no tarfile extraction filters")
    monkeypatch.setattr(pypi, "EXTRACTION_FILTERS", request.param)
    return request.param


def test_a_clean_sdist_unpacks_with_its_modes_and_inner_links(tmp_path, filters):
    tree = tmp_path / "tree"
    commit = pypi.extract_vendored_tree(make_sdist(tmp_path / "s.tar.gz"), "pkg", "1.0", tree)
    assert commit == "0c1e57098"
    assert (tree / "CMakeLists.txt").read_text() == "project(x)\n"
    assert os.access(tree / "scripts" / "run.sh", os.X_OK) and not os.access(tree / "CMakeLists.txt", os.X_OK)
    assert os.readlink(tree / "scripts" / "cmake") == "../CMakeLists.txt"


@pytest.mark.parametrize("bad", [
    regular(VENDOR + "/etc/pinset-escape"),                    # absolute once the prefix is cut
    regular(VENDOR + "../../../pinset-escape"),                 # ..
    regular(VENDOR + "a/../../pinset-escape"),
    link(VENDOR + "up", "../../.."),                            # links leaving the tree
    link(VENDOR + "a/b", "../../pinset-escape"),
    link(VENDOR + "abs", "/etc/passwd"),
], ids=["absolute", "dotdot", "inner-dotdot", "link-up", "link-nested", "link-absolute"])
def test_a_member_that_leaves_the_folder_is_refused(tmp_path, filters, bad, monkeypatch):
    deep = tmp_path / "t" / "u" / "v"  # the unpack folder is here, so an escape would land under t/
    deep.mkdir(parents=True)
    sdist = make_sdist(tmp_path / "s.tar.gz", bad)
    with pytest.raises(UpstreamError, match=r"^pypi:pkg==1\.0: unreadable sdist \S*s\.tar\.gz \(TarError: "):
        pypi.extract_vendored_tree(sdist, "pkg", "1.0", deep)
    assert [p.relative_to(tmp_path).as_posix() for p in (tmp_path / "t").rglob("*")] == ["t/u", "t/u/v"]


def test_a_path_through_a_symlink_is_refused(tmp_path, filters):
    """`d -> .` then `d/../x`-free names still go through the link: refused, not followed."""
    sdist = make_sdist(tmp_path / "s.tar.gz", link(VENDOR + "d", "."), regular(VENDOR + "d/x"))
    with pytest.raises(UpstreamError, match="unreadable sdist"):
        pypi.extract_vendored_tree(sdist, "pkg", "1.0", tmp_path / "tree")


def test_devices_and_hard_links_are_never_unpacked(tmp_path, filters):
    hard = tarfile.TarInfo(VENDOR + "hard")
    hard.type, hard.linkname = tarfile.LNKTYPE, VENDOR + "CMakeLists.txt"
    tree = tmp_path / "tree"
    pypi.extract_vendored_tree(make_sdist(tmp_path / "s.tar.gz", device(VENDOR + "null"), hard), "pkg", "1.0", tree)
    assert not (tree / "null").exists() and not (tree / "hard").exists()


def test_the_member_check_refuses_what_the_data_filter_refuses():
    """The fallback on its own: every refusal above, and nothing that is fine."""
    ok = [regular("CMakeLists.txt"), link("scripts/cmake", "../CMakeLists.txt"), link("same", "./CMakeLists.txt")]
    pypi._check_members(ok)
    for bad in (regular("/abs"), regular("../x"), link("l", "../x"), link("l", "/x"), device("dev")):
        with pytest.raises(tarfile.TarError):
            pypi._check_members(ok + [bad])
    with pytest.raises(tarfile.TarError, match="through a symlink"):
        pypi._check_members([link("d", "."), regular("d/x")])


@pytest.mark.skipif(not pypi.EXTRACTION_FILTERS, reason="needs tarfile.data_filter to compare with")
def test_the_member_check_is_at_least_as_strict_as_the_data_filter(tmp_path):
    """What pinset's check lets through, Python's "data" filter lets through too (names and links of ., .., a, b)."""
    from hypothesis import given, settings, strategies as st

    segment = st.sampled_from([".", "..", "a", "b"])
    relative = st.lists(segment, min_size=1, max_size=5).map("/".join)
    dest = str(tmp_path)

    @settings(max_examples=300, deadline=None)
    @given(name=relative, target=st.one_of(relative, relative.map(lambda t: "/" + t)), is_link=st.booleans())
    def check(name, target, is_link):
        member = link(name, target) if is_link else regular(name)
        try:
            pypi._check_members([member])
        except tarfile.TarError:
            return
        tarfile.data_filter(member, dest)  # raises tarfile.FilterError if pinset let through what it refuses

    check()
