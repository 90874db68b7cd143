"""explain_apply_failure on what real `git apply --cached --3way` prints (captured in each test)."""

from __future__ import annotations

import os
import subprocess

from hypothesis import given, settings, strategies as st

from pinset.sim.apply_errors import explain_apply_failure, find_hunk
from tests.testing import GIT_ENV

LINES = "".join(f"line {i}\n" for i in range(1, 41))


def make_patch(make_repo, before: dict[str, str], after: dict[str, str | None]) -> str:
    """A format-patch text turning the files `before` into `after` (None deletes)."""
    repo = make_repo("author")
    repo.commit("before", before)
    repo.commit("after", after)
    return repo.git("format-patch", "--stdout", "-1", "HEAD")


def git_apply(make_repo, build: dict[str, str], patch: str, name: str = "build") -> str:
    """stdout+stderr of `git apply --cached --3way` of `patch` on a repo holding only `build`."""
    repo = make_repo(name)
    repo.commit("build", build)
    proc = subprocess.run(["git", "apply", "--cached", "--3way", "-"], cwd=repo.path, input=patch,
                          capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
    assert proc.returncode != 0, "the case must fail"
    return proc.stdout + proc.stderr


def test_failed_hunk_not_the_missing_blob_line(make_repo):
    patch = make_patch(make_repo, {"src/f.c": LINES.replace("line 10\n", "ten\n")},
                       {"src/f.c": LINES.replace("line 10\n", "ten\n").replace("line 12\n", "twelve\n")})
    output = git_apply(make_repo, {"src/f.c": LINES}, patch)
    assert "lacks the necessary blob" in output  # what the first error line said before
    failure = explain_apply_failure(output, patch)
    assert failure.files == ["src/f.c"]
    assert failure.reason == "patch failed: src/f.c:9 at hunk @@ -9,7 +9,7 @@"
    assert failure.hunk == ["@@ -9,7 +9,7 @@ line 8", " line 9", " ten", " line 11", "-line 12", "+twelve",
                            " line 13", " line 14", " line 15"]   # the whole hunk, not its first 4 lines
    assert failure.hunk_path == "src/f.c"


def test_missing_file_and_failed_hunk_together(make_repo):
    before = {"a/x.c": LINES.replace("line 5\n", "five\n"), "b/gone.c": LINES}
    patch = make_patch(make_repo, before, {"a/x.c": before["a/x.c"].replace("line 7\n", "seven\n"),
                                           "b/gone.c": LINES.replace("line 3\n", "three\n")})
    output = git_apply(make_repo, {"a/x.c": LINES}, patch)
    failure = explain_apply_failure(output, patch)
    assert sorted(failure.files) == ["a/x.c", "b/gone.c"]
    assert failure.reason == ("patch failed: a/x.c:4 at hunk @@ -4,7 +4,7 @@; "
                              "missing in this build: b/gone.c")


def test_new_file_already_in_the_build(make_repo):
    patch = make_patch(make_repo, {"README": "r\n"}, {"src/new.c": "int n;\n"})
    output = git_apply(make_repo, {"README": "r\n", "src/new.c": "int other;\n"}, patch)
    failure = explain_apply_failure(output, patch)
    assert failure.files == ["src/new.c"]
    assert failure.reason == "3-way merge conflicts: src/new.c"  # git 2.3x merges add/add on an empty base
    assert failure.hunk == []


def test_three_way_conflict(make_repo):
    base = {"src/f.c": LINES}
    patch = make_patch(make_repo, base, {"src/f.c": LINES.replace("line 12\n", "ours 12\n")})
    # The build holds the preimage blob (same content as the author's base) in its history.
    repo = make_repo("build")
    repo.commit("base", base)
    repo.commit("upstream", {"src/f.c": LINES.replace("line 12\n", "theirs 12\n")})
    proc = subprocess.run(["git", "apply", "--cached", "--3way", "-"], cwd=repo.path, input=patch,
                          capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
    failure = explain_apply_failure(proc.stdout + proc.stderr, patch)
    assert proc.returncode != 0 and failure.files == ["src/f.c"]
    assert failure.reason == "3-way merge conflicts: src/f.c"


def test_corrupt_patch_reason_is_gits_own(make_repo):
    patch = make_patch(make_repo, {"src/f.c": LINES}, {"src/f.c": LINES.replace("line 12\n", "twelve\n")})
    broken = patch[:patch.index("+twelve\n")]  # cut inside the hunk: fewer lines than its header says
    output = git_apply(make_repo, {"src/f.c": LINES}, broken)
    failure = explain_apply_failure(output, broken)
    assert failure.files == []
    assert failure.reason.startswith("corrupt patch at line"), failure.reason


def test_many_missing_files_are_counted_not_listed(make_repo):
    before = {f"d/f{i}.c": LINES for i in range(5)}
    patch = make_patch(make_repo, before, {p: t.replace("line 3\n", "3\n") for p, t in before.items()})
    output = git_apply(make_repo, {"README": "r\n"}, patch)
    failure = explain_apply_failure(output, patch)
    assert len(failure.files) == 5
    assert failure.reason == "missing in this build: d/f0.c, d/f1.c, d/f2.c (+2 more)"


def test_find_hunk_follows_renames_and_stops_at_the_hunk_end():
    patch = ("diff --git a/old.c b/new.c\nsimilarity index 90%\nrename from old.c\nrename to new.c\n"
             "--- a/old.c\n+++ b/new.c\n@@ -3,2 +3,2 @@ int f()\n-a\n+b\n\\ No newline at end of file\n")
    assert find_hunk(patch, "new.c", 3) == ["@@ -3,2 +3,2 @@ int f()", "-a", "+b"]
    assert find_hunk(patch, "old.c", 3) == ["@@ -3,2 +3,2 @@ int f()", "-a", "+b"]
    assert find_hunk(patch, "new.c", 4) == []
    assert find_hunk(patch, "other.c", 3) == []


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text())
def test_any_output_gives_a_one_line_reason(output, patch):
    failure = explain_apply_failure(output, patch)
    assert failure.reason and "\n" not in failure.reason and "\r" not in failure.reason
    assert all(f in output for f in failure.files)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([
    "error: repository lacks the necessary blob to perform 3-way merge.",
    "Falling back to direct application...", "Checking patch src/a.c...", "warning: x has type 100644",
])))
def test_progress_lines_alone_are_never_the_reason_when_git_said_more(noise):
    output = "\n".join([*noise, "error: patch failed: src/a.c:7", "error: src/a.c: patch does not apply"])
    failure = explain_apply_failure(output)
    assert failure.reason == "patch failed: src/a.c:7" and failure.files == ["src/a.c"]
