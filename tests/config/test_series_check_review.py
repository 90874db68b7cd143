"""The one-call check of a series must refuse what the file-by-file check refused: `git apply` keeps the `-p`
it guessed from a traditional diff of one file for the later files of the same call, so a file that does
not parse alone could parse after it (review of the one-call `git apply --numstat`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinset.config import patches
from pinset.errors import SeriesProblem

# A traditional diff of a file in the top folder: git guesses -p0 from it.
TRADITIONAL = "--- foo.c\n+++ foo.c\n@@ -1 +1 @@\n-a\n+b\n"
# A git header without a/ b/ prefixes and without ---/+++ lines: unreadable with git's default -p1.
NO_PREFIX = "diff --git x.c x.c\nnew file mode 100644\nindex 0000000..e69de29\n"
GIT = "diff --git a/{0} b/{0}\n--- a/{0}\n+++ b/{0}\n@@ -1 +1,2 @@\n a\n+b\n"


def write(folder: Path, texts: list[str]) -> Path:
    folder.mkdir()
    for n, text in enumerate(texts, 1):
        (folder / f"{n:04d}-change.patch").write_text(text)
    return folder


def test_a_file_git_cannot_read_alone_is_refused_after_a_traditional_diff(tmp_path):
    folder = write(tmp_path / "q", [TRADITIONAL, NO_PREFIX])
    with pytest.raises(SeriesProblem, match=r"^q/0002-change.patch: not a patch git can read: git diff header "
                                            r"lacks filename information"):
        patches.patch_series(folder, "q")


def test_the_same_file_alone_is_refused_in_the_same_words(tmp_path):
    folder = write(tmp_path / "q", [NO_PREFIX])
    with pytest.raises(SeriesProblem, match=r"^q/0001-change.patch: not a patch git can read: git diff header "
                                            r"lacks filename information"):
        patches.patch_series(folder, "q")


def test_a_series_with_traditional_diffs_that_parse_alone_is_taken(tmp_path):
    texts = [GIT.format("a.c"), TRADITIONAL, GIT.format("b.c"), "--- /dev/null\n+++ new.c\n@@ -0,0 +1 @@\n+x\n"]
    folder = write(tmp_path / "q", texts)
    assert [p.name for p in patches.patch_series(folder, "q")] == [f"{n:04d}-change.patch" for n in range(1, 5)]


@pytest.mark.parametrize("text, traditional", [
    (GIT.format("a.c"), False),
    ("diff --git a/x b/x\nold mode 100644\nnew mode 100755\n", False),
    ("diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n--- a\n+++ b\n", True),  # a hunk: errs to True
    (TRADITIONAL, True),
    (TRADITIONAL.replace("\n", "\r\n"), True),
    ("diff --git a/x b/x\nsomething else\n--- a/x\n+++ b/x\n", True),
])
def test_what_counts_as_a_traditional_diff(text, traditional):
    assert patches._guesses_strip(text.encode()) is traditional
