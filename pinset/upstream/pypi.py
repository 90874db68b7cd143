"""Offline upstream: the llama.cpp tree vendored in a llama-cpp-python sdist.

Every llama-cpp-python sdist carries `vendor/llama.cpp`; its CHANGELOG names the upstream commit
("update llama.cpp to ggml-org/llama.cpp@0c1e57098"). That is how pinset gets real llama.cpp code on
a machine that reaches PyPI but not GitHub.

The sdist comes from PyPI's JSON API (https://pypi.org/pypi/NAME/json, the version's release: URL and sha256),
not through `pip download`, which would run a build backend. The download resumes a `.part` file in
the cache, is checked against the published sha256, and only then takes its final name, next to a
`.sha256` marker: a cached sdist with a marker is trusted only when its digest still matches.
A cached sdist without marker (copied in by hand, e.g. a trimmed one for an offline machine) is
trusted when it reads to the end as a tar archive.
"""

from __future__ import annotations

import os
import posixpath
import re
import tarfile
import time
import zlib
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from pinset.errors import UpstreamError
from pinset.progress import BYTES, Progress
from pinset.store import atomic_write, digest_path, file_sha256, locked

VENDOR_DIR = "vendor/llama.cpp"
CHANGELOG_COMMIT_RE = re.compile(r"llama\.cpp@([0-9a-f]{7,40})")
DEFAULT_INDEX = "https://pypi.org"
CHUNK = 1 << 16
ATTEMPTS = 4          # a dropped connection resumes where it stopped, this many times
JSON_DEADLINE = 120.0     # s for the project's JSON document, retries of the session included
DOWNLOAD_DEADLINE = 1800.0  # s per download attempt (75 MB at 42 kB/s); a slower one resumes, ATTEMPTS times
_session = None


def session():
    """The one retrying HTTP session (pinset.http) of every PyPI request of this process."""
    global _session
    if _session is None:
        from pinset import http

        _session = http.session(user_agent="pinset (sdist download)")
    return _session


class SdistUnreadable(UpstreamError):
    """A cached sdist that does not read to the end: damaged, to be downloaded again."""


def index_url() -> str:
    """PyPI, or the index named by PINSET_PYPI_URL (a mirror, or a fake one in tests)."""
    return (os.environ.get("PINSET_PYPI_URL") or DEFAULT_INDEX).rstrip("/")


def download_sdist(package: str, version: str, dest: Path, progress: bool = True) -> Path:
    """The sdist in `dest` (a cache folder), downloaded once; one process downloads, others wait."""
    dest.mkdir(parents=True, exist_ok=True)
    found = _cached(dest, package, version)
    if found:
        return found
    with locked(dest / f".{normalized_name(package)}-{version}.lock",
                waiting=f"pypi:{package}=={version}: waiting for another pinset downloading it"):
        found = _cached(dest, package, version)
        if found:
            return found
        url, filename, sha256 = sdist_release(package, version)
        return _download(url, dest, filename, sha256, f"pypi:{package}=={version}", progress)


def forget(sdist: Path) -> None:
    """Drop a damaged sdist (and its marker) from the cache."""
    sdist.unlink(missing_ok=True)
    digest_path(sdist).unlink(missing_ok=True)


def normalized_name(package: str) -> str:
    """PyPI's name normalisation (PEP 503, with `_`): how sdist file names spell the package."""
    return re.sub(r"[-_.]+", "_", package).lower()


def _cached(dest: Path, package: str, version: str) -> Path | None:
    """A complete cached sdist: its digest marker agrees, or it has none (placed there by hand)."""
    path = _find_sdist(dest, package, version)
    if path is None:
        return None
    marker = digest_path(path)
    if marker.exists():
        try:
            expected = marker.read_text().strip()
        except OSError:
            expected = ""
        if file_sha256(path) != expected:
            forget(path)
            return None
    return path


def _find_sdist(dest: Path, package: str, version: str) -> Path | None:
    want = f"{normalized_name(package)}_{version.replace('.', '_')}_tar"
    for path in sorted(dest.iterdir()):
        name = re.sub(r"[-_.]+", "_", path.name).lower()
        if path.is_file() and not path.name.startswith(".") and name.startswith(want) \
                and not name.endswith(("_part", "_sha256", "_tmp", "_lock")):
            return path
    return None


def project_releases(package: str, what: str) -> tuple[str, dict]:
    """(document URL, `releases`: version -> its files) of the project's JSON document on the index;
    every fault is one UpstreamError line starting with `what` (the build or selector that asked).

    The project's document (/pypi/NAME/json), not the per-version one: mirrors and proxies of PyPI serve
    the first (pip-era tooling reads it) where some answer 404 for the second. Both the sdist download
    and the `pypi:` range selectors read it here."""
    import requests

    from pinset import http

    base = index_url()
    api = f"{base}/pypi/{package}/json"
    try:
        with http.deadline(JSON_DEADLINE, f"GET {api}"):
            response = session().get(api, timeout=http.TIMEOUT)
    except http.DeadlineExceeded as exc:
        raise UpstreamError(f"{what}: {base} too slow: {exc}") from None
    except requests.RequestException as exc:
        raise UpstreamError(f"{what}: {base} unreachable ({http.failure(exc, api)})") from None
    if response.status_code == 404:
        raise UpstreamError(f"{what}: no package {package!r} at {base}")
    try:
        releases = response.json()["releases"] if response.status_code == 200 else None
        if not isinstance(releases, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise UpstreamError(f"{what}: {api} gave no release list (HTTP {response.status_code})") from None
    return api, releases


def sdist_release(package: str, version: str) -> tuple[str, str, str]:
    """(url, filename, sha256) of the version's sdist, from the index's JSON API."""
    what = f"pypi:{package}=={version}"
    api, releases = project_releases(package, what)
    if version not in releases:
        raise UpstreamError(f"{what}: no such release on {index_url()}")
    files = releases[version] if isinstance(releases[version], list) else []
    sdists = [f for f in files if isinstance(f, dict) and f.get("packagetype") == "sdist"]
    if not sdists:
        raise UpstreamError(f"{what}: the release has no sdist on {index_url()}")
    entry = sdists[0]
    url, filename = entry.get("url"), entry.get("filename")
    if isinstance(url, str):  # mirrors give the file relative to the document
        from urllib.parse import urljoin

        url = urljoin(api, url)
    sha256 = (entry.get("digests") or {}).get("sha256") if isinstance(entry.get("digests"), dict) else None
    if not (isinstance(url, str) and isinstance(filename, str) and isinstance(sha256, str)
            and re.fullmatch(r"[\w.+-]+\.(?:tar\.gz|tgz|tar\.bz2|tar\.xz|zip|tar)", filename)
            and not filename.startswith(".") and re.fullmatch(r"[0-9a-f]{64}", sha256)):
        raise UpstreamError(f"{what}: {api} gives no usable sdist url, filename and sha256")
    return url, filename, sha256


def _download(url: str, dest: Path, filename: str, sha256: str, what: str, progress: bool) -> Path:
    """GET `url` into `<filename>.part` (resuming it), check sha256, then give it its final name."""
    import requests

    from pinset import http

    part = dest / f"{filename}.part"
    final = dest / filename
    resumed = part.exists()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            _fetch_into(url, part, what, progress)
            break
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            if http.unreachable(exc):   # no network, nothing listening: the same answer on every try
                raise UpstreamError(f"{what}: download of {url} failed ({http.failure(exc, url)})") from None
            if attempt == ATTEMPTS:  # a deadline passed (DeadlineExceeded) or the connection kept dropping
                raise UpstreamError(f"{what}: download of {url} failed ({http.failure(exc, url)}); "
                                    f"the next run resumes it") from None
            time.sleep(min(2 ** attempt, 10))
        except requests.RequestException as exc:  # not worth a retry (a malformed URL, too many redirects)
            raise UpstreamError(f"{what}: download of {url} failed ({type(exc).__name__})") from None
    got = file_sha256(part)
    if got != sha256 and resumed:  # the part we resumed was not the start of this file: once afresh
        part.unlink()
        return _download(url, dest, filename, sha256, what, progress)
    if got != sha256:
        part.unlink(missing_ok=True)
        raise UpstreamError(f"{what}: {filename} has sha256 {got[:16]}…, the index publishes "
                            f"{sha256[:16]}… (nothing cached)")
    atomic_write(digest_path(final), (sha256 + "\n").encode())
    os.replace(part, final)
    return final


def _fetch_into(url: str, part: Path, what: str, progress: bool) -> None:
    from pinset import http

    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    with http.deadline(DOWNLOAD_DEADLINE, f"GET {url}"), \
            session().get(url, headers=headers, stream=True, timeout=http.TIMEOUT) as response:
        if response.status_code == 416:  # nothing left to send: the part is whole (sha256 tells)
            return
        if response.status_code not in (200, 206):
            raise UpstreamError(f"{what}: {url} answered HTTP {response.status_code}")
        if response.status_code == 200:
            have = 0  # the server ignored the range: start again
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        with open(part, "ab" if have else "wb") as fh, Progress(f"downloading {what}", kind=BYTES, total=total, done=have, enabled=progress,
                                                   done_as=f"downloaded {what}", announce=True) as shown:
            for block in response.iter_content(CHUNK):
                fh.write(block)
                shown.advance(len(block))


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


def extract_vendored_tree(sdist: Path, package: str, version: str, into: Path) -> str:
    """Unpack vendor/llama.cpp of the sdist into the empty folder `into`; return the upstream commit.

    The whole archive is read to its end, so a truncated sdist is SdistUnreadable, never a tree
    with files missing.
    """
    what = f"pypi:{package}=={version}"
    with _reading(sdist, what, str(into)):
        with tarfile.open(sdist, "r:*") as tar:
            commit, members = _vendored_members(tar, version)
            _check_members(members)
            if EXTRACTION_FILTERS:
                tar.extractall(into, members=members, filter="data")
            else:
                tar.extractall(into, members=members)
            while tar.fileobj.read(1 << 20):  # the rest, to the compressed stream's checksum
                pass
    return _checked_commit(sdist, what, version, commit, members)


def stream_vendored_tree(sdist: Path, package: str, version: str, on_member, dest: str) -> tuple[str, list[tarfile.TarInfo]]:
    """Read vendor/llama.cpp of the sdist once, front to back, handing each file or symlink to
    `on_member(member, tar)` as it passes (renamed to its path in the tree; the data is read then, no file
    written); return the upstream commit and the members, checked as extract_vendored_tree checks them.

    Written for `git fast-import`: a refusal of `_check_members` comes after the members went by, so
    what on_member wrote must stay unused until this returns. `dest` names where they go in messages.
    """
    what = f"pypi:{package}=={version}"
    with _reading(sdist, what, dest):
        with tarfile.open(sdist, "r:*") as tar:
            commit, members = _vendored_members(tar, version, on_member)
            _check_members(members)
            while tar.fileobj.read(1 << 20):  # the rest, to the compressed stream's checksum
                pass
    return _checked_commit(sdist, what, version, commit, members), members


def _vendored_members(tar: tarfile.TarFile, version: str, on_member=None) -> tuple[str | None, list[tarfile.TarInfo]]:
    """The commit the CHANGELOG names and the files and symlinks of the vendored tree, in archive order."""
    commit = None
    members = []
    for member in tar:
        parts = member.name.split("/", 1)
        if len(parts) < 2:
            continue
        rel = parts[1]
        if rel == "CHANGELOG.md" and member.isfile():
            handle = tar.extractfile(member)
            assert handle is not None   # a regular file
            text = handle.read().decode("utf-8", errors="replace")
            commit = changelog_commit(text, version)
            continue
        if not rel.startswith(VENDOR_DIR + "/"):
            continue
        inner = rel[len(VENDOR_DIR) + 1:]
        if inner in ("", ".git") or not (member.isfile() or member.issym()):
            continue  # directories are made as needed; devices, fifos and hard links never
        member.name = inner
        members.append(member)
        if on_member is not None:
            on_member(member, tar)
    return commit, members


@contextmanager
def _reading(sdist: Path, what: str, dest: str):
    """Archive faults as SdistUnreadable (downloaded again), faults of our disk as UpstreamError."""
    try:
        yield
    except OSError as exc:
        if exc.errno is not None:  # our disk (full, unwritable), not the archive
            raise UpstreamError(f"{what}: unpacking {sdist.name} into {dest}: {exc.strerror}") from None
        raise SdistUnreadable(f"{what}: unreadable sdist {sdist} ({type(exc).__name__}: {exc})") from None
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise SdistUnreadable(f"{what}: unreadable sdist {sdist} ({type(exc).__name__}: {exc})") from None


def _checked_commit(sdist: Path, what: str, version: str, commit: str | None, members: list) -> str:
    if not members:
        raise UpstreamError(f"{what}: sdist {sdist.name} has no vendored {VENDOR_DIR} tree")
    if commit is None:
        raise UpstreamError(f"{what}: CHANGELOG.md names no llama.cpp commit for {version}")
    return commit


def plain_tree(members: list[tarfile.TarInfo]) -> str | None:
    """Why `git add -A` of the unpacked members could store another tree than their names, modes and bytes
    (None when it cannot): then the tree is imported from disk as before, not streamed into git fast-import.

    A `.gitattributes` (its filters apply on add), a `.git` in any spelling git protects, a name given twice
    or that is both a file and a folder, a path git or fast-import would read otherwise, a symlink whose
    target passes through another symlink (the data filter resolves it on disk)."""
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        return "a member named twice"
    folders = set()
    for name in names:
        cut = name.rfind("/")
        while cut > 0:
            folders.add(name[:cut])
            cut = name.rfind("/", 0, cut)
    if folders.intersection(names):
        return "a name that is a file and a folder"
    links = {m.name for m in members if m.issym()}
    for member in members:
        parts = member.name.split("/")
        if any(not part or part in (".", "..") or _git_special(part) for part in parts) \
                or any(ord(c) < 0x20 or c in '"\\' for c in member.name):
            return f"{member.name}: a name git treats specially"
        if member.issym() and parts[-1].lower().startswith(".git"):
            return f"{member.name}: a symlinked git file"
        if member.issym():
            walked: list[str] = []
            for part in [*parts[:-1], *member.linkname.split("/")]:
                if walked and "/".join(walked) in links:
                    return f"{member.name}: a symlink through a symlink"
                if part == "..":
                    if walked:
                        walked.pop()
                elif part not in ("", "."):
                    walked.append(part)
    return None


def _git_special(part: str) -> bool:
    low = part.lower()
    return low == ".gitattributes" or low.rstrip(". ") == ".git" or low.startswith("git~")
