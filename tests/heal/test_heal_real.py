"""`pinset refresh` on real llama.cpp snapshots: a real-code pin written against 0.3.34, refreshed onto 0.3.36."""

from __future__ import annotations

import json
import subprocess

import pytest

from pinset.cli import main
from pinset.upstream.mirror import Mirror
from tests.testing import write_pins
from tests.testing.snapshots import build_name, copy_store

pytestmark = pytest.mark.slow

FILE = "src/llama-model.cpp"   # changed between the two, so upstream's edits move the pin's context


def moved_window(old: list[str], new: list[str], size: int = 7) -> int | None:
    """A line of `old` whose window of `size` lines is unique in both texts and sits elsewhere in `new`."""
    def index(lines):
        seen: dict[tuple, list[int]] = {}
        for i in range(len(lines) - size):
            seen.setdefault(tuple(lines[i:i + size]), []).append(i)
        return seen
    a, b = index(old), index(new)
    for i in range(len(old) // 2, len(old) - size):
        window = tuple(old[i:i + size])
        if len(a.get(window, [])) == 1 and len(b.get(window, [])) == 1 and b[window][0] != i \
                and old[i + size // 2].strip() and "\t" not in old[i + size // 2]:
            return i + size // 2
    return None


def test_real_pin_written_on_0334_refreshed_onto_0336(tmp_path, monkeypatch, capsys, snapshot_seed):
    seed, builds = snapshot_seed
    store = copy_store(seed, tmp_path / "cache")
    monkeypatch.setenv("PINSET_CACHE", str(store.root))
    old, new = builds["0.3.34"], builds["0.3.36"]
    with Mirror(store.mirror) as mirror:
        before, after = mirror.read_blob(old.tree, FILE), mirror.read_blob(new.tree, FILE)
        assert before != after
        lines = before.split("\n")
        at = moved_window(lines, after.split("\n"))
        assert at is not None
        lines[at] = lines[at] + "  // pinset: a local change"
        work = tmp_path / "work"
        subprocess.run(["git", "--git-dir", str(store.mirror), "worktree", "add", "-q", "--detach", str(work), old.oid],
                       check=True)
        (work / FILE).write_text("\n".join(lines))
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "PATH": "/usr/bin:/bin"}
        subprocess.run(["git", "commit", "-qam", "model: a local change"], cwd=work, env=env, check=True)
        subprocess.run(["git", "format-patch", "-q", f"--base={old.oid}", "-o", str(tmp_path / "patches" / "local"),
                        "HEAD~1..HEAD"], cwd=work, env=env, check=True)
        subprocess.run(["git", "--git-dir", str(store.mirror), "worktree", "remove", "--force", str(work)], check=True)
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        builds: [{build_name("0.3.36")}, {build_name("0.3.34")}]
        pins:
          - id: local
            patches: patches/local
            unchecked: a comment
        """)
    sim = tmp_path / "sim.json"
    main(["sim", "-c", str(cfg), "--json", str(sim)])
    modes = {b["build"]: b["pins"][0].get("apply_mode") for b in json.loads(sim.read_text())["builds"]}
    assert modes == {build_name("0.3.34"): "exact", build_name("0.3.36"): modes[build_name("0.3.36")]}
    assert modes[build_name("0.3.36")] in ("offset", "3-way")
    assert main(["refresh", "-c", str(cfg), "--onto", build_name("0.3.36"), "--write"]) == 0
    out = capsys.readouterr().out
    assert "-> exact on" in out and "model: a local change" in out
    text = next((tmp_path / "patches" / "local").glob("*.patch")).read_text()
    assert "Date: Thu, 1 Jan 2026" in text
    # issue 42: never the sdist's mirror commit, which only this cache knows; with no `upstream:` to hold the
    # CHANGELOG's commit, no base-commit at all, and the run says so
    assert new.oid not in text and "base-commit:" not in text
    assert "base-commit: left out of the written series" in out and new.commit in out
    assert main(["sim", "-c", str(cfg), "--json", str(sim)]) == 0
    modes = {b["build"]: b["pins"][0].get("apply_mode") for b in json.loads(sim.read_text())["builds"]}
    assert modes[build_name("0.3.36")] == "exact"
    assert modes[build_name("0.3.34")] in ("offset", "3-way", "exact")
