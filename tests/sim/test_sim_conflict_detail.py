"""A conflict a maintainer can act on: the whole hunk as the pin wants it, what the build has there now, the
build's real commit (a pypi build's CHANGELOG commit and its mirror commit) and the command that starts fixing."""

from __future__ import annotations

import json
import re

from pinset.cli import main
from pinset.sim.apply_errors import build_place, failing_hunk, hunks_of
from tests.sim.test_sim_determinism import LINES, fake_sdist, pins_yaml

PATCH = ("From 1 Mon Sep 17 00:00:00 2001\nSubject: x\n\n---\n"
         "diff --git a/src/f.c b/src/f.c\n--- a/src/f.c\n+++ b/src/f.c\n"
         "@@ -2,3 +2,3 @@\n line 2\n-line 3\n+three\n line 4\n"
         "@@ -20,3 +20,3 @@\n line 20\n-line 21\n+twenty-one\n line 22\n-- \n2.39.0\n")


def test_the_failing_hunk_of_a_file_git_names_only():
    assert [h[0] for h in hunks_of(PATCH, "src/f.c")] == ["@@ -2,3 +2,3 @@", "@@ -20,3 +20,3 @@"]
    assert hunks_of(PATCH, "src/f.c")[1][-1] == " line 22"   # ends by the header's counts, not at "-- "
    moved = LINES.replace("line 21\n", "line 21 (renamed upstream)\n")
    assert failing_hunk(PATCH, "src/f.c", moved)[0] == "@@ -20,3 +20,3 @@"
    assert failing_hunk(PATCH, "src/f.c", LINES) == []


def test_build_place_follows_lines_upstream_moved():
    hunk = hunks_of(PATCH, "src/f.c")[1]
    shifted = "".join(f"new {i}\n" for i in range(5)) + LINES   # 5 lines added above: line 20 is now line 25
    place = build_place(hunk, "src/f.c", shifted)
    assert place.start == 22 and place.lines[3] == "line 20" and place.lines[-1] == "line 25"
    assert build_place(hunk, "src/f.c", None) is None


def test_pypi_conflict_shows_hunk_build_lines_commits_and_the_fix_command(make_repo, tmp_path, monkeypatch, capsys):
    up = make_repo("upstream")
    up.commit("base", {"src/f.c": LINES})
    up.commit("pin", {"src/f.c": LINES.replace("line 12\n", "line twelve (pinned)\n")})
    patches = tmp_path / "series"
    up.git("format-patch", "-q", "-o", str(patches), "HEAD~1..HEAD")
    cfg = pins_yaml(tmp_path, up, patches)
    build = fake_sdist(tmp_path / "c", "0.0.2", "abcdef123", {"src/f.c": LINES.replace("line 12\n", "x = 12;\n")})
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "c"))
    out, md = tmp_path / "sim.json", tmp_path / "sim.md"
    assert main(["sim", "-c", str(cfg), "--builds", build, "--json", str(out), "--markdown", str(md)]) == 1
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    b = doc["builds"][0]
    pin = b["pins"][0]
    assert pin["status"] == "conflict"
    assert pin["hunk"][0].startswith("@@ -9,7 +9,7 @@") and "+line twelve (pinned)" in pin["hunk"]
    assert pin["hunk"][-1] == " line 15"                       # the whole hunk, not its first 4 lines
    place = pin["build_has"]
    assert place["path"] == "src/f.c" and "x = 12;" in place["lines"] and place["lines"][0] == f"line {place['start']}"
    assert re.fullmatch(r"[0-9a-f]{40}", b["mirror_commit"]) and b["commit"] == "abcdef123"

    text = md.read_text()
    assert "The pin wants:" in text and "+line twelve (pinned)" in text
    assert f"{build} has now (src/f.c lines {place['start']}–" in text and "| x = 12;" in text
    assert f"`git format-patch --base=abcdef123`); the sdist's tree is mirror commit `{b['mirror_commit']}`" in text
    assert f"Start fixing: `pinset rebase pin --onto {build}`" in text
    assert "the pin wants:" in printed and "| x = 12;" in printed and f"start fixing: pinset rebase pin --onto {build}" in printed
