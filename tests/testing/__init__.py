"""The one testing module: where fixtures and goldens live, real git repositories for tests, pins.yaml
writing. Test files import from here (`from tests.testing import GitRepo, write_pins, FIXTURES`), never
from conftest.py (which keeps the pytest fixtures) nor from one another's paths."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent  # tests/
ROOT = TESTS.parent  # the repository: pinset/, docs/, reports/, patches/
FIXTURES = TESTS / "fixtures"  # captured program output and recorded results (tests/fixtures/README*.md)
GOLDEN = TESTS / "golden"  # byte-exact expected outputs (tests/regen_*_goldens.py write them)


def child_env(**extra: str) -> dict[str, str]:
    """os.environ for a child `python -m pinset ...` (or `python -c`) that imports this checkout's pinset."""
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def local_only(monkeypatch) -> None:
    """Requests to 127.0.0.1 (a fake server's) go straight there, past any proxy this machine names: both
    spellings, as requests and urllib read either."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")


def fake_program(folder: Path, name: str, script: str) -> Path:
    """A small executable script standing in for a program, to inject a fault."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(script)
    path.chmod(0o755)
    return path


def interrupt_at(n: int, real):
    """`real`, but Ctrl-C (KeyboardInterrupt) at its n-th call instead: a run stopped in the middle of a loop."""
    calls = 0

    def interrupted(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    return interrupted


GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
}


class GitRepo:
    """A real git work tree for building upstream histories in tests."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "master")

    def git(self, *args: str) -> str:
        env = dict(os.environ, **GIT_ENV)
        return subprocess.run(["git", *args], cwd=self.path, env=env, check=True,
                              capture_output=True, text=True).stdout

    def write(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))

    def commit(self, message: str, files: dict[str, str | None] | None = None) -> str:
        for rel, text in (files or {}).items():
            if text is None:
                self.git("rm", "-q", rel)
            else:
                self.write(rel, text)
                self.git("add", rel)
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def tag(self, name: str, rev: str = "HEAD") -> None:
        self.git("tag", name, rev)

    def format_patch(self, rev_range: str, out: Path) -> list[Path]:
        out.mkdir(parents=True, exist_ok=True)
        names = self.git("format-patch", "-q", "-o", str(out), rev_range).split()
        return [Path(n) for n in names]


def first_build(make_repo, files: dict[str, str | None]) -> tuple[GitRepo, str]:
    """The repository "upstream" (made by `make_repo`, the fixture's factory) with one commit "base" of
    `files`, tagged b1: (the repository, b1's sha)."""
    up = make_repo("upstream")
    b1 = up.commit("base", files)
    up.tag("b1")
    return up, b1


def git_am_3(up: Path, clone: Path, build: str, pins: list[tuple[str, Path]]) -> tuple[dict[str, str], str]:
    """The ground truth of 3-way parity: each pin's status by `git am -3` of its patch folder, in order, on
    `build` in a full clone of upstream made at `clone` (a pin that fails is aborted, the next goes on), and
    the final tree."""
    def git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)

    assert git(clone.parent, "clone", "-q", str(up), str(clone)).returncode == 0
    assert git(clone, "checkout", "-q", "--detach", build).returncode == 0
    status = {}
    for name, folder in pins:
        patches = sorted(str(p) for p in folder.glob("*.patch"))
        assert patches, folder
        if git(clone, "am", "-q", "-3", *patches).returncode != 0:
            git(clone, "am", "--abort")
            status[name] = "conflict"
        else:
            status[name] = "applied"
    return status, git(clone, "rev-parse", "HEAD^{tree}").stdout.strip()


def without_start(doc: dict) -> dict:
    """A result document without its run's UTC start time (pinset.results.STARTED), which it must have: what two
    runs of the same inputs compare equal on, and what its model writes back (the models do not carry it)."""
    assert isinstance(doc.get("started"), str), "a result file says when its run started"
    return {k: v for k, v in doc.items() if k != "started"}


def run_doc(text: str) -> dict:
    """A result file a test's run wrote, as two runs of the same inputs compare: without its start time (the
    second it ran in; tests/history/test_started_digest.py checks every result has one)."""
    doc = json.loads(text)
    return {k: v for k, v in doc.items() if k != "started"} if isinstance(doc, dict) else doc


def write_pins(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def one_pin_yaml(path: Path, upstream: object, pin_id: str, builds: str = "b1", **keys: object) -> Path:
    """pins.yaml with the one pin `pin_id` on `builds`, its `keys` (pr or patches, commit, repo, unchecked ...)
    in the order given: line 4 is the pin's id, line 5 its first key."""
    return write_pins(path, f"upstream: {upstream}\nbuilds: [{builds}]\npins:\n  - id: {pin_id}\n"
                      + "".join(f"    {key}: {value}\n" for key, value in keys.items()))


def one_patch(work: GitRepo, out: Path, before: dict[str, str | None], after: dict[str, str | None],
              subject: str) -> list[Path]:
    """A one-patch series in `out`: files `before` changed to `after` as commit `subject` of the scratch
    repository `work` (a patch made where the upstream history is not)."""
    work.commit("base", before)
    work.commit(subject, after)
    return work.format_patch("HEAD~1..HEAD", out)


def series(repo: GitRepo, base: str, commits, out: Path, *format_patch_args: str) -> Path:
    """Commit `commits` ((message, files) pairs) on a branch from `base`, export them with format-patch into
    `out`, return to master."""
    repo.git("checkout", "-q", "-b", "series-tmp", base)
    for message, files in commits:
        repo.commit(message, files)
    out.mkdir(parents=True, exist_ok=True)
    repo.git("format-patch", "-q", *format_patch_args, "-o", str(out), f"{base}..series-tmp")
    repo.git("checkout", "-q", "master")
    repo.git("branch", "-q", "-D", "series-tmp")
    return out


# A one-line change of a.txt ("two" -> "TWO"), as git 2.39 writes it; one_pin_project pins it.
A_TXT_PATCH = """From 1f6fdf014e482fde3671bb9de8d19abbc5961d36 Mon Sep 17 00:00:00 2001
From: t <t@example.com>
Subject: [PATCH] change a.txt

---
diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
--
2.39.5
"""


def one_pin_project(folder: Path, upstream: GitRepo) -> Path:
    """pins.yaml in `folder` with one pin `a` (A_TXT_PATCH in folder/p) on build b1 of `upstream`."""
    (folder / "p").mkdir()
    (folder / "p" / "0001-change.patch").write_text(A_TXT_PATCH)
    (folder / "pins.yaml").write_text(f"upstream: {upstream.path}\nbuilds: [b1]\npins:\n  - id: a\n    patches: p\n")
    return folder / "pins.yaml"


def round_log(rounds: list[dict]):
    """A bench's `round_log` JSON (a recorded fixture's, perhaps edited by the test) as the analysis reads it:
    the typed records (pinset.measures.bench_log), read as a file's are."""
    from pinset.measures.bench_log import read_round_log
    from pinset.results import Doc

    return read_round_log(Doc({"round_log": rounds}, "<test>", "bench"))


def read_bench(doc: dict):
    """A bench JSON document (a recorded fixture's, perhaps edited by the test) read through the bench model."""
    from pinset.measures.bench_model import BenchResult
    from pinset.results import Doc

    return BenchResult.from_json(Doc(doc, "<test>", "bench"))


def analyse(rounds: list[dict], **options) -> list[dict]:
    """The bench rows (their JSON) the analysis makes of a `round_log` JSON, read as a file's is (round_log)."""
    from pinset.measures.bench_analysis import analyse_rows

    return [row.to_json() for row in analyse_rows(round_log(rounds), **options)]
