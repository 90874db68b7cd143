"""`pinset bump`: move the pin set to a newer build as one commit on a branch, pushed and kept as one PR.

The shipped build is the first entry of pins.yaml's `builds:` (a selector there: the build `pick` would
pick among its builds). BUILD (`onto`, default: what pick picks among the builds newer than the shipped
one) must carry every required pin, else nothing is committed and each failing pin is named with the
`pinset rebase` that prepares its fix. Every series that applies on BUILD but not exactly is refreshed,
with refresh --write's proof (pinset/heal/refresh.py: same tree, every refreshed pin exact); the first
build becomes BUILD, as a text edit of pins.yaml (pinset/bump/yaml_edit.py).

Everything happens in a temporary worktree of the repository holding pins.yaml, detached at HEAD (the
user's checkout is never touched; its uncommitted edits are not in the bump: `warn` says so). The order
makes it transactional: commit (no ref moves) -> push with a lease -> open or update the PR -> only then
the local branch moves, by compare-and-swap. A failure on the way leaves the local branch where it was.
A commit that makes the same change as the branch's (same parent, tree, message) is reused, so a second
run with nothing new pushes nothing and leaves the PR as it is.

A bump rewrites only commits it made. Each carries the trailer `Pinset-Bump: <its tree>` (bump/repo.py); a
branch, local or the remote's, that holds a commit without it, or whose tree is not the one it names (a
person's commit pushed onto pinset/bump, an amended bump commit, main, the pull request's base) is neither
moved nor pushed: the outcome is HELD, said in one line and, with --repo, in a comment on the branch's pull
request, naming how to hand the branch back (delete it, or --overwrite-branch). The remote's branch is read
once, before the work, and the push leases on exactly that value: a branch that moves meanwhile is not
overwritten either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pinset.bump.repo import Foreign, Repository
from pinset.bump.yaml_edit import set_first_build
from pinset.config.schema import PinSet, load_pinset
from pinset.errors import GitHubError, PinsetError, RuntimeFailure
from pinset.github.client import MAX_BODY, PULL_NOTE, REDACTED, GitHub, Posted, Repo, Target, describe_dry_run
from pinset.heal.refresh import prove, refresh_series
from pinset.heal.series import write_folders
from pinset.nightly.pick import pick
from pinset.output import write_json
from pinset.report import build_report
from pinset.results import SCHEMAS, Doc
from pinset.sim.pins import prepare_pins
from pinset.sim.prs import PrStates
from pinset.sim.run import simulate
from pinset.store import Store, cache_tmp, scratch_dir
from pinset.upstream.builds import Build, resolve_builds
from pinset.upstream.mirror import Mirror
from pinset.upstream.select import order_oldest_first

BLOCKED, CURRENT, DRY_RUN, COMMITTED, PUSHED = "blocked", "current", "dry-run", "committed", "pushed"
HELD = "held"   # the branch holds a commit pinset did not make: nothing moved, nothing pushed
OUTCOMES = (BLOCKED, HELD, CURRENT, DRY_RUN, COMMITTED, PUSHED)
DEFAULT_BRANCH = "pinset/bump"
HELD_MARK = "<!-- pinset-bump: held -->"   # the one comment a held branch's pull request gets (updated in place)


@dataclass
class Failing:
    pin: str
    status: str     # as sim says it ("conflict with upstream", ...)
    fix: str        # the command that prepares its fix


@dataclass
class RefreshedPin:
    pin: str
    mode: str       # how it applied before: offset, 3-way
    folder: str     # its patches: folder or file, relative to the repository
    files: list[str]
    range_diff: str


@dataclass
class BumpResult:
    outcome: str                    # BLOCKED, CURRENT, DRY_RUN, COMMITTED, PUSHED
    old: str                        # the shipped build
    new: str | None                 # BUILD (None: nothing newer)
    branch: str
    failing: list[Failing] = field(default_factory=list)
    refreshed: list[RefreshedPin] = field(default_factory=list)
    unions: list[str] = field(default_factory=list)   # "`pin` at FILE:LINE: ..." of each add/add union pinset made
    commit: str | None = None
    pushed: bool = False            # False also when the remote had this very commit already
    branch_moved: bool = False
    title: str = ""
    body: str = ""
    diff: str = ""                  # dry-run: what would be committed
    requests: str = ""              # dry-run: the API requests
    pull: Posted | None = None
    note: str = ""
    foreign: list[Foreign] = field(default_factory=list)   # HELD: the commits pinset did not make
    held: str = ""                  # HELD: which branch ("the local branch pinset/bump", "origin's pinset/bump")
    hand_back: str = ""             # HELD: how to hand the branch back to pinset

    @property
    def exit_code(self) -> int:
        return 1 if self.outcome in (BLOCKED, HELD) else 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_json(self) -> dict:
        """`pinset bump --json` (kind "bump", schema in pinset/bump/model.py): what a workflow step reads."""
        return {"schema": SCHEMAS["bump"], "kind": "bump", "ok": self.ok, "outcome": self.outcome,
                "old": self.old or None, "new": self.new, "branch": self.branch, "commit": self.commit,
                "pushed": self.pushed, "branch_moved": self.branch_moved,
                "pull_request": {"action": self.pull.action, "url": self.pull.url} if self.pull else None,
                "title": self.title or None,
                "failing": [{"pin": f.pin, "status": f.status, "fix": f.fix} for f in self.failing],
                "refreshed": [{"pin": r.pin, "mode": r.mode, "folder": r.folder, "files": list(r.files)}
                              for r in self.refreshed],
                "held": {"branch": self.held, "hand_back": self.hand_back,
                         "commits": [{"sha": f.sha, "committer": f.author, "subject": f.subject}
                                     for f in self.foreign]} if self.outcome == HELD else None,
                "note": self.note or None}

    @classmethod
    def from_json(cls, d: Doc) -> BumpResult:
        d.get("ok", bool)
        pull, held = d.obj("pull_request", null=True), d.obj("held", null=True)
        result = cls(d.choice("outcome", OUTCOMES), d.get("old", str, None) or "", d.get("new", str, None),
                     d.get("branch", str),
                     failing=[Failing(f.get("pin", str), f.get("status", str), f.get("fix", str)) for f in d.objs("failing")],
                     refreshed=[RefreshedPin(r.get("pin", str), r.get("mode", str), r.get("folder", str), r.strs("files"), "")
                                for r in d.objs("refreshed")],
                     commit=d.get("commit", str, None), pushed=d.get("pushed", bool),
                     branch_moved=d.get("branch_moved", bool), title=d.get("title", str, None) or "",
                     pull=Posted(pull.get("action", str), pull.get("url", str)) if pull else None,
                     note=d.get("note", str, None) or "")
        if held is not None:
            result.held, result.hand_back = held.get("branch", str), held.get("hand_back", str)
            result.foreign = [Foreign(c.get("sha", str), c.get("committer", str), c.get("subject", str))
                              for c in held.objs("commits")]
        return result

    def held_line(self) -> str:
        """HELD in one line: which branch, its commits pinset did not make, how to hand it back."""
        first = self.foreign[0]
        more = f" and {len(self.foreign) - 1} more" if len(self.foreign) > 1 else ""
        return (f"{self.held} holds a commit pinset did not make ({first}{more}): not moved, not pushed; "
                f"to hand it back to pinset, {self.hand_back}")


@dataclass
class BumpOptions:
    onto: str | None = None
    branch: str = DEFAULT_BRANCH
    remote: str | None = None
    repo: Repo | None = None
    dry_run: bool = False
    results: list[str] = field(default_factory=list)   # evidence for the PR body (report's result files)
    overwrite_branch: bool = False   # replace the branch even though it holds commits pinset did not make


Say = Callable[[str], None]


def bump(config: Path, store: Store, options: BumpOptions, github: GitHub | None, say: Say, warn: Say) -> BumpResult:
    """The whole bump; `github` (with its token) only for --push with --repo."""
    repository = Repository.holding(Path(config).absolute())
    rel = repository.relative(Path(config).absolute())
    if not repository.tracked(rel):
        raise PinsetError(f"{config}: not committed in {repository.top}; a bump starts from HEAD's pins.yaml")
    repository.check_branch_name(options.branch)
    if options.remote:
        repository.check_remote(options.remote)
        repository.check_not_default(options.remote, options.branch)
    old_branch = repository.rev(f"refs/heads/{options.branch}")
    # read once, before the work: the push leases on exactly this value, so a branch that moves meanwhile is kept
    remote_tip = repository.remote_tip(options.remote, options.branch) if options.remote else None
    held = None if options.overwrite_branch else _held(repository, options, old_branch, remote_tip)
    if held is not None:
        if options.repo and github is not None and not options.dry_run:
            _comment_held(github, options.repo, options.branch, held)
        return held
    with scratch_dir(cache_tmp(store.root), "bump-") as scratch:
        tree = repository.add_worktree(scratch / "worktree")
        try:
            return _bump(repository, tree, rel, store, options, github, old_branch, remote_tip, scratch, say, warn)
        finally:
            repository.remove_worktree(tree)


def _held(repository: Repository, options: BumpOptions, old_branch: str | None,
          remote_tip: str | None) -> BumpResult | None:
    """HELD when the local branch or the remote's holds a commit pinset did not make (None: both are pinset's or
    absent). The base is HEAD, on which the new commit is made."""
    head = repository.rev("HEAD") or ""
    for tip, where in ((remote_tip, f"{options.remote}'s {options.branch}"),
                       (old_branch, f"the local branch {options.branch}")):
        if tip is None:
            continue
        foreign = repository.foreign(tip, head)
        if foreign:
            deletes = ([f"git push {options.remote} --delete {options.branch}"] if tip == remote_tip else []) + \
                      ([f"git branch -D {options.branch}"] if old_branch else [])
            result = BumpResult(HELD, "", None, options.branch, foreign=foreign, held=where)
            result.hand_back = (f"delete it ({'; '.join(deletes)}) or run pinset bump --overwrite-branch (the "
                                "commits above are then dropped from the branch)")
            return result
    return None


def _comment_held(github: GitHub, repo: Repo, branch: str, result: BumpResult) -> None:
    """The held line as the one comment of pinset on the branch's open pull request (none open: nothing sent)."""
    try:
        pull = github.find_pull(repo, branch)
        if pull is None:
            return
        body = (f"{HELD_MARK}\n**pinset bump stopped**: {result.held_line()}.\n\nCommits on `{branch}` that "
                "pinset did not make:\n" + "".join(f"- `{f.sha[:12]}` by {f.author}: {f.subject}\n"
                                                   for f in result.foreign))
        result.pull = github.post(Target(repo.owner, repo.repo, int(pull["number"])), HELD_MARK, body)
    except GitHubError as exc:
        result.note = f"the pull request was not told: {exc}"
    except Exception as exc:  # an answer nobody foresaw: never a traceback that could show headers
        result.note = f"the pull request was not told: {github.unexpected(exc)}"


def _bump(repository: Repository, tree: Path, rel: str, store: Store, options: BumpOptions, github: GitHub | None,
          old_branch: str | None, remote_tip: str | None, scratch: Path, say: Say, warn: Say) -> BumpResult:
    pinset = load_pinset(tree / rel)
    folders = [_rel_in(tree, spec.patches) for spec in pinset.pins if spec.patches is not None]
    dirty = repository.uncommitted([rel, *folders])
    if dirty:
        warn(f"uncommitted changes in {', '.join(dirty)} are not in the bump: it starts from HEAD "
             f"({(repository.rev('HEAD') or '')[:12]}); commit them first to include them")
    prs = _pr_states(pinset, github, warn)
    pinset, full = prs.without_skipped(pinset), pinset   # a skip-unless-open pin whose PR is not open: left out
    shipped, target = choose(pinset, store, options.onto, say)
    result = BumpResult(CURRENT, shipped.name, target.name if target else None, options.branch)
    if target is None:
        result.note = f"no build among {rel}'s builds is newer than the shipped {shipped.name}"
        return result
    say(f"{target.name}: simulating the pin set")
    with simulate(pinset, [target.name], store) as sim:
        sim.result.pinset_digest, sim.result.prs = full.digest, prs if prs.pins else None
        build, sim_result = sim.build(target.name)
        specs = {p.id: p for p in pinset.pins}
        result.failing = [Failing(p.id, p.status_text, _fix(specs[p.id], target.name))
                          for p in sim_result.pins if p.required and not p.ok]
        if result.failing:
            result.outcome = BLOCKED
            return result
        result.unions = [f"`{p.id}` at {u.text()}" for p in sim_result.pins if p.applied_by_union for u in p.unions or []]
        # the report of the pin set as the evidence was made with (its digest covers the patch files, which
        # the refresh rewrites; the tree they give is proven the same)
        sim_json = scratch / "sim.json"
        # (no start time: the report names this file by its bytes in the pull request's body, which must stay
        # the same when nothing changed)
        write_json(sim_json, sim.result.to_json(), started=False)
        report = build_report([str(sim_json), *options.results], full)
        loose = [p for p in sim_result.pins if specs[p.id].patches is not None and p.needs_refresh]
        if loose:
            say(f"{target.name}: refreshing {', '.join(p.id for p in loose)}")
            refreshed = refresh_series(sim, build, sim_result, [p.id for p in loose], scratch / "refresh")
            prove(sim, build, sim_result, refreshed, scratch / "proof")
            write_folders([(item.folder, item.new, None) for item in refreshed])
            for item in refreshed:
                for note in item.notes:
                    warn(f"{item.pin_id}: {note}")
            modes_of = {p.id: p.apply_mode or "" for p in loose}
            result.refreshed = [RefreshedPin(r.pin_id, modes_of[r.pin_id], _rel_in(tree, r.folder),
                                             [_rel_in(tree, r.folder / f.name) if r.folder.is_dir()
                                              else _rel_in(tree, r.folder) for f in r.new], r.range_diff)
                                for r in refreshed]
    _edit_builds(tree / rel, full, target.name)
    result.title = f"pinset: ship {target.name} (was {shipped.name})"
    result.body = pull_body(result, report.markdown)
    message = commit_message(result, shipped, target)
    made = repository.commit(tree, [rel, *sorted({r.folder for r in result.refreshed})],
                             message)
    if made is None:
        result.note = f"pins.yaml ships {target.name} already and every series applies exactly"
        return result
    commit: str = made
    if old_branch and repository.same_change(old_branch, commit):
        commit = old_branch
    if remote_tip and remote_tip != commit and repository.same_change(remote_tip, commit):
        commit = remote_tip
    result.commit = commit
    if options.dry_run:
        result.outcome = DRY_RUN
        result.diff = repository.git_ok("show", "--no-color", "--stat", "--patch", "--format=%B", commit, "--", rel)
        if options.repo and github is not None:
            base = repository.current_branch() or "<the default branch>"
            result.requests = describe_dry_run(github.plan_pull(options.repo, options.branch, base, result.title,
                                                                result.body),
                                             REDACTED if github.has_token else None, PULL_NOTE)
        return result
    if options.remote:
        if remote_tip != commit:
            repository.push(options.remote, commit, options.branch, remote_tip)
            result.pushed = True
        if options.repo and github is not None:
            result.pull = _open_pull(github, options.repo, repository, options.branch, result)
        result.outcome = PUSHED
    else:
        result.outcome = COMMITTED
    if commit != old_branch:
        repository.move_branch(options.branch, commit, old_branch)
        result.branch_moved = True
    return result


def _pr_states(pinset: PinSet, github: GitHub | None, warn: Say) -> PrStates:
    """The PR pins' pull requests (for the PR body's report, and to leave out skip-unless-open pins whose PR is
    not open); unknown without a token or a network, said once."""
    import os

    from pinset.github.client import DEFAULT_API_URL
    from pinset.github.pr_state import env_token, pr_states

    api_url = github.api_url if github is not None else os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL
    states = pr_states(pinset, env_token(), api_url)
    if states.note:
        warn(states.note)
    return states


def _rel_in(tree: Path, path: Path) -> str:
    try:
        return Path(path).resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        raise PinsetError(f"{path}: outside the repository that holds pins.yaml; a bump can commit only what is "
                          "in it") from None


def _open_pull(github: GitHub, repo: Repo, repository: Repository, branch: str, result: BumpResult) -> Posted:
    try:
        base = repository.current_branch() or github.default_branch(repo)
        return github.open_pull(repo, branch, base, result.title, result.body)
    except GitHubError:
        raise
    except Exception as exc:  # an answer nobody foresaw: never a traceback that could show headers
        raise github.unexpected(exc) from None


def choose(pinset: PinSet, store: Store, onto: str | None, say: Say) -> tuple[Build, Build | None]:
    """(the shipped build, BUILD); BUILD is None when no build of pins.yaml is newer than the shipped one.
    Without `onto`, and no newer build green, BUILD is the newest newer build (its failing pins are said)."""
    base = pinset.path.parent
    with Mirror(store.mirror) as mirror:
        first = order_oldest_first(resolve_builds([pinset.builds[0]], pinset.upstream, base, store, mirror), mirror)
        prepared = prepare_pins(pinset, store, mirror)
        shipped = first[-1]
        if len(first) > 1:   # a selector: the build pick picks among its builds
            picked = pick(pinset, mirror, prepared, list(reversed(first)), say=say).picked
            shipped = next((b for b in first if b.name == picked), shipped)
        if onto:
            named = resolve_builds([onto], pinset.upstream, base, store, mirror)
            if len(named) != 1:
                raise PinsetError(f"--onto {onto!r}: names {len(named)} builds; give one")
            return shipped, named[0]
        ordered = order_oldest_first(resolve_builds(list(pinset.builds), pinset.upstream, base, store, mirror), mirror)
        at = next(i for i, b in enumerate(ordered) if b.name == shipped.name) if any(
            b.name == shipped.name for b in ordered) else -1
        newer = [b for b in ordered[at + 1:] if b.oid != shipped.oid]
        if not newer:
            return shipped, None
        picked = pick(pinset, mirror, prepared, list(reversed(newer)), say=say).picked
        return shipped, next((b for b in newer if b.name == picked), newer[-1])


def _fix(spec, build: str) -> str:
    if spec.patches is None:
        return (f"pinset rebase {spec.id} --as-series patches/{spec.id.replace('#', '-')}, "
                f"then pinset rebase {spec.id} --onto {build}")
    return f"pinset rebase {spec.id} --onto {build}"


def _edit_builds(path: Path, pinset: PinSet, name: str) -> None:
    """pins.yaml's first build made `name`, as text; the new file must read as a pin set."""
    raw = path.read_bytes()
    bom = "\ufeff" if raw.startswith(b"\xef\xbb\xbf") else ""
    path.write_text(bom + set_first_build(pinset.text, name), encoding="utf-8")
    try:
        load_pinset(path)
    except PinsetError as exc:
        raise RuntimeFailure(f"the edited pins.yaml would not read ({exc}); nothing committed") from None


def commit_message(result: BumpResult, old: Build, new: Build) -> str:
    lines = [f"pinset bump: {old.name} -> {new.name}", "",
             f"The shipped build (the first of pins.yaml's builds) moves from {old.name} (upstream {old.commit[:12]}) "
             f"to {new.name} (upstream {new.commit[:12]}); every required pin applies there."]
    if result.refreshed:
        lines += ["", f"Refreshed to apply exactly on {new.name} (same commits, moved context; same tree):"]
        lines += [f"- {r.pin}: {r.mode} -> exact ({len(r.files)} patches)" for r in result.refreshed]
    if result.unions:
        lines += ["", "Add/add conflicts pinset unioned itself (pins.yaml unions:, upstream's addition first; no person "
                  "wrote them):"]
        lines += [f"- {u.replace('`', '')}" for u in result.unions]
    return "\n".join(lines) + "\n"


def pull_body(result: BumpResult, report: str) -> str:
    """The `pinset report` comment for the new build, then the range-diff of the refreshed pins collapsed,
    cut to fit GitHub's limit (the report is kept whole)."""
    head = f"`pinset bump`: the shipped build moves from `{result.old}` to `{result.new}`"
    head += (f"; refreshed: {', '.join(f'`{r.pin}` ({r.mode} -> exact)' for r in result.refreshed)}.\n\n"
             if result.refreshed else ".\n\n")
    if result.unions:   # what no person wrote, before anything else a reviewer reads
        head += ("**Unions pinset made itself** (add/add conflicts, upstream's addition first; no person wrote them, "
                 "review them):\n\n" + "".join(f"- {u}\n" for u in result.unions) + "\n")
    body = head + report
    if not result.refreshed:
        return body
    diff = "".join(f"# {r.pin}\n{r.range_diff}" + ("" if r.range_diff.endswith("\n") else "\n")
                   for r in result.refreshed)
    fence = "`" * max(3, 1 + max((len(run) for run in _backtick_runs(diff)), default=0))
    room = MAX_BODY - len(body) - 200
    if len(diff) > room:
        diff = diff[:max(room, 0)] + "\n... (cut to fit GitHub's limit; `pinset refresh --onto BUILD` shows it whole)\n"
    return (body.rstrip("\n") + f"\n\n<details><summary>range-diff of the refreshed pins</summary>\n\n{fence}diff\n"
            f"{diff}{fence}\n\n</details>\n")


def _backtick_runs(text: str) -> list[str]:
    runs, current = [], ""
    for ch in text:
        if ch == "`":
            current += ch
        elif current:
            runs.append(current)
            current = ""
    return runs + ([current] if current else [])


__all__ = ["BumpOptions", "BumpResult", "DEFAULT_BRANCH", "bump"]
