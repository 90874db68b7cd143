"""A git worktree of the mirror at one build, with the pin set's earlier pins applied as commits.

`pinset refresh` replays series in one (in the cache's temporary folder) and `pinset rebase` leaves one
where the user sees it. Commits get fixed committer identity and dates (`git am
--committer-date-is-author-date`, a fixed date for PR pins): the same inputs give the same commits, so
an exported series is reproducible.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from pinset import runner
from pinset.errors import PinsetError, RuntimeFailure
from pinset.heal import style
from pinset.redact import redact_url

IDENTITY = {"GIT_COMMITTER_NAME": "pinset", "GIT_COMMITTER_EMAIL": "pinset@localhost"}
_PR_COMMIT = {**IDENTITY, "GIT_AUTHOR_NAME": "pinset", "GIT_AUTHOR_EMAIL": "pinset@localhost",
              "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
# The user's settings never reach git here (pinset.runner.NEUTRAL_CONFIG); am and apply in a worktree
# keep quiet about whitespace, as the sim's applies do.
_NEUTRAL = ["-c", "apply.whitespace=nowarn"]


class Worktree:
    def __init__(self, mirror, path: Path):
        self.mirror = mirror
        self.path = Path(path).absolute()

    @classmethod
    def add(cls, mirror, path: Path, commit: str) -> Worktree:
        path = Path(path).absolute()
        with mirror.lock():
            mirror.git("worktree", "prune")
            made = mirror.git("worktree", "add", "--detach", "-f", str(path), commit, timeout=900)
        if not made.ok:
            raise RuntimeFailure(f"git worktree add {path}: {made.tail(2) or made.describe()}")
        return cls(mirror, path)

    def git(self, *args: str, env: dict | None = None, input: str | None = None, timeout: float = 900) -> runner.Completed:
        return runner.run(["git", *_NEUTRAL, *args], cwd=self.path, env={**IDENTITY, **(env or {})},
                          input=input, timeout=timeout)

    def git_ok(self, *args: str, **kw) -> str:
        result = self.git(*args, **kw)
        if not result.ok:
            raise RuntimeFailure(f"git {' '.join(args[:2])} in {self.path}: {result.tail(3) or result.describe()}")
        return result.stdout

    def head(self) -> str:
        return self.git_ok("rev-parse", "HEAD").strip()

    def git_dir(self) -> Path:
        return Path(self.git_ok("rev-parse", "--absolute-git-dir").strip())

    def am(self, patches, three_way: bool = True, keep_cr: bool = False) -> runner.Completed:
        return self.git("am", "-q", *(["-3"] if three_way else []), *(["--keep-cr"] if keep_cr else []),
                        "--committer-date-is-author-date", *[str(Path(p).absolute()) for p in patches])

    def apply_pin(self, spec, prep) -> None:
        """One earlier pin as commits: a series by `git am -3`, a PR's diff as one commit."""
        if spec.patches is not None:
            # the patches as the sim applied them (pinset.sim.pins.as_git_am_reads): CRs left are the files'
            result = self.am(prep.change.patches, keep_cr=True)
            while not result.ok and spec.unions and self.union_conflicts():
                result = self.git("am", "-q", "--continue")   # the union is the commit's content, as in sim
            if not result.ok:
                self.git("am", "--abort")
                raise RuntimeFailure(f"pin {spec.id} does not apply by `git am -3` in {self.path} although "
                                     f"`pinset sim` applies it: {result.tail(2)}")
            return
        for patch in prep.change.patches:
            applied = self.git("apply", "--3way", "--index", "--whitespace=nowarn", str(Path(patch).absolute()))
            if not applied.ok and not (spec.unions and self.union_conflicts()):
                raise RuntimeFailure(f"git apply --3way in {self.path}: {applied.tail(3) or applied.describe()}")
        self.git_ok("commit", "-q", "--allow-empty", "-m", f"pinset: pin {spec.id} ({redact_url(spec.pr.url)} at {spec.commit[:12]})",
                    env=_PR_COMMIT)

    def union_conflicts(self) -> bool:
        """The conflicts a stopped `git am -3` (or `git apply --3way`) left in this worktree's index resolved as
        sim resolves them for a pin with `unions: true` (pinset.sim.unions: every hunk a provable add/add union),
        the files written from the index; False, nothing changed, when they are not all such unions."""
        from pinset.sim.unions import Unions  # noqa: PLC0415 (only a pin with unions: true needs it)

        scratch = self.mirror.fresh_path("union")
        scratch.mkdir(parents=True)
        unioned = Unions(self.mirror).resolve(self.git_dir() / "index", {}, scratch)
        if not unioned.ok:
            return False
        self.git_ok("checkout-index", "-f", "-q", "--", *sorted({h.file for h in unioned.hunks}))
        return True

    def export(self, start: str, base: str, out: Path, old: list[Path], names: list[str] | None = None,
               upstream: str | None = None, why: str = "", notes: list[str] | None = None) -> list[Path]:
        """start..HEAD exported into `out` in the style of the queue's `old` files (pinset.heal.style): their
        names, their format-patch options, their bytes where the commit's diff did not change. `base` is
        the build's commit here (git computes the base block from it); a `base-commit:` is written, where
        the queue has one, naming `upstream` (a commit of upstream's history), else left out (`why`, in
        `notes`). `names`: the file names when `old` is not there to give them."""
        mails = [style.parse_mail(text) for path in old for text in style.split_mails(style.read_text(path))]
        chosen = style.detect(mails) if mails else style.DEFAULT
        raw = out.with_name(out.name + ".git")
        raw.mkdir(parents=True, exist_ok=True)
        made = self.git_ok("format-patch", "-q", *chosen.format_args(), *([f"--base={base}"] if chosen.base else []),
                           "-o", str(raw), f"{start}..HEAD")
        paths = style.git_names(made, raw)
        texts = [style.read_text(p) for p in paths]
        base_lines: list[str] = []
        if chosen.base and texts:
            base_lines = style.fix_base(style.parse_mail(texts[0]).base_lines, base, upstream)
            if not base_lines and notes is not None:
                notes.append(f"base-commit: left out of the written series: {why or 'no upstream commit known'}")
        return style.restyle(old, texts, [p.name for p in old] or list(names or []), [p.name for p in paths],
                             base_lines, out, chosen)

    def remove(self) -> None:
        with self.mirror.lock():
            removed = self.mirror.git("worktree", "remove", "--force", "--force", str(self.path))
            if not removed.ok and self.path.exists():
                shutil.rmtree(self.path, ignore_errors=True)
            self.mirror.git("worktree", "prune")


def replay(tree: Worktree, pinset, prepared, result, until: str | None = None) -> dict[str, str]:
    """Apply, as commits, every pin applied on the build (by `result`) before `until` (all: None).
    Returns each pin's commit range start (the commit before its first)."""
    starts: dict[str, str] = {}
    for spec, pin in zip(pinset.pins, result.pins):
        if spec.id == until:
            break
        starts[spec.id] = tree.head()
        if pin.applied:
            tree.apply_pin(spec, prepared[spec.id])
    return starts


def safe_name(pin_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", pin_id).strip("-") or "pin"


def check_outside_cache(path: Path, cache: Path, flag: str) -> None:
    p, c = Path(path).absolute().resolve(), Path(cache).absolute().resolve()
    if p == c or c in p.parents:
        raise PinsetError(f"{flag} {path}: inside the cache ({cache}), where you would not see it; name another folder")
