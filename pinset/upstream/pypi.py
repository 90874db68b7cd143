"""Offline upstream: the llama.cpp tree vendored in a llama-cpp-python sdist.

Every llama-cpp-python sdist carries `vendor/llama.cpp`; its CHANGELOG names the upstream commit
("update llama.cpp to ggml-org/llama.cpp@0c1e57098"). That is how pinset gets real llama.cpp code on
a machine that reaches PyPI but not GitHub.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from pinset import runner
from pinset.errors import UpstreamError

VENDOR_DIR = "vendor/llama.cpp"
CHANGELOG_COMMIT_RE = re.compile(r"llama\.cpp@([0-9a-f]{7,40})")


def download_sdist(package: str, version: str, dest: Path) -> Path:
    """Fetch the sdist once into `dest` (a cache folder) and return its path."""
    existing = _find_sdist(dest, package, version)
    if existing:
        return existing
    dest.mkdir(parents=True, exist_ok=True)
    result = runner.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--disable-pip-version-check", "-q", "-d", str(dest), f"{package}=={version}"],
        timeout=1800,
    )
    found = _find_sdist(dest, package, version)
    if not result.ok or not found:
        last = result.tail(1) or result.describe()
        raise UpstreamError(f"pypi:{package}=={version}: could not download the sdist ({last})")
    return found


def _find_sdist(dest: Path, package: str, version: str) -> Path | None:
    if not dest.is_dir():
        return None
    stem = re.sub(r"[-_.]+", "_", package).lower()
    for path in dest.iterdir():
        name = re.sub(r"[-_.]+", "_", path.name).lower()
        if name.startswith(f"{stem}_{version.replace('.', '_')}_tar") or name == f"{stem}_{version.replace('.', '_')}_tar_gz":
            return path
    return None


def changelog_commit(changelog: str, version: str) -> str | None:
    """The llama.cpp commit named under `## [version]` in the changelog (first mention wins)."""
    section = re.search(rf"^## \[{re.escape(version)}\]\s*$(.*?)(?=^## \[|\Z)", changelog, re.M | re.S)
    if not section:
        return None
    m = CHANGELOG_COMMIT_RE.search(section.group(1))
    return m.group(1) if m else None


# tarfile's extraction filters came with Python 3.10.12 / 3.11.4 (PEP 706); _check_members stands in before.
EXTRACTION_FILTERS = hasattr(tarfile, "data_filter")


def _check_members(members: list[tarfile.TarInfo]) -> None:
    """Refuse a member that would land outside the folder: an absolute path, a `..`, a symlink whose target
    is absolute or leaves the tree, a path through a symlink, anything but a file or a symlink.

    The same promise as the "data" filter, kept on Pythons without one; raises tarfile.TarError.
    """
    links = {m.name for m in members if m.issym()}
    for member in members:
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts:
            raise tarfile.TarError(f"{member.name}: path outside the tree")
        if not (member.isfile() or member.issym()):
            raise tarfile.TarError(f"{member.name}: not a file or a symlink")
        if any(str(parent) in links for parent in path.parents):
            raise tarfile.TarError(f"{member.name}: path through a symlink")
        if member.issym():
            target = posixpath.normpath(posixpath.join(posixpath.dirname(member.name), member.linkname))
            if posixpath.isabs(member.linkname) or target == ".." or target.startswith("../"):
                raise tarfile.TarError(f"{member.name}: symlink to {member.linkname} leaves the tree")


def extract_vendored_tree(sdist: Path, package: str, version: str) -> tuple[Path, str]:
    """Unpack vendor/llama.cpp of the sdist into a temp folder; return (folder, upstream commit)."""
    tmp = Path(tempfile.mkdtemp(prefix="pinset-sdist-"))
    commit = None
    found_tree = False
    try:
        with tarfile.open(sdist, "r:*") as tar:
            members = []
            for member in tar:
                parts = member.name.split("/", 1)
                if len(parts) < 2:
                    continue
                rel = parts[1]
                if rel == "CHANGELOG.md" and member.isfile():
                    text = tar.extractfile(member).read().decode("utf-8", errors="replace")
                    commit = changelog_commit(text, version)
                    continue
                if not rel.startswith(VENDOR_DIR + "/"):
                    continue
                inner = rel[len(VENDOR_DIR) + 1:]
                if inner in ("", ".git") or not (member.isfile() or member.issym()):
                    continue  # directories are made as needed; devices, fifos and hard links never
                found_tree = True
                member.name = inner
                members.append(member)
            _check_members(members)
            if EXTRACTION_FILTERS:
                tar.extractall(tmp, members=members, filter="data")
            else:
                tar.extractall(tmp, members=members)
    except (tarfile.TarError, OSError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UpstreamError(f"pypi:{package}=={version}: unreadable sdist {sdist.name}: {exc}") from None
    if not found_tree:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UpstreamError(f"pypi:{package}=={version}: sdist {sdist.name} has no vendored {VENDOR_DIR} tree")
    if commit is None:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UpstreamError(f"pypi:{package}=={version}: CHANGELOG.md names no llama.cpp commit for {version}")
    return tmp, commit
