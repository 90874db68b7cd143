"""The CMake builder on a real (tiny) CMake project imported into a real mirror: cache, no-op rebuild, errors."""

from __future__ import annotations

import shutil
import time

import pytest

from pinset.build.cmake import (
    NINJA_STEP_RE,
    BuildFailed,
    build_key,
    cmake_cache_value,
    cmake_flags,
    configured_compilers,
    ensure_build,
)
from pinset.build.settings import BuildSettings
from pinset.checks.nvidia_smi import parse_compute_caps
from pinset.errors import ToolchainError
from pinset.store import Store
from pinset.upstream.mirror import Mirror

needs_tools = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")),
                                 reason="cmake, ninja and a C compiler are needed")

PROJECT = {
    "CMakeLists.txt": """\
        cmake_minimum_required(VERSION 3.14)
        project(tiny C)
        option(LLAMA_BUILD_APP "unified binary" ON)
        set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
        add_executable(hello hello.c)
        add_executable(other other.c)
        """,
    "hello.c": '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n',
    "other.c": "int main(void) { return 0; }\n",
}


@pytest.fixture
def tiny(make_repo, tmp_path):
    repo = make_repo("tiny")
    repo.commit("tiny project", PROJECT)
    store = Store.open(tmp_path / "cache")
    mirror = Mirror(store.mirror)
    commit = mirror.import_directory(repo.path, "refs/pinset/test/tiny", "tiny")
    yield store, mirror, mirror.tree_of(commit), repo
    mirror.close()


def _build(store, mirror, tree, targets, **kw):
    return ensure_build(store, mirror, tree, BuildSettings(cuda=False), targets, label="tiny", commit="c0ffee",
                        pinset_digest="d1", jobs=2, progress=kw.pop("progress", False), **kw)


@needs_tools
def test_second_call_is_a_ninja_noop_and_fast(tiny):
    store, mirror, tree, _ = tiny
    first = _build(store, mirror, tree, ["hello"])
    assert not first.cached
    assert (first.bin_dir / "hello").is_file()
    assert not (first.bin_dir / "other").exists()          # only the asked targets are built
    assert first.source_dir.parent == first.build_dir.parent  # source materialised under the cache
    assert (first.source_dir / "hello.c").is_file()
    started = time.monotonic()
    second = _build(store, mirror, tree, ["hello"], progress=True)
    assert second.cached and second.build_dir == first.build_dir
    assert time.monotonic() - started < 10
    log = (first.build_dir.parent / "logs" / "tiny-build.log").read_text()
    assert "ninja: no work to do." in log


@needs_tools
def test_more_targets_reuse_the_folder_and_build_only_the_new_one(tiny):
    store, mirror, tree, _ = tiny
    first = _build(store, mirror, tree, ["hello"])
    mtime = (first.bin_dir / "hello").stat().st_mtime_ns
    more = _build(store, mirror, tree, ["hello", "other"])
    assert more.build_dir == first.build_dir and not more.cached
    assert (more.bin_dir / "other").is_file()
    assert (more.bin_dir / "hello").stat().st_mtime_ns == mtime


@needs_tools
def test_flags_come_from_the_tree_and_key_the_cache(tiny):
    store, mirror, tree, repo = tiny
    built = _build(store, mirror, tree, ["hello"])
    assert "-DLLAMA_BUILD_APP=OFF" in built.cmake_flags          # option exists in this tree
    assert "-DLLAMA_OPENSSL=OFF" not in built.cmake_flags        # option does not
    assert {"-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DCMAKE_BUILD_TYPE=Release",
            "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_SERVER=OFF"} <= set(built.cmake_flags)
    assert cmake_cache_value(built.build_dir, "CMAKE_BUILD_TYPE") == "Release"
    assert configured_compilers(built.build_dir)["C"].split()[0] in ("GNU", "Clang")
    assert built.build_dir.parent.name == build_key(tree, built.cmake_flags)
    # another tree (a pin changed a file) -> another folder
    repo.commit("change", {"hello.c": '#include <stdio.h>\nint main(void) { puts("pinned"); return 0; }\n'})
    commit = mirror.import_directory(repo.path, "refs/pinset/test/tiny2", "tiny2")
    other = _build(store, mirror, mirror.tree_of(commit), ["hello"])
    assert other.build_dir != built.build_dir and not other.cached


@needs_tools
def test_compile_error_is_build_failed_with_the_error_lines(make_repo, tmp_path):
    repo = make_repo("broken")
    repo.commit("broken", dict(PROJECT, **{"hello.c": "int main(void) { return missing_symbol; }\n"}))
    store = Store.open(tmp_path / "cache")
    with Mirror(store.mirror) as mirror:
        tree = mirror.tree_of(mirror.import_directory(repo.path, "refs/pinset/test/broken", "broken"))
        with pytest.raises(BuildFailed) as info:
            _build(store, mirror, tree, ["hello"])
    assert info.value.stage == "build"
    assert "FAILED:" in info.value.tail and "missing_symbol" in info.value.tail
    assert info.value.log.is_file()


def test_test_chat_needs_the_server_library_in_recent_trees():
    root = 'option(LLAMA_BUILD_APP "x" ON)\noption(LLAMA_USE_PREBUILT_UI "x" ON)\noption(LLAMA_OPENSSL "x" ON)\n'
    tests = "target_link_libraries(test-chat PRIVATE server-context)\n"
    flags = cmake_flags(root, tests, cuda=False, cuda_architectures=None)
    assert "-DLLAMA_BUILD_SERVER=ON" in flags and "-DLLAMA_USE_PREBUILT_UI=OFF" in flags
    assert "-DLLAMA_BUILD_SERVER=OFF" in cmake_flags(root, "llama_build_and_test(test-chat.cpp)\n",
                                                     cuda=False, cuda_architectures=None)


def test_cuda_flags_and_missing_architecture():
    flags = cmake_flags("", None, cuda=True, cuda_architectures="90", nvcc=None)
    assert "-DGGML_CUDA=ON" in flags and "-DCMAKE_CUDA_ARCHITECTURES=90" in flags
    with pytest.raises(ToolchainError, match="no CUDA architecture"):
        cmake_flags("", None, cuda=True, cuda_architectures=None)


def test_compute_caps_to_architectures():
    assert parse_compute_caps("9.0\n") == "90"
    assert parse_compute_caps("8.6\n9.0\n9.0\n") == "86;90"
    assert parse_compute_caps("") is None


def test_ninja_step_lines():
    m = NINJA_STEP_RE.match("[31/148] Linking CXX static library ggml/src/libggml-cpu.a")
    assert m and (m.group(1), m.group(2)) == ("31", "148")
    assert NINJA_STEP_RE.match("ninja: Entering directory `build'") is None
