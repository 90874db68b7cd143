"""The distributor's repository (the one holding pins.yaml), touched only where a bump must touch it.

A bump works in a temporary worktree of it, detached at HEAD: the user's checkout, its branch, index and
uncommitted files are never read or written (pins.yaml is HEAD's). What changes in the repository: objects,
the bump branch (moved by compare-and-swap, only once everything else succeeded) and the remote's branch
(pushed with a lease on the value just read). Git never prompts, and no credential is written anywhere:
pushing uses whatever the repository's remote already authenticates with.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from pinset import runner
from pinset.errors import PinsetError, RuntimeFailure

_QUIET = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
_FALLBACK_IDENTITY = {"GIT_AUTHOR_NAME": "pinset", "GIT_AUTHOR_EMAIL": "pinset@localhost",
                      "GIT_COMMITTER_NAME": "pinset", "GIT_COMMITTER_EMAIL": "pinset@localhost"}
ZERO = "0" * 40
# The trailer that marks a commit pinset bump made: the commit's own tree. A commit without it, or whose tree is
# not the one it names (a person amended it), is not pinset's, and a bump never rewrites or moves it away.
TRAILER = "Pinset-Bump"
_TRAILER_RE = re.compile(rf"^{TRAILER}: ([0-9a-f]{{40}}|[0-9a-f]{{64}})$", re.M)
MAX_LISTED = 50   # commits of a branch read to decide (a bump branch holds one)


@dataclass(frozen=True)
class Foreign:
    """A commit on a branch that pinset did not make (`author`: its committer, who made it as it is)."""
    sha: str
    author: str
    subject: str

    def __str__(self) -> str:
        return f"{self.sha[:12]} by {self.author}: {self.subject!r}"


def trailer(tree: str) -> str:
    return f"{TRAILER}: {tree}"


def made_by_pinset(message: str, tree: str) -> bool:
    """The message carries pinset's trailer naming this very tree (the last such line counts)."""
    found = _TRAILER_RE.findall(message)
    return bool(found) and found[-1] == tree


class Repository:
    def __init__(self, top: Path):
        self.top = top

    @classmethod
    def holding(cls, path: Path) -> Repository:
        """The work tree that holds `path` (bad input when there is none, or no commit yet)."""
        found = runner.run(["git", "rev-parse", "--show-toplevel"], cwd=path.parent, env=_QUIET)
        if not found.ok:
            raise PinsetError(f"{path}: not in a git work tree; `pinset bump` commits in the repository that "
                              "holds pins.yaml")
        repo = cls(Path(found.stdout.strip()).resolve())
        if repo.rev("HEAD") is None:
            raise PinsetError(f"{repo.top}: no commit yet; commit pins.yaml first")
        return repo

    def git(self, *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 900) -> runner.Completed:
        return runner.run(["git", *args], cwd=cwd or self.top, env={**_QUIET, **(env or {})}, timeout=timeout)

    def git_ok(self, *args: str, cwd: Path | None = None, env: dict | None = None) -> str:
        done = self.git(*args, cwd=cwd, env=env)
        if not done.ok:
            raise RuntimeFailure(f"git {' '.join(args[:2])} in {cwd or self.top}: {done.tail(3) or done.describe()}")
        return done.stdout

    def rev(self, name: str) -> str | None:
        done = self.git("rev-parse", "-q", "--verify", f"{name}^{{commit}}")
        return done.stdout.strip() if done.ok else None

    def relative(self, path: Path) -> str:
        """`path` relative to the work tree (pins.yaml, a patch folder), as git names it."""
        try:
            return path.resolve().relative_to(self.top).as_posix()
        except ValueError:
            raise PinsetError(f"{path}: outside the repository {self.top} that holds pins.yaml; a bump can commit "
                              "only what is in it") from None

    def tracked(self, rel: str) -> bool:
        return self.git("cat-file", "-e", f"HEAD:{rel}").ok

    def uncommitted(self, rels: list[str]) -> list[str]:
        """Which of these paths differ in the checkout (staged or not, or untracked) from HEAD."""
        done = self.git("status", "--porcelain", "--untracked-files=all", "--", *rels)
        return sorted({line[3:] for line in done.stdout.splitlines() if len(line) > 3})

    def current_branch(self) -> str | None:
        done = self.git("symbolic-ref", "-q", "--short", "HEAD")
        return done.stdout.strip() if done.ok and done.stdout.strip() else None

    def check_branch_name(self, branch: str) -> None:
        if not self.git("check-ref-format", "--branch", branch).ok or branch.startswith("-"):
            raise PinsetError(f"--branch {branch!r}: not a valid branch name")
        checked_out = [line[len("branch refs/heads/"):] for line in
                       self.git_ok("worktree", "list", "--porcelain").splitlines() if line.startswith("branch ")]
        if branch in checked_out:
            raise PinsetError(f"--branch {branch}: checked out in a worktree of {self.top}; a bump never moves a "
                              "branch someone works on (switch away, or name another --branch)")

    # --- the temporary worktree -------------------------------------------------------------------
    def add_worktree(self, where: Path) -> Path:
        made = self.git("worktree", "add", "-q", "--detach", str(where), "HEAD")
        if not made.ok:
            raise RuntimeFailure(f"git worktree add {where}: {made.tail(2) or made.describe()}")
        return where

    def remove_worktree(self, where: Path) -> None:
        self.git("worktree", "remove", "--force", "--force", str(where))
        if where.exists():
            shutil.rmtree(where, ignore_errors=True)
        self.git("worktree", "prune")

    def commit(self, tree: Path, paths: list[str], message: str) -> str | None:
        """Commit these paths of the worktree, the message ending in pinset's trailer (naming the commit's tree);
        None when they are as HEAD has them."""
        self.git_ok("add", "-A", "--", *paths, cwd=tree)
        if self.git("diff", "--cached", "--quiet", cwd=tree).ok:
            return None
        message = message.rstrip("\n") + "\n\n" + trailer(self.git_ok("write-tree", cwd=tree).strip()) + "\n"
        known = self.git("var", "GIT_COMMITTER_IDENT", cwd=tree).ok and self.git("var", "GIT_AUTHOR_IDENT", cwd=tree).ok
        done = runner.run(["git", "-c", "commit.gpgSign=false", "commit", "-q", "--no-verify", "-F", "-"],
                          cwd=tree, env={**_QUIET, **({} if known else _FALLBACK_IDENTITY)}, input=message)
        if not done.ok:
            raise RuntimeFailure(f"git commit in {tree}: {done.tail(3) or done.describe()}")
        return self.git_ok("rev-parse", "HEAD", cwd=tree).strip()

    def same_change(self, a: str, b: str) -> bool:
        """Commit `a` makes the same change as `b`: same parent, same tree, same message."""
        if not self.git("cat-file", "-e", f"{a}^{{commit}}").ok:
            return False
        show = "--format=%P%n%T%n%B"
        return self.git_ok("show", "-s", show, a) == self.git_ok("show", "-s", show, b)

    def foreign(self, tip: str, base: str) -> list[Foreign]:
        """The commits of `tip` pinset did not make and that replacing it by a commit on `base` would drop or move
        away: those of tip's history not in base's, each without pinset's trailer; and `tip` itself when it is in
        base's history and not pinset's (a branch someone works on: main, the pull request's base). Empty: the
        branch holds pinset's commits only (first MAX_LISTED read; a longer branch is no bump branch)."""
        fields = "%H%x1f%T%x1f%cn%x1f%s%x1f%B%x1e"   # the committer: who made it last (an amend too)
        listed = self.git_ok("log", f"--format={fields}", f"--max-count={MAX_LISTED + 1}", tip, f"^{base}")
        commits = [entry.strip("\n").split("\x1f") for entry in listed.split("\x1e") if entry.strip("\n")]
        if not commits:
            commits = [self.git_ok("log", "-1", f"--format={fields}", tip).strip("\n").rstrip("\x1e").split("\x1f")]
        out = [Foreign(sha, author, subject) for sha, tree, author, subject, body in commits
               if not made_by_pinset(body, tree)]
        if len(commits) > MAX_LISTED and not out:
            out.append(Foreign(commits[-1][0], commits[-1][2], commits[-1][3]))
        return out

    # --- remote and branch ------------------------------------------------------------------------
    def remote_tip(self, remote: str, branch: str) -> str | None:
        """The remote branch's commit now (None: no such branch), fetched so that it can be compared."""
        listed = self.git("ls-remote", "--exit-code", remote, f"refs/heads/{branch}", timeout=300)
        if listed.returncode == 2:
            return None
        if not listed.ok:
            raise RuntimeFailure(f"git ls-remote {remote}: {listed.tail(2) or listed.describe()}")
        sha = listed.stdout.split()[0]
        if not self.git("cat-file", "-e", f"{sha}^{{commit}}").ok:
            self.git("fetch", "-q", "--no-tags", "--no-write-fetch-head", remote, f"refs/heads/{branch}", timeout=900)
        return sha

    def check_remote(self, remote: str) -> None:
        if remote.startswith("-") or not self.git("remote", "get-url", remote).ok:
            raise PinsetError(f"--push {remote}: no such remote in {self.top} (git remote -v lists them)")

    def check_not_default(self, remote: str, branch: str) -> None:
        """`branch` is not the remote's default branch (its HEAD: main, the pull request's base), which a bump
        never moves, even as a fast-forward onto a bump commit merged there."""
        listed = self.git("ls-remote", "--symref", remote, "HEAD", timeout=300)
        m = re.search(r"^ref: refs/heads/(\S+)\tHEAD$", listed.stdout, re.M) if listed.ok else None
        if m and m.group(1) == branch:
            raise PinsetError(f"--branch {branch}: the default branch of {remote}; a bump never moves it (its "
                              "commits are people's): name a branch of its own (default pinset/bump)")

    def push(self, remote: str, commit: str, branch: str, expected: str | None) -> None:
        """Push `commit` as the remote's `branch`, only if the remote still has exactly `expected` there (None: no
        such branch): a branch that moved since it was read (a person pushed onto it) is never overwritten."""
        lease = f"--force-with-lease=refs/heads/{branch}:{expected or ''}"
        done = self.git("push", "--porcelain", "--no-verify", lease, remote, f"{commit}:refs/heads/{branch}",
                        timeout=900)
        if not done.ok:
            raise RuntimeFailure(f"git push {remote} {branch}: {push_refusal(done.stdout, done.stderr, branch, expected)}"
                                 f" (the local branch {branch} was not moved)")

    def move_branch(self, branch: str, commit: str, old: str | None) -> None:
        """refs/heads/BRANCH := commit, only if it is still `old` (None: it did not exist)."""
        self.git_ok("update-ref", "-m", "pinset bump", f"refs/heads/{branch}", commit, old or ZERO)


def push_refusal(stdout: str, stderr: str, branch: str, expected: str | None) -> str:
    """Why a push failed, in one line: the remote's reason (a pre-receive hook's or branch protection's words,
    `remote:` lines), a lease that no longer holds (the branch moved since pinset read it), or git's last word."""
    said = [line[len("remote:"):].strip() for line in stderr.splitlines() if line.startswith("remote:")]
    said = [line for line in said if line and not set(line) <= set("-= ")]
    reason = None
    for line in stdout.splitlines():   # --porcelain: "!\t<from>:<to>\t[rejected] (<reason>)"
        if line.startswith("!"):
            m = re.search(r"\[(remote rejected|rejected)\] \((.*)\)\s*$", line) or re.search(r"\((.*)\)\s*$", line)
            reason = m.group(m.lastindex or 0) if m else line.split("\t")[-1]
    if reason == "stale info":
        was = f"at {expected[:12]}" if expected else "absent"
        return (f"the remote's {branch} moved since pinset read it ({was} then): not overwritten; the next run "
                "reads it again")
    words = "; ".join(said[-3:])
    if reason:
        return f"the remote refused it: {reason}" + (f" ({words})" if words else "")
    last = [line.strip() for line in stderr.splitlines() if line.strip()]
    return (words or (last[-1] if last else "git push failed")).removeprefix("fatal: ").removeprefix("error: ")
