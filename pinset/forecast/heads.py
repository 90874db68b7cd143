"""The git side of a forecast: PR heads, the files each PR changes, and each PR merged onto the build.

Everything comes from git, in a number of processes that does not grow with the open PRs beyond one
`merge-tree` (and one `commit-tree`) per PR that touches a pin's file:
- one `git fetch --prune` of `refs/pull/*/head` into the mirror (`refs/pinset/pull/N`; a local upstream that
  holds such refs works the same), then one `for-each-ref`;
- one `rev-list --boundary` over every head not in upstream's default branch, which gives each PR's fork
  point (its merge base with that branch; a PR with several boundary commits asks `git merge-base`);
- one `diff-tree --stdin` for the files of every PR (fork point to head; GitHub's per-PR file lists stop at
  3,000 files and take a request per 30).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pinset.errors import UpstreamError
from pinset.redact import redact_url
from pinset.upstream.builds import UPSTREAM_HEAD_REF, Build, _unreachable, fetch_head
from pinset.upstream.mirror import _IDENTITY, Mirror

PULL_REFS = "refs/pinset/pull/"        # the mirror's copy of upstream's refs/pull/N/head
FORECAST_REFS = "refs/pinset/forecast/"  # BUILD+PR commits, kept so `pinset rebase --onto SHA` finds them
_HEX = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def fetch_pull_heads(url: str, mirror: Mirror) -> dict[int, str]:
    """Every `refs/pull/N/head` of upstream, fetched in one go: PR number -> head commit. A PR whose head is
    gone upstream is gone here too (--prune)."""
    result = mirror.fetch(url, ["--prune", f"+refs/pull/*/head:{PULL_REFS}*"])
    if not result.ok:
        if _unreachable(result.stderr):
            raise UpstreamError(f"upstream {redact_url(url)}: unreachable ({result.tail(1)})")
        raise UpstreamError(f"upstream {redact_url(url)}: fetching refs/pull/*/head failed ({result.tail(1)})")
    heads: dict[int, str] = {}
    listing = mirror.git_ok("for-each-ref", "--format=%(objectname) %(objecttype) %(refname)", PULL_REFS)
    for line in listing.splitlines():
        oid, kind, ref = line.split(" ", 2)
        number = ref[len(PULL_REFS):]
        if kind == "commit" and number.isdigit():
            heads[int(number)] = oid
    return heads


def default_branch(url: str, mirror: Mirror) -> str:
    head = fetch_head(url, mirror)
    if head is None:
        raise UpstreamError(f"upstream {redact_url(url)}: no default branch (HEAD) to find the PRs' fork points against")
    return head


def fork_points(mirror: Mirror, heads: list[str]) -> dict[str, str | None]:
    """head -> its merge base with upstream's default branch (None: no shared history)."""
    heads = sorted(set(heads))
    if not heads:
        return {}
    out = mirror.git_ok("rev-list", "--parents", "--boundary", "--stdin",
                        input="\n".join(heads) + f"\n^{UPSTREAM_HEAD_REF}\n")
    parents: dict[str, list[str]] = {}
    boundary: set[str] = set()
    for line in out.splitlines():
        ids = line.split()
        if not ids:
            continue
        if ids[0].startswith("-"):
            boundary.add(ids[0][1:])
        else:
            parents[ids[0]] = ids[1:]
    found: dict[str, frozenset[str]] = {}

    def bases_of(start: str) -> frozenset[str]:
        """The boundary commits (in upstream) reached from `start` through commits only PRs have."""
        stack, seen, reached = [start], set(), set[str]()
        while stack:
            commit = stack.pop()
            if commit in seen:
                continue
            seen.add(commit)
            if commit in found:
                reached |= found[commit]
            elif commit in boundary:
                reached.add(commit)
            elif commit in parents:
                stack += parents[commit]
        found[start] = frozenset(reached)
        return found[start]

    forks: dict[str, str | None] = {}
    for head in heads:
        if head not in parents:          # in the default branch's history already (merged, or its tip)
            forks[head] = head
            continue
        bases = bases_of(head)
        if len(bases) == 1:
            forks[head] = next(iter(bases))
            continue
        # no shared history (none), or several (a PR that merged the default branch in): git picks the best
        result = mirror.git("merge-base", UPSTREAM_HEAD_REF, head) if bases else None
        forks[head] = result.stdout.strip() if result is not None and result.ok else None
    return forks


def changed_files(mirror: Mirror, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], set[str]]:
    """(fork, head) -> the paths the PR changes (both names of a rename), from one `diff-tree --stdin`."""
    pairs = sorted(set(pairs))
    if not pairs:
        return {}
    # A line "HEAD FORK" diffs FORK..HEAD as if FORK were HEAD's parent; --always prints HEAD even for an
    # empty diff, so each answer starts with the head it belongs to.
    out = mirror.git_ok("diff-tree", "--stdin", "--always", "-r", "--name-only", "--no-renames", "-z",
                        input="".join(f"{head} {fork}\n" for fork, head in pairs))
    tokens = out.split("\0")
    files: dict[tuple[str, str], set[str]] = {}
    i = 0
    for n, pair in enumerate(pairs):
        head = pair[1]
        nxt = pairs[n + 1][1] if n + 1 < len(pairs) else None
        while i < len(tokens) and tokens[i].strip() != head:
            i += 1
        i += 1
        names: set[str] = set()
        while i < len(tokens) and tokens[i] and not (tokens[i].strip() == nxt and _HEX.match(tokens[i].strip())):
            names.add(tokens[i])
            i += 1
        files[pair] = names
    return files


@dataclass(frozen=True)
class Merged:
    merges: bool
    build: Build | None = None   # BUILD+PR (None when it does not merge)
    conflicts: tuple[str, ...] = ()


def merge_onto(mirror: Mirror, onto: Build, number: int, head: str, fork: str) -> Merged:
    """`git merge-tree --write-tree` of the PR onto the build, as a commit (parents: the build, the PR head;
    kept under refs/pinset/forecast/N by keep_refs). An sdist build (or any build) that has no history shared
    with the PR is merged as a child of the PR's fork point (the tree upstream had where the PR started)."""
    result = None
    if onto.source == "git":
        result = mirror.git("merge-tree", "--write-tree", "--name-only", "--no-messages", onto.oid, head)
    if result is None or "unrelated histories" in result.stderr:
        ours = mirror.git_ok("commit-tree", onto.tree, "-p", fork, "-m", f"{onto.name} on {fork}",
                             env=_IDENTITY).strip()
        result = mirror.git("merge-tree", "--write-tree", "--name-only", "--no-messages", ours, head)
    lines = result.stdout.splitlines()
    if result.returncode == 1 and lines:
        return Merged(False, conflicts=tuple(sorted(set(lines[1:]))))
    if not result.ok or not lines or not _HEX.match(lines[0]):
        raise UpstreamError(f"git merge-tree of PR #{number} onto {onto.name}: {result.tail(2) or result.describe()}")
    tree = lines[0]
    commit = mirror.git_ok("commit-tree", tree, "-p", onto.oid, "-p", head,
                           "-m", f"forecast: PR #{number} ({head[:12]}) onto {onto.name}", env=_IDENTITY).strip()
    # The build's name and upstream commit stay (a PR is judged as "this build once the PR lands").
    return Merged(True, Build(f"{onto.name}+#{number}", onto.commit, commit, tree, onto.source))


def keep_refs(mirror: Mirror, commits: dict[int, str]) -> None:
    """refs/pinset/forecast/N -> the BUILD+PR commit of PR N (one `update-ref --stdin`), older ones dropped."""
    old = mirror.git_ok("for-each-ref", "--format=%(refname)", FORECAST_REFS).split()
    lines = [f"delete {ref}\n" for ref in old if ref[len(FORECAST_REFS):] not in {str(n) for n in commits}]
    lines += [f"update {FORECAST_REFS}{n} {commit}\n" for n, commit in sorted(commits.items())]
    if lines:
        with mirror.lock():
            mirror.git_ok("update-ref", "--stdin", input="".join(lines))
