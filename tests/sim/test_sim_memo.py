"""The apply memo (pinset/sim/memo.py): the same answers as git, without git for known ones."""

from __future__ import annotations

import subprocess

from pinset import runner
from pinset.sim import memo
from tests.sim.test_sim import pin_set, world  # noqa: F401  (the fixture)
from tests.testing.sim import run_sim


def _applies(monkeypatch) -> list[tuple[str, ...]]:
    """Every `git apply` pinset starts from now on (the real git runs; its command lines are kept)."""
    seen: list[tuple[str, ...]] = []
    real = runner.run

    def watching(argv, **kw):
        if "--cached" in [str(a) for a in argv]:   # the engine's applies (not the config check's --numstat)
            seen.append(tuple(str(a) for a in argv))
        return real(argv, **kw)

    monkeypatch.setattr(runner, "run", watching)
    return seen


def test_second_run_answers_from_the_memo_with_the_same_json(world, tmp_path, monkeypatch, isolated_cache):  # noqa: F811
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2", "b3"], pins, "readme-note", "feat-iq1m", "rival")
    applies = _applies(monkeypatch)
    code, first = run_sim(tmp_path, cfg)
    assert applies, "the first run asks git"
    assert list((isolated_cache / "memo" / "apply").rglob("*.json"))
    applies.clear()
    code2, second = run_sim(tmp_path, cfg)
    assert (code2, second) == (code, first)
    assert applies == []   # every apply of the second run was known: no git apply at all


def test_a_damaged_memo_entry_is_a_miss(world, tmp_path, isolated_cache):  # noqa: F811
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2"], pins, "feat-iq1m", "readme-note", "rival")
    _, first = run_sim(tmp_path, cfg)
    for entry in (isolated_cache / "memo" / "apply").rglob("*.json"):
        entry.write_text("{\"ok\": true")   # cut short: its digest no longer matches
    for blob in (isolated_cache / "memo" / "objects").rglob("*"):
        if blob.is_file():
            blob.unlink()
    _, again = run_sim(tmp_path, cfg)
    assert again == first


def test_one_build_s_answer_serves_another_with_the_same_blobs(world, tmp_path, monkeypatch):  # noqa: F811
    """b3 differs from b1 in README only: feat-iq1m (types.h, mmq.cu) is answered on b3 from b1's apply."""
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b3"], pins, "feat-iq1m")
    applies = _applies(monkeypatch)
    _, both = run_sim(tmp_path, cfg)
    two_builds = len(applies)
    alone = tmp_path / "alone"
    alone.mkdir()
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "other-cache"))
    applies.clear()
    _, one = run_sim(alone, pin_set(alone, up, ["b1"], pins, "feat-iq1m"))
    assert both["builds"][0]["pins"] == one["builds"][0]["pins"]
    assert both["builds"][1]["pins"][0]["status"] == "applied"
    assert two_builds == len(applies) >= 1   # b3 cost no apply more than b1 alone


def test_key_changes_with_the_blob_and_with_what_the_3way_may_read():
    patch = [b"diff --git a/f b/f\nindex 1234567..89abcde 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"]
    assert memo.named_blobs(patch) == ["1234567", "89abcde"]
    entries = {"f": (0o100644, "1" * 40), "g": (0o100644, "2" * 40), "f.d/x": (0o100644, "3" * 40)}
    rel = memo.relevant(entries, frozenset({"f"}))
    assert rel == [("f", 0o100644, "1" * 40)]   # g and f.d/x cannot change git's answer for f
    base = memo.apply_key(patch, True, rel, [("1234567", ())], "git")
    assert memo.apply_key(patch, True, rel, [("1234567", ())], "git") == base
    other_blob = memo.relevant({**entries, "f": (0o100644, "4" * 40)}, frozenset({"f"}))
    assert memo.apply_key(patch, True, other_blob, [("1234567", ())], "git") != base
    assert memo.apply_key(patch, True, rel, [("1234567", ("1234567" + "0" * 33,))], "git") != base
    assert memo.apply_key(patch, False, rel, [("1234567", ())], "git") != base
    assert memo.apply_key(patch, True, rel, [("1234567", ())], "git", extra=("preimage x",)) != base
    assert memo.relevant({"f": (0o100644, "1" * 40)}, frozenset({"f/new.c"})) == [("f", 0o100644, "1" * 40)]


def test_index_written_here_reads_in_git_as_git_wrote_it(make_repo, tmp_path):
    repo = make_repo("r")
    repo.commit("files", {"a.c": "int a;\n", "dir/b.h": "int b;\n", "dir/sub/ü.c": "int c;\n"})
    index = tmp_path / "index"
    env = {"GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "-C", str(repo.path), "read-tree", "HEAD"], check=True, env={**_env(), **env})
    entries = memo.read_index(index.read_bytes())
    assert sorted(entries) == ["a.c", "dir/b.h", "dir/sub/ü.c"]
    listed = subprocess.run(["git", "-C", str(repo.path), "ls-files", "-s"], check=True, capture_output=True,
                            env={**_env(), **env}).stdout
    index.write_bytes(memo.write_index(entries))
    assert subprocess.run(["git", "-C", str(repo.path), "ls-files", "-s"], check=True, capture_output=True,
                          env={**_env(), **env}).stdout == listed
    assert memo.read_index(index.read_bytes()) == entries


def _env() -> dict[str, str]:
    import os
    return dict(os.environ)
