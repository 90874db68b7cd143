"""Prepare each pin once per run: its patch files and its net change (shared by every build)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pinset.config.schema import PinSet, PinSpec
from pinset.errors import UpstreamError
from pinset.redact import redact_url
from pinset.sim.changes import PinChange, combine, file_changes, patch_text
from pinset.sim.diffs import DiffError, path_problem, read_diffs
from pinset.sim.model import BuildResult
from pinset.store import Store, read_checked, write_checked
from pinset.upstream.builds import UPSTREAM_HEAD_REF, fetch_fork, fetch_head, upstream_url
from pinset.upstream.mirror import Mirror


@dataclass
class PreparedPin:
    spec: PinSpec
    change: PinChange | None = None
    error: str | None = None       # why the pin could not be prepared (e.g. commit not found)
    fork_point: str | None = None  # PR pins: the upstream commit the PR branched from

    def feature_symbols(self) -> set[str]:
        """Feature symbols (GGML_TYPE_..., LLM_ARCH_...) on the pin's added lines: what verify
        checks the built programs for. Empty when the pin could not be prepared."""
        if self.change is None:
            return set()
        return set().union(*(fc.symbols for fc in self.change.files.values()))


def carried_symbols(prepared: dict[str, PreparedPin], build: BuildResult) -> set[str]:
    """Feature symbols of the pins a build carries (applied on it, or already upstream)."""
    return set().union(*(prepared[p.id].feature_symbols() for p in build.pins
                         if p.in_tree and p.id in prepared))


def prepare_pins(pinset: PinSet, store: Store | None, mirror: Mirror) -> dict[str, PreparedPin]:
    """Each pin's change read (a series) or fetched and diffed (a PR: its diff cached in `store`, which only
    series-only pin sets may leave out)."""
    prepared: dict[str, PreparedPin] = {}
    head_fetched = False
    for spec in pinset.pins:
        if spec.patches is not None:
            files, texts = [], []
            for f in spec.patch_files():
                data = as_git_am_reads(f.read_bytes())
                texts.append((f.name, patch_text(data)))
                files.append(f if data == f.read_bytes() else _copy(mirror, f, data))
            try:
                change = read_change(files, texts)
            except PinProblem as exc:  # git can never apply it: no build is to blame (not a conflict with upstream)
                prepared[spec.id] = PreparedPin(spec, error=str(exc))
                continue
            prepared[spec.id] = PreparedPin(spec, change)
            continue
        assert pinset.upstream is not None   # config.schema: PR pins need an upstream
        url = upstream_url(pinset.upstream, pinset.path.parent)
        if not head_fetched:
            fetch_head(url, mirror)
            head_fetched = True
        assert store is not None   # a PR pin's diff is cached in the store
        prepared[spec.id] = _prepare_pr(spec, url, store, mirror)
    return prepared


def as_git_am_reads(data: bytes) -> bytes:
    """A series' patch as `git am` hands it to `git apply` when the patch was saved with CRLF line ends (a
    Windows editor or mailer: its first line ends in CRLF): mailsplit takes the CR off every line that ends
    in CRLF. A patch of LF lines whose diff lines end in CRLF (format-patch of a CRLF file) is kept as it is:
    its CRs are the file's, as `git am --keep-cr` keeps them (pinset's worktrees run am so)."""
    first = data.split(b"\n", 1)[0]
    return data.replace(b"\r\n", b"\n") if first.endswith(b"\r") else data


def _copy(mirror: Mirror, patch: Path, data: bytes) -> Path:
    """The patch as git am reads it, in the mirror's temporary folder under its own name (messages name it)."""
    folder = mirror.fresh_path("patch")
    folder.mkdir()
    (folder / patch.name).write_bytes(data)
    return folder / patch.name


def _prepare_pr(spec: PinSpec, url: str, store: Store, mirror: Mirror) -> PreparedPin:
    assert spec.pr is not None and spec.commit is not None   # a PR pin (config.schema: pr: and its commit)
    pr_ref = f"refs/pinset/pr/{spec.pr.owner}/{spec.pr.repo}/{spec.pr.number}"
    if not mirror.has_commit(spec.commit):
        mirror.fetch(url, [f"+{spec.pr.ref}:{pr_ref}"])
    if not mirror.has_commit(spec.commit):
        mirror.fetch(url, [spec.commit])
    if not mirror.has_commit(spec.commit) and spec.repo is not None:  # a PR from a fork: its own repository
        fetch_fork(spec.repo, spec.commit, spec.pr.ref, mirror)
        url = f"{redact_url(url)} or {redact_url(spec.repo)}"
    if not mirror.has_commit(spec.commit):
        return PreparedPin(spec, error=f"commit {spec.commit[:12]} of {redact_url(spec.pr.url)} not found at {redact_url(url)} "
                                        f"(neither on {spec.pr.ref} nor fetchable by sha)")
    try:
        fork = fork_point(mirror, spec.commit)
    except UpstreamError as exc:
        return PreparedPin(spec, error=str(exc))
    # "-bytes": the diff as git wrote it (earlier runs stored it decoded, a non-UTF-8 line's bytes lost)
    diff_path = (store.dir("pins")
                 / f"{spec.pr.owner}-{spec.pr.repo}-{spec.pr.number}-{spec.commit[:12]}-{fork[:12]}-bytes.diff")
    cached = read_checked(diff_path)  # None: missing, half-written or damaged -> made again
    if cached is None:
        made = mirror.git("diff", "--binary", "--full-index", "--no-color", fork, spec.commit, binary=True)
        if not made.ok:
            raise UpstreamError(f"git diff --binary --full-index: {made.tail(3) or made.describe()}")   # as git_ok
        cached = made.stdout if isinstance(made.stdout, bytes) else made.stdout.encode()
        write_checked(diff_path, cached)
    text = patch_text(cached)
    try:
        change = read_change([diff_path] if text.strip() else [], [(f"the diff of {redact_url(spec.pr.url)}", text)])
    except PinProblem as exc:
        return PreparedPin(spec, error=str(exc), fork_point=fork)
    return PreparedPin(spec, change, fork_point=fork)


class PinProblem(Exception):
    """Why a pin's patches can never apply to any build (the message names the patch and the file)."""


def read_change(patches: list[Path], texts: list[tuple[str, str]]) -> PinChange:
    """The net change of a pin from its patch texts ((shown name, text) each), each read once.

    A file name that cannot be read, a binary change without its data, a submodule or a path inside
    `.git` is a PinProblem: unknown files must never read as "touches nothing", and no build is to blame."""
    series = []
    for name, text in texts:
        try:
            diffs = read_diffs(text)
        except DiffError as exc:
            raise PinProblem(f"{name}: cannot read the files it changes: {exc}") from None
        for diff in diffs:
            # git applies one with full `index` ids where the repository holds its postimage (the engine looks
            # for it where `git am -3` would); with abbreviated ids never
            if diff.binary_without_data and (diff.blobs is None or any(len(oid) != 40 for oid in diff.blobs)):
                raise PinProblem(f"{name}: binary change of {diff.path} without its data or full index line "
                                 "(\"Binary files ... differ\"; make the patch with --binary)")
            problem = path_problem(diff)
            if problem:
                raise PinProblem(f"{name}: {problem}")
        series.append(diffs)
    touched = frozenset(n for diffs in series for diff in diffs for n in diff.names)
    return PinChange(patches, combine([file_changes(diffs) for diffs in series]), touched)


def fork_point(mirror: Mirror, commit: str) -> str:
    """Where the PR left upstream: its merge-base with upstream's default branch.

    If upstream already merged the PR with a merge commit, the pin commit is an ancestor of HEAD;
    then the fork point is its merge-base with the first parent of the merge that brought it in.
    """
    head = mirror.rev_parse(UPSTREAM_HEAD_REF)
    if head is None:
        raise UpstreamError(f"{commit[:12]}: upstream has no default branch to find the fork point against")
    base = mirror.git("merge-base", commit, head)
    if not base.ok:
        raise UpstreamError(f"{commit[:12]}: shares no history with upstream's default branch")
    fork = base.stdout.strip()
    if fork == commit:
        merges = mirror.git_ok("rev-list", "--ancestry-path", "--merges", "--reverse", f"{commit}..{head}").split()
        if merges:
            first_parent = mirror.git_ok("rev-parse", f"{merges[0]}^1").strip()
            fork = mirror.git_ok("merge-base", commit, first_parent).strip()
    return fork

