"""Fewer processes for the same answers: a patch series is parsed by one `git apply --numstat` of all its
files, and only a series that fails goes file by file to name the broken one (in the words of before).
A `git` wrapper first on PATH counts the calls; the git behind it is real."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pinset.config import patches
from pinset.errors import SeriesProblem

GOOD = "diff --git a/{0} b/{0}\n--- a/{0}\n+++ b/{0}\n@@ -1 +1,2 @@\n a\n+b\n"


@pytest.fixture
def counted(tmp_path, monkeypatch) -> Path:
    """PATH with a `git` that logs each `git apply` call, one line per call, to the returned file."""
    log = tmp_path / "calls"
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "git").write_text(f"#!/bin/sh\n[ \"$1\" = apply ] && echo \"$*\" >> {log}\n"
                                f"exec \"{shutil.which('git')}\" \"$@\"\n")
    (folder / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def series(folder: Path, count: int, broken: dict[int, str] | None = None) -> Path:
    folder.mkdir(parents=True)
    for n in range(1, count + 1):
        text = (broken or {}).get(n, GOOD.format(f"file{n}.c"))
        (folder / f"{n:04d}-change.patch").write_text(text)
    return folder


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_a_good_series_is_parsed_by_one_git_call(tmp_path, counted):
    folder = series(tmp_path / "q", 12)
    assert [p.name for p in patches.patch_series(folder, "q")] == [f"{n:04d}-change.patch" for n in range(1, 13)]
    (call,) = calls(counted)
    assert call.count(".patch") == 12


@pytest.mark.parametrize("text, said", [
    ("From abc\nSubject: nothing\n\nno diff here\n", "q/0003-change.patch: no diff in it: not a git format-patch file"),
    ("diff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -1,3 +1,4 @@\n a\n+b\n", "q/0003-change.patch: not a patch git can read: corrupt patch at line"),
])
def test_a_broken_file_is_named_as_the_file_by_file_check_names_it(tmp_path, counted, text, said):
    folder = series(tmp_path / "q", 6, {3: text, 5: text})
    with pytest.raises(SeriesProblem) as caught:
        patches.patch_series(folder, "q")
    assert str(caught.value).startswith(said)
    # one call for the whole series, then one per file up to the first broken one
    assert [c.count(".patch") for c in calls(counted)] == [6, 1, 1, 1]


def test_an_empty_file_is_named_without_a_whole_series_call(tmp_path, counted):
    folder = series(tmp_path / "q", 4, {2: ""})
    with pytest.raises(SeriesProblem, match=r"^q/0002-change.patch: empty file, not a patch$"):
        patches.patch_series(folder, "q")
    assert [c.count(".patch") for c in calls(counted)] == [1]


def _pins_yaml(tmp_path: Path, folders: list[Path]) -> Path:
    cfg = tmp_path / "pins.yaml"
    cfg.write_text("builds: [pypi:llama-cpp-python==0.3.36]\npins:\n"
                   + "".join(f"  - id: {f.name}\n    patches: {f}\n" for f in folders))
    return cfg


def test_every_pin_s_patches_are_parsed_by_one_git_call(tmp_path, counted):
    """13 pins of one or more patches: one `git apply --numstat` for all of them when pins.yaml is read."""
    from pinset.config.schema import load_pinset

    folders = [series(tmp_path / f"pin{n}", 1 + n % 3) for n in range(13)]
    pinset = load_pinset(_pins_yaml(tmp_path, folders))
    assert [p.id for p in pinset.pins] == [f.name for f in folders]
    (call,) = calls(counted)
    assert call.count(".patch") == sum(1 + n % 3 for n in range(13))


def test_a_broken_pin_among_many_is_named_as_alone(tmp_path, counted):
    """The batch fails on the broken file: every series is then checked as before, the broken one named in
    the same words, at its pin's line."""
    from pinset.config.schema import load_pinset
    from pinset.errors import ConfigError

    folders = [series(tmp_path / "pin0", 2), series(tmp_path / "pin1", 3, {2: "From abc\nSubject: x\n\nno diff\n"}),
               series(tmp_path / "pin2", 1)]
    with pytest.raises(ConfigError) as caught:
        load_pinset(_pins_yaml(tmp_path, folders))
    assert "pins[1].patches" in str(caught.value)
    assert f"{folders[1]}/0002-change.patch: no diff in it: not a git format-patch file" in str(caught.value)
    # the batch (6 files), pin0's series, pin1's series, then pin1's files up to the broken one
    assert [c.count(".patch") for c in calls(counted)] == [6, 2, 3, 1, 1]
