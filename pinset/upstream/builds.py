"""Turn the build names of pins.yaml into commits in the mirror."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from pinset.config.schema import PYPI_BUILD_RE, SHA_RE
from pinset.errors import UpstreamError
from pinset.redact import redact_url
from pinset.store import Store
from pinset.upstream import pypi
from pinset.upstream.mirror import Mirror, url_key
from pinset.upstream.select import expand_builds, not_a_commit

UPSTREAM_HEAD_REF = "refs/pinset/upstream/HEAD"
# every branch and tag of upstream as the last lookup of 3-way preimages fetched them (pruned)
UPSTREAM_REFS = "refs/pinset/upstream-refs/"


@dataclass(frozen=True)
class Build:
    name: str      # as spelled in pins.yaml / --builds
    commit: str    # the upstream llama.cpp commit (from git, or the sdist's CHANGELOG)
    oid: str       # the commit in the mirror whose tree is the build
    tree: str      # that commit's tree
    source: str    # "git" or "pypi"


def upstream_url(upstream: str, base: Path) -> str:
    if re.match(r"^(https?|ssh|git|file)://", upstream) or re.match(r"^[\w.-]+@[\w.-]+:", upstream):
        return upstream
    return str((base / upstream).expanduser().resolve())


def resolve_builds(names: list[str], upstream: str | None, base: Path, store: Store, mirror: Mirror) -> list[Build]:
    """resolve_build of each name, the trees checked whole together (one process, Mirror.check_trees)."""
    names = expand_builds(names, upstream_url(upstream, base) if upstream else None, mirror)
    builds = [resolve_build(name, upstream, base, store, mirror, check=False) for name in names]
    mirror.check_trees([build.tree for build in builds])
    return builds


def resolve_build(name: str, upstream: str | None, base: Path, store: Store, mirror: Mirror,
                  check: bool = True) -> Build:
    """The build as a commit in the mirror, its tree checked whole (a lost blob is damage, not a conflict;
    `check=False`: the caller checks it)."""
    m = PYPI_BUILD_RE.match(name)
    if m:
        build = _pypi_build(name, m["package"], m["version"], store, mirror)
    elif upstream is None:
        raise UpstreamError(f"build {name!r}: no upstream configured to fetch it from")
    else:
        build = _git_build(name, upstream_url(upstream, base), mirror)
    if check:
        mirror.check_tree(build.tree)
    return build


def _pypi_build(name: str, package: str, version: str, store: Store, mirror: Mirror) -> Build:
    ref = f"refs/pinset/pypi/{package}/{version}"
    known = mirror.commit_of(ref)   # the imported commit, its tree and message: no process
    if known is None:
        with store.lock(f"pypi-{pypi.normalized_name(package)}-{version}", waiting=f"{name}: waiting for another pinset importing it"):
            oid = mirror.rev_parse(ref) or _import_sdist(package, version, ref, store, mirror)
        known = (oid, mirror.tree_of(oid), mirror.commit_message(oid))
    oid, tree, message = known
    commit = _trailer(message, "upstream-commit") or "unknown"
    return Build(name, commit, oid, tree, "pypi")


def _import_sdist(package: str, version: str, ref: str, store: Store, mirror: Mirror) -> str:
    """Import the sdist's vendored tree at `ref`; a cached sdist that turns out unreadable
    (truncated) is dropped and downloaded once more."""
    sdist = pypi.download_sdist(package, version, store.downloads)
    try:
        return _import_tree(sdist, package, version, ref, store, mirror)
    except pypi.SdistUnreadable:
        pypi.forget(sdist)
    return _import_tree(pypi.download_sdist(package, version, store.downloads), package, version, ref, store, mirror)


def _import_tree(sdist: Path, package: str, version: str, ref: str, store: Store, mirror: Mirror) -> str:
    """Stream vendor/llama.cpp into `git fast-import` and commit it at `ref`: the archive is read once,
    no file is written (unpacking 3,400 files and `git add -A` of them took 6-7 s a build). A tree that
    `git add` could store otherwise (pypi.plain_tree: a .gitattributes...) is unpacked in the cache's
    scratch space and added from there, as before; both give the same tree and commit ids."""
    with store.scratch("sdist-") as scratch:
        files: list[tuple[bytes, str, bytes]] = []
        with mirror.tree_import(scratch) as importer:
            def send(member, tar) -> None:
                if member.issym():
                    files.append((os.fsencode(member.name), "120000", importer.add_blob(os.fsencode(member.linkname))))
                    return
                mode = "100755" if member.mode & 0o100 else "100644"  # what git add reads from the unpacked file
                with tar.extractfile(member) as fh:
                    files.append((os.fsencode(member.name), mode, importer.add_blob(fh.read())))

            upstream_commit, members = pypi.stream_vendored_tree(sdist, package, version, send, str(mirror.path))
            if pypi.plain_tree(members) is None:
                return importer.commit(files, ref, _import_message(package, version, upstream_commit))
    with store.scratch("sdist-") as tree_dir:
        upstream_commit = pypi.extract_vendored_tree(sdist, package, version, tree_dir)
        return mirror.import_directory(tree_dir, ref, _import_message(package, version, upstream_commit))


def _import_message(package: str, version: str, upstream_commit: str) -> str:
    return f"llama.cpp {upstream_commit} vendored in {package}=={version}\n\nupstream-commit: {upstream_commit}\n"


def _trailer(message: str, key: str) -> str | None:
    m = re.search(rf"^{key}: (\S+)$", message, re.M)
    return m.group(1) if m else None


def _git_build(name: str, url: str, mirror: Mirror) -> Build:
    tag_ref = f"refs/pinset/upstream/tags/{name}"
    known = mirror.commit_of(tag_ref)   # no process for a tag fetched before
    if known is not None:
        return Build(name, known[0], known[0], known[1], "git")
    oid = mirror.rev_parse(name) if SHA_RE.match(name) else None
    if oid is None:
        oid = _fetch_build(name, url, mirror, tag_ref)
    return Build(name, oid, oid, mirror.tree_of(oid), "git")


def _fetch_build(name: str, url: str, mirror: Mirror, tag_ref: str) -> str:
    # Tags are immutable: keep them. Branches move: fetch them every time. Commits: fetch by sha.
    attempts = [(f"+refs/tags/{name}:{tag_ref}", tag_ref),
                (f"+refs/heads/{name}:refs/pinset/upstream/heads/{name}", f"refs/pinset/upstream/heads/{name}")]
    if re.fullmatch(r"[0-9a-f]{40}", name):
        attempts.append((name, name))
    errors = []
    for refspec, ref in attempts:
        result = mirror.fetch(url, [refspec])
        if result.ok:
            oid = mirror.rev_parse(ref)
            if oid:
                return oid
            kind = not_a_commit(mirror, ref)
            if kind:
                what = "tag" if ref == tag_ref else "branch" if ref.startswith("refs/") else "object"
                raise UpstreamError(f"build {name!r}: {what} {name} at {redact_url(url)} points at a {kind}, "
                                    "not a commit (a build is a commit)")
        errors.append(result.tail(1))
        if _unreachable(result.stderr):
            raise UpstreamError(f"upstream {redact_url(url)}: unreachable ({result.tail(1)})")
    if SHA_RE.match(name):
        # An abbreviated sha can only be found in history we already have.
        fetch_head(url, mirror)
        oid = mirror.rev_parse(name)
        if oid:
            return oid
    raise UpstreamError(f"build {name!r}: no such tag, branch or commit at {redact_url(url)}")


def _unreachable(stderr: str) -> bool:
    text = stderr.lower()
    return any(s in text for s in ("could not resolve host", "does not appear to be a git repository",
                                   "unable to access", "connection refused", "not found",
                                   "could not read from remote"))


def fetch_head(url: str, mirror: Mirror, needed_for: str = "") -> str | None:
    """Fetch upstream's default branch (PR fork points, forecast); None when upstream has none. Any other
    failed fetch (offline, a broken pack, a timeout) is an UpstreamError: no answer, never the answer of a
    run without it (nor an earlier run's ref)."""
    _fetch_upstream(url, mirror, [], needed_for)
    return mirror.rev_parse(UPSTREAM_HEAD_REF)


def fetch_upstream_refs(url: str, mirror: Mirror, needed_for: str = "") -> list[str]:
    """Fetch every branch and tag of upstream and its default branch, as a full clone made now has them (the
    preimages `git am -3` finds there): into UPSTREAM_REFS/<url key>/ (Mirror's url_key: no token in a ref name), pruned (a ref upstream dropped goes, so
    no earlier run's ref stands in for upstream's; a key per URL, so pin sets of other upstreams sharing the
    cache never mix theirs in), HEAD also into UPSTREAM_HEAD_REF. The commits they name, sorted (a tag of a
    tree or a blob names none). A failed fetch is an UpstreamError, as for fetch_head."""
    space = f"{UPSTREAM_REFS}{url_key(url)}/"
    _fetch_upstream(url, mirror, [f"+refs/heads/*:{space}heads/*", f"+refs/tags/*:{space}tags/*", f"+HEAD:{space}HEAD"],
                    needed_for, prune=True)
    names = mirror.git_ok("for-each-ref", "--format=%(objectname)", space).split()
    if not names:
        return []
    peeled = mirror.git_ok("cat-file", "--batch-check=%(objectname) %(objecttype)",
                           input="".join(f"{oid}^{{commit}}\n" for oid in dict.fromkeys(names)))
    return sorted({line.split()[0] for line in peeled.splitlines() if line.endswith(" commit")})


def commits_named(prefix: str, url: str, mirror: Mirror) -> list[str]:
    """The commits of upstream whose ids start with `prefix` (an abbreviated sha, as Ollama's Makefile.sync
    `FETCH_HEAD=ec98e2002` names its base), as git answers `PREFIX^{commit}` in a full clone of upstream made
    now: upstream's branches and tags fetched, the objects of that prefix that are commits reachable from them
    (objects other upstreams left in the shared cache are not upstream's). One: the commit; none: unknown;
    several: ambiguous (the caller says which)."""
    tips = fetch_upstream_refs(url, mirror, needed_for=f" (to resolve the abbreviated commit {prefix})")
    listed = mirror.git("rev-parse", f"--disambiguate={prefix}", check_damage=False)
    candidates = listed.stdout.split() if listed.ok else []
    if not candidates or not tips:
        return []
    kinds = mirror.git_ok("cat-file", "--batch-check=%(objectname) %(objecttype)",
                          input="".join(f"{oid}\n" for oid in candidates))
    commits = sorted(line.split()[0] for line in kinds.splitlines() if line.endswith(" commit"))
    found = []
    for commit in commits:   # reachable from upstream's refs: nothing of it is left out of them
        left = mirror.git_ok("rev-list", "--stdin", input="\n".join([commit, *(f"^{tip}" for tip in tips)]) + "\n")
        if not left.strip():
            found.append(commit)
    return found


def _fetch_upstream(url: str, mirror: Mirror, refspecs: list[str], needed_for: str, prune: bool = False) -> None:
    """Fetch upstream's HEAD (into UPSTREAM_HEAD_REF) with the refspecs; upstream without a default branch
    (an empty or headless repository) removes every ref HEAD was fetched into rather than leaving an earlier
    run's, and the other refspecs are fetched without it."""
    result = mirror.fetch(url, [f"+HEAD:{UPSTREAM_HEAD_REF}", *refspecs], prune=prune)
    if result.ok:
        return
    if _unreachable(result.stderr) or "couldn't find remote ref" not in result.stderr:
        _fetch_failed(url, result, "its default branch could not be fetched", needed_for)
    # upstream has no default branch now: an earlier run's ref must not stand in for it
    heads = [UPSTREAM_HEAD_REF, *(spec.split(":", 1)[1] for spec in refspecs if spec.startswith("+HEAD:"))]
    for ref in heads:
        mirror.git("update-ref", "-d", "--no-deref", ref, check_damage=False)
    rest = [spec for spec in refspecs if not spec.startswith("+HEAD:")]
    if rest:
        result = mirror.fetch(url, rest, prune=prune)
        if not result.ok:
            _fetch_failed(url, result, "its branches and tags could not be fetched", needed_for)


def _fetch_failed(url: str, result, otherwise: str, needed_for: str) -> NoReturn:
    what = "unreachable" if _unreachable(result.stderr) else otherwise
    raise UpstreamError(f"upstream {redact_url(url)}: {what}{needed_for} ({result.tail(1)})")


def fetch_fork(url: str, commit: str, pr_ref: str, mirror: Mirror) -> None:
    """A PR pin's commit from its own repository (a fork): by sha, else with the fork's branches (a server
    that refuses unadvertised shas), under refs/pinset/fork/ so they never pass for upstream's."""
    key = url_key(url)   # never the URL itself: it may hold a token
    for refspecs in ([commit], [f"+refs/heads/*:refs/pinset/fork/{key}/heads/*"], [f"+{pr_ref}:refs/pinset/fork/{key}/pr"]):
        result = mirror.fetch(url, refspecs)
        if not result.ok and _unreachable(result.stderr) and "not found" not in result.stderr.lower():
            raise UpstreamError(f"repository {redact_url(url)}: unreachable ({result.tail(1)})")
        if mirror.has_commit(commit):
            return
