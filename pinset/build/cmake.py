"""Configure and build a llama.cpp tree with CMake + Ninja, cached per (tree, flags).

Used by `verify`, `kld` and `bench`: each asks for the targets it needs and gets a BuiltTree back.
A build folder is keyed by the exact source tree (the mirror's tree oid: the upstream build plus
every pin) and the CMake flags, so an unchanged re-run finds everything up to date and ninja does
nothing. Sources are written from the mirror into the cache, never into a user checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pinset import runner
from pinset.build.settings import BuildSettings
from pinset.errors import BuildFailed, ToolchainError
from pinset.progress import Progress
from pinset.store import Store, atomic_write, locked, short_hash

NINJA_STEP_RE = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)$")
NO_WORK = "ninja: no work to do."
TREE_MARKER = ".pinset-tree"
CONFIGURE_TIMEOUT = 900
BUILD_TIMEOUT = 4 * 3600


@dataclass
class BuiltTree:
    source_dir: Path
    build_dir: Path
    bin_dir: Path
    cmake_flags: list[str]
    seconds: float
    cached: bool  # True when nothing was materialised, configured or compiled


# --- toolchain ------------------------------------------------------------------------------

def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for candidate in (os.environ.get("CUDACXX"), "/usr/local/cuda/bin/nvcc"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_toolchain(cuda: bool) -> None:
    """Fail with one line, before any work, when a program the build needs is missing."""
    for tool, hint in (("cmake", "install CMake >= 3.14"), ("ninja", "install ninja-build")):
        if shutil.which(tool) is None:
            raise ToolchainError(f"{tool} not found on PATH ({hint})")
    if not any(shutil.which(c) for c in (os.environ.get("CXX") or "c++", "g++", "clang++")):
        raise ToolchainError("no C++ compiler found (c++, g++ or clang++ on PATH, or $CXX)")
    if cuda and find_nvcc() is None:
        raise ToolchainError("--cuda: nvcc not found (put the CUDA toolkit's bin/ on PATH or set CUDACXX)")


# --- flags ----------------------------------------------------------------------------------

def _cmake_option_exists(cmakelists: str, name: str) -> bool:
    return re.search(rf"option\(\s*{name}\b", cmakelists) is not None


def cmake_flags(root_cmakelists: str, tests_cmakelists: str | None, *, cuda: bool,
                cuda_architectures: str | None, nvcc: str | None = None) -> list[str]:
    """The CMake flags for a tree, from the tree's own CMakeLists (options come and go upstream).

    Static libs make bin/ self-contained; GGML_NATIVE=OFF makes a build portable between the
    machine that builds and the one that runs. test-chat links the server library in recent
    trees (tests/CMakeLists.txt: server-context), so the server is configured then, but only the
    requested targets are ever built and the prebuilt web UI is never downloaded.
    """
    flags = ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF",
             "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=ON", "-DGGML_CCACHE=ON"]
    needs_server = bool(tests_cmakelists and "server-context" in tests_cmakelists)
    flags.append(f"-DLLAMA_BUILD_SERVER={'ON' if needs_server else 'OFF'}")
    if needs_server and _cmake_option_exists(root_cmakelists, "LLAMA_USE_PREBUILT_UI"):
        flags.append("-DLLAMA_USE_PREBUILT_UI=OFF")
    if _cmake_option_exists(root_cmakelists, "LLAMA_BUILD_APP"):
        flags.append("-DLLAMA_BUILD_APP=OFF")
    if _cmake_option_exists(root_cmakelists, "LLAMA_OPENSSL"):
        flags.append("-DLLAMA_OPENSSL=OFF")
    if cuda:
        if not cuda_architectures:
            raise ToolchainError("--cuda: no CUDA architecture (no GPU visible to nvidia-smi and "
                                 "no `cuda: architectures:` in pins.yaml)")
        flags += ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={cuda_architectures}"]
        if nvcc and shutil.which("nvcc") != nvcc:
            flags.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
    return flags


def cmake_cache_value(build_dir: Path, name: str) -> str | None:
    """A value from CMakeCache.txt (e.g. GGML_CCACHE_FOUND, CMAKE_CXX_COMPILER)."""
    cache = Path(build_dir) / "CMakeCache.txt"
    if not cache.is_file():
        return None
    m = re.search(rf"^{re.escape(name)}:[A-Z]+=(.*)$", cache.read_text(errors="replace"), re.M)
    if not m or m.group(1).endswith("-NOTFOUND"):
        return None
    return m.group(1)


def configured_compilers(build_dir: Path) -> dict[str, str]:
    """{"CXX": "GNU 12.2.0", "CUDA": "NVIDIA 13.0.88"}: what CMake found, from CMakeFiles/<ver>/CMake*Compiler.cmake."""
    found: dict[str, str] = {}
    for lang in ("C", "CXX", "CUDA"):
        for path in sorted(Path(build_dir).glob(f"CMakeFiles/*/CMake{lang}Compiler.cmake")):
            text = path.read_text(errors="replace")
            ident = re.search(rf'^set\(CMAKE_{lang}_COMPILER_ID "([^"]*)"\)', text, re.M)
            version = re.search(rf'^set\(CMAKE_{lang}_COMPILER_VERSION "([^"]*)"\)', text, re.M)
            if ident or version:
                found[lang] = " ".join(m.group(1) for m in (ident, version) if m and m.group(1))
    return found


# --- the build ------------------------------------------------------------------------------

def build_key(tree: str, flags: list[str]) -> str:
    return short_hash(tree, *flags, length=16)


def ensure_build(store: Store, mirror, tree: str, settings: BuildSettings,
                 targets: list[str] | tuple[str, ...] = (), *, label: str, commit: str, pinset_digest: str,
                 jobs: int | None = None, progress: bool = True, log_dir: Path | None = None,
                 log_name: str | None = None) -> BuiltTree:
    """Materialise `tree`, configure once, and build `targets` (ninja does nothing when up to date).

    `settings` (pinset.build.settings.build_settings: CUDA or not, architectures, extra -D flags) travel
    whole.

    The cache key is (tree, flags): the tree oid already covers the build commit and every pin's
    content, so editing only a check or a description in pins.yaml does not rebuild.
    `commit` and `pinset_digest` are recorded next to the build for provenance. `extra_flags`
    (e.g. -DGGML_CUDA_FA=OFF) are appended to the flags and so are part of the key. The logs are
    `<log_name>-{configure,build}.log` (default: the label's slug).
    Raises ToolchainError (missing cmake/ninja/nvcc) or BuildFailed (configure/compile error).
    """
    cuda, cuda_architectures, extra_flags = settings.cuda, settings.cuda_architectures, settings.cuda_flags
    targets = list(targets)
    require_toolchain(cuda)
    started = time.monotonic()
    root_cmake = mirror.read_blob(tree, "CMakeLists.txt")
    if root_cmake is None:
        raise ToolchainError(f"{label}: tree {tree[:12]} has no CMakeLists.txt (not a llama.cpp tree?)")
    flags = cmake_flags(root_cmake, mirror.read_blob(tree, "tests/CMakeLists.txt"), cuda=cuda,
                        cuda_architectures=cuda_architectures, nvcc=find_nvcc() if cuda else None)
    flags += [f for f in extra_flags if f not in flags]
    key = build_key(tree, flags)
    root = store.dir("builds", key)
    source_dir, build_dir = root / "src", root / "build"
    logs = Path(log_dir) if log_dir else root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    slug = log_name or re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or key
    env = _build_env(store)
    did_work = False
    # One pinset at a time per build folder (two verifies may share a cache); the others wait.
    with locked(root / "lock", waiting=f"{label}: waiting for another pinset using {root}"):
        # Compilers' temporary files go beside the build, not to /tmp: a killed build leaves them
        # here, and the next build of this folder (we hold its lock) starts with an empty one.
        env["TMPDIR"] = str(root / "tmp")
        shutil.rmtree(root / "tmp", ignore_errors=True)
        (root / "tmp").mkdir()
        if _read(source_dir / TREE_MARKER) != tree:
            _materialize(mirror, tree, root)
            did_work = True
        meta_path = root / "key.json"
        if not (build_dir / "build.ninja").is_file() or _meta_flags(meta_path) != flags:
            log = logs / f"{slug}-configure.log"
            configure = runner.run(["cmake", "-S", str(source_dir), "-B", str(build_dir), *flags],
                                   env=env, timeout=CONFIGURE_TIMEOUT, log=log)
            if not configure.ok:
                raise BuildFailed("configure", f"cmake configure failed ({configure.describe()})",
                                  _error_tail(configure.stdout + configure.stderr), log, time.monotonic() - started)
            atomic_write(meta_path, (json.dumps({"tree": tree, "commit": commit, "pinset": pinset_digest,
                                                 "label": label, "flags": flags}, indent=2) + "\n").encode())
            did_work = True
        log = logs / f"{slug}-build.log"
        compiled = _ninja(build_dir, targets, jobs or os.cpu_count() or 1, label, progress, env, log)
        if not compiled.ok:
            raise BuildFailed("build", f"build of {', '.join(targets)} failed ({compiled.describe()})",
                              _error_tail(compiled.stdout), log, time.monotonic() - started)
        did_work = did_work or NO_WORK not in compiled.stdout
    return BuiltTree(source_dir, build_dir, build_dir / "bin", flags, time.monotonic() - started, not did_work)


def _build_env(store: Store) -> dict[str, str]:
    """ccache settings that let pinned and bare trees share compiled objects (paths made relative)."""
    env: dict[str, str] = {}
    if shutil.which("ccache"):
        env.setdefault("CCACHE_DIR", os.environ.get("CCACHE_DIR") or str(store.dir("ccache")))
        env["CCACHE_BASEDIR"] = str(store.dir("builds"))
        env["CCACHE_SLOPPINESS"] = "time_macros"
        env["CCACHE_NOHASHDIR"] = "true"
    return env


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _meta_flags(path: Path) -> list[str] | None:
    try:
        return json.loads(path.read_text())["flags"]
    except (OSError, ValueError, KeyError):
        return None


def _materialize(mirror, tree: str, root: Path) -> None:
    """Write the tree next to its build folder; the marker is written last, so a half-written tree is redone."""
    tmp = root / "src.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    mirror.materialize(tree, tmp)
    (tmp / TREE_MARKER).write_text(tree + "\n")
    shutil.rmtree(root / "src", ignore_errors=True)
    tmp.rename(root / "src")
    shutil.rmtree(root / "build", ignore_errors=True)  # a new tree never reuses an old build folder


def _ninja(build_dir: Path, targets: list[str], jobs: int, label: str, progress: bool,
           env: dict[str, str], log: Path) -> runner.Completed:
    argv = ["ninja", "-C", str(build_dir), "-j", str(jobs), *targets]
    with Progress(f"build {label}", unit="steps", enabled=progress) as shown:
        def on_line(line: str) -> None:
            m = NINJA_STEP_RE.match(line)
            if m:
                shown.update(done=int(m.group(1)), total=int(m.group(2)), note=_short_step(m.group(3)))
            elif line.startswith(NO_WORK):
                shown.update(done=1, total=1, note="up to date")

        return runner.run_streaming(argv, env=env, timeout=BUILD_TIMEOUT, on_line=on_line, log=log)


def _short_step(text: str) -> str:
    """'Building CXX object ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/ops.cpp.o' -> 'ops.cpp.o'."""
    words = text.split()
    return words[-1].rsplit("/", 1)[-1][:40] if words else ""


def _error_tail(text: str, lines: int = 25) -> str:
    """The compiler errors of a failed build (from `FAILED:`), else the last lines."""
    all_lines = text.splitlines()
    for i, line in enumerate(all_lines):
        if line.startswith("FAILED:"):
            return "\n".join(all_lines[i:i + lines])
    return "\n".join(all_lines[-lines:])
