"""Upstream history between two builds, read once: the first-parent line and what each commit says.

Bisection walks the first-parent line (the order upstream's default branch received changes), so a
merge commit is one step and its merged PR is named afterwards, as `git bisect --first-parent` does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pinset.errors import PinsetError
from pinset.upstream.mirror import Mirror

_SQUASH_PR_RE = re.compile(r"\(#(\d+)\)\s*$")
_MERGE_PR_RE = re.compile(r"^Merge pull request #(\d+)\b")


@dataclass(frozen=True)
class Commit:
    sha: str
    tree: str
    parents: tuple[str, ...]
    subject: str

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1


def pr_number(subject: str) -> int | None:
    """The PR a subject names: `... (#12345)` (squash merge) or `Merge pull request #12345 ...`."""
    m = _SQUASH_PR_RE.search(subject) or _MERGE_PR_RE.match(subject)
    return int(m.group(1)) if m else None


def _commits(mirror: Mirror, *rev_args: str) -> list[Commit]:
    out = mirror.git_ok("log", "--format=%H%x1f%T%x1f%P%x1f%s%x1e", *rev_args)
    commits = []
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        sha, tree, parents, subject = record.split("\x1f", 3)
        commits.append(Commit(sha, tree, tuple(parents.split()), subject))
    return commits


def first_parent_line(mirror: Mirror, good: str, bad: str, good_name: str, bad_name: str) -> list[Commit]:
    """[good, ..., bad]: `good` then the first-parent commits of `bad` that contain it (all of them after it
    when `good` is on the first-parent line), oldest first."""
    if good == bad:
        raise PinsetError(f"--good {good_name} and --bad {bad_name} are the same commit ({good[:12]})")
    if not mirror.git("merge-base", "--is-ancestor", good, bad).ok:
        raise PinsetError(f"--good {good_name} ({good[:12]}) is not an ancestor of --bad {bad_name} ({bad[:12]}): "
                          "blame needs a range of upstream history")
    line = _commits(mirror, "--first-parent", "--reverse", f"{good}..{bad}")
    # With `good` on a side branch merged into the line, the first-parent commits before that merge
    # do not contain it: a pin made on `good` may fail there for no fault of theirs. Keep only the
    # commits that contain `good` (the line then starts at the merge that brought it in).
    descendants = set(mirror.git_ok("rev-list", "--ancestry-path", f"{good}..{bad}").split())
    return _commits(mirror, "-1", good) + [c for c in line if c.sha in descendants]


def merged_pr(mirror: Mirror, merge: Commit) -> tuple[int | None, int]:
    """(PR number, commits merged) of a merge commit: from its subject, else its merged side's subjects."""
    side = _commits(mirror, "--first-parent", f"{merge.parents[0]}..{merge.parents[1]}")
    number = pr_number(merge.subject)
    for commit in side:
        if number is not None:
            break
        number = pr_number(commit.subject)
    return number, len(side)
