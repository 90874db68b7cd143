"""The memo is an input too (issue 40, class 2): an answer kept under memo/ or moved/ is keyed by the engine
that made it (an older pinset's answers are never replayed), a misshapen entry with a valid digest marker is
a miss (never a traceback), and a damaged memo object is memo/'s, healed by the next run, never blamed on
the mirror."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import pinset
from pinset.sim import memo
from pinset.store import read_checked, write_checked
from tests.sim.test_sim import pin_set, world  # noqa: F401  (the fixture)
from tests.testing.sim import run_sim

PACKAGE = Path(pinset.__file__).resolve().parent


def _older_pinset(tmp_path: Path) -> Path:
    """A copy of today's pinset whose engine answers otherwise: every apply's message says so (an older
    engine whose words, or verdicts, differ from today's)."""
    root = tmp_path / "older"
    shutil.copytree(PACKAGE, root / "pinset", ignore=shutil.ignore_patterns("__pycache__"))
    engine = root / "pinset" / "sim" / "engine.py"
    text = engine.read_text()
    old = "        outcome = self._apply_git(index, prep, how)\n"
    assert text.count(old) == 1
    engine.write_text(text.replace(old, old + "        outcome.message = 'OLDER ENGINE ' + outcome.message\n"
                                              "        outcome.ok = False if 'rival' in str(prep.spec.id) else outcome.ok\n"))
    return root


def _run_older(root: Path, cfg: Path, out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-m", "pinset", "sim", "-c", str(cfg), "--json", str(out)], env=env,
                   cwd=root, capture_output=True, check=False)
    assert "OLDER ENGINE" in out.read_text()   # the older engine really answered otherwise


def test_an_older_engine_s_answers_are_never_replayed(world, tmp_path, isolated_cache):  # noqa: F811
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2", "b3"], pins, "feat-iq1m", "readme-note", "rival")
    cold_dir = tmp_path / "cold"
    cold_dir.mkdir()
    os.environ["PINSET_CACHE"] = str(tmp_path / "cold-cache")
    cold = run_sim(cold_dir, cfg)
    os.environ["PINSET_CACHE"] = str(isolated_cache)
    _run_older(_older_pinset(tmp_path), cfg, tmp_path / "older.json")
    assert list((isolated_cache / "memo" / "apply").rglob("*.json")), "the older engine warmed the memo"
    shutil.rmtree(isolated_cache / "memo" / "build")   # (keyed by the code already): only the applies' answers left
    assert run_sim(tmp_path, cfg) == cold


def test_the_engine_identity_is_in_every_key(tmp_path, monkeypatch):
    patch = [b"diff --git a/f b/f\nindex 1234567..89abcde 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"]
    rel = [("f", 0o100644, "1" * 40)]
    today = memo.apply_key(patch, True, rel, [("1234567", ())], "git")
    monkeypatch.setattr(memo, "code_digest", lambda: "another engine")
    assert memo.apply_key(patch, True, rel, [("1234567", ())], "git") != today


def test_code_digest_changes_with_any_engine_source(tmp_path, monkeypatch):
    copy = tmp_path / "pkg" / "pinset"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = memo.package_digest(copy)
    assert before == memo.code_digest()    # the installed path does not matter, only the code
    moved = copy / "sim" / "moved.py"
    moved.write_text(moved.read_text() + "\n# a change\n")
    assert memo.package_digest(copy) != before


def _rewrite(path: Path, doc) -> None:
    """An entry replaced by `doc` with a valid digest marker (what a hand edit, an older pinset or a bug writes)."""
    write_checked(path, json.dumps(doc).encode())


MISSHAPEN_APPLY = [
    {"ok": "yes", "outcome": {}, "changes": {}, "objects": []},
    {"ok": True, "outcome": {"message": 5}, "changes": {}, "objects": []},
    {"ok": True, "outcome": None, "changes": {"f": [1]}, "objects": []},
    {"ok": True, "changes": {}, "objects": []},
    {"ok": False, "outcome": {"conflict_files": "x", "message": "m", "hunk": [], "hunk_path": None,
                              "failed_patch": 99, "mode": None, "resolutions": [], "note": None, "replaced": {},
                              "renamed": {}, "merge_failed": False}, "changes": {}, "objects": []},
    {"ok": True, "outcome": {"conflict_files": [], "message": "", "hunk": [], "hunk_path": None,
                             "failed_patch": None, "mode": "exact", "resolutions": [], "note": None, "replaced": {},
                             "renamed": {}, "merge_failed": False},
     "changes": {"src/types.h": [33188, "not-an-object-id"]}, "objects": ["../../../../etc/passwd"]},
    [],
    "text",
]


@pytest.mark.parametrize("doc", MISSHAPEN_APPLY, ids=range(len(MISSHAPEN_APPLY)))
def test_a_misshapen_apply_answer_with_a_valid_marker_is_a_miss(world, tmp_path, isolated_cache, doc):  # noqa: F811
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2"], pins, "feat-iq1m", "readme-note", "rival")
    first = run_sim(tmp_path, cfg)
    shutil.rmtree(isolated_cache / "memo" / "build")
    for entry in (isolated_cache / "memo" / "apply").rglob("*.json"):
        _rewrite(entry, doc)
    assert run_sim(tmp_path, cfg) == first


MISSHAPEN_BUILD = [
    {"result": {"build": 5, "commit": "c", "pins": []}, "needs": []},
    {"result": {"build": "b1", "commit": "c", "pins": [{"id": "x"}]}, "needs": []},
    {"result": {"build": "b1", "commit": "c", "pins": [], "extra": 1}, "needs": []},
    {"result": {"build": "b1", "commit": "c", "pins": "none"}, "needs": ["zz"]},
    {"asks_upstream": "maybe"},
]


@pytest.mark.parametrize("doc", MISSHAPEN_BUILD, ids=range(len(MISSHAPEN_BUILD)))
def test_a_misshapen_build_answer_with_a_valid_marker_is_a_miss(world, tmp_path, isolated_cache, doc):  # noqa: F811
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2"], pins, "feat-iq1m", "readme-note", "rival")
    first = run_sim(tmp_path, cfg)
    for entry in (isolated_cache / "memo" / "build").rglob("*.json"):
        _rewrite(entry, doc)
    assert run_sim(tmp_path, cfg) == first


def test_a_build_answer_of_another_shape_is_a_miss(world, tmp_path, isolated_cache):  # noqa: F811
    """A pin's status that is no status, a count that is text: the fields' types are checked, not only keys."""
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1"], pins, "feat-iq1m", "rival")
    first = run_sim(tmp_path, cfg)
    for entry in (isolated_cache / "memo" / "build").rglob("*.json"):
        doc = json.loads(read_checked(entry) or b"null")
        doc["result"]["pins"][0]["status"] = "shipped"
        doc["result"]["pins"][1]["carried_fraction"] = "most"
        _rewrite(entry, doc)
    assert run_sim(tmp_path, cfg) == first


def test_a_misshapen_moved_index_is_a_miss(world, tmp_path, isolated_cache):  # noqa: F811
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b2"], pins, "feat-iq1m", "readme-note", "rival")
    first = run_sim(tmp_path, cfg)
    stored = list((isolated_cache / "moved").rglob("*.json"))
    assert stored
    shutil.rmtree(isolated_cache / "memo")
    for entry in stored:
        doc = json.loads(read_checked(entry) or b"{}")
        _rewrite(entry, {needle: {path: "many" for path in places} for needle, places in doc.items()} or {"x": {"y": "z"}})
    assert run_sim(tmp_path, cfg) == first


def _objects(cache: Path) -> list[Path]:
    return [p for p in (cache / "memo" / "objects").rglob("*") if p.is_file()]


def _reads(path: Path) -> bool:
    oid = path.parent.name + path.name
    try:
        data = zlib.decompress(path.read_bytes())
    except zlib.error:
        return False
    return hashlib.sha1(data).hexdigest() == oid


@pytest.mark.parametrize("damage", ["garbage", "empty", "other-object"])
def test_a_damaged_memo_object_is_healed_not_blamed_on_the_mirror(world, tmp_path, isolated_cache, damage,
                                                                   capsys):  # noqa: F811
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2", "b3"], pins, "feat-iq1m", "readme-note", "rival")
    first = run_sim(tmp_path, cfg)
    objects = _objects(isolated_cache)
    assert objects, "the applies kept the blobs they wrote"
    shutil.rmtree(isolated_cache / "memo" / "build")
    for path in objects:
        path.chmod(0o644)
        path.write_bytes({"garbage": b"x\x9c not zlib at all", "empty": b"",
                          "other-object": zlib.compress(b"blob 3\0abc")}[damage])
    again = run_sim(tmp_path, cfg)
    assert again == first
    assert "mirror.git" not in capsys.readouterr().err
    assert all(_reads(p) for p in _objects(isolated_cache)), "the next run healed memo/'s objects"


def test_the_stored_outcome_shape_is_the_engines(world, tmp_path, isolated_cache, monkeypatch):  # noqa: F811
    """Every answer today's engine stores is read back by today's engine: a field the engine's ApplyOutcome
    gained (unions, when the add/add unions landed) and the memo's shape did not know made every stored answer a
    miss, and sim ran git for every pin on every build it had not seen whole (twice the time, the same answer)."""
    import dataclasses

    from pinset.sim.engine import ApplyOutcome

    stored = {f.name for f in dataclasses.fields(ApplyOutcome)} - {"ok", "patch_text"} | {"failed_patch"}
    assert set(memo.OUTCOME_FIELDS) == stored
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2", "b3"], pins, "feat-iq1m", "readme-note", "rival")
    first = run_sim(tmp_path, cfg)
    shutil.rmtree(isolated_cache / "memo" / "build")   # the builds not known: each apply asks the memo
    asked: list[bool] = []
    real = memo.ApplyMemo._stored

    def counted(self, key):
        found = real(self, key)
        asked.append(found is not None)
        return found

    monkeypatch.setattr(memo.ApplyMemo, "_stored", counted)
    assert run_sim(tmp_path, cfg) == first
    assert asked and all(asked), f"{asked.count(False)} of {len(asked)} stored answers read back as misses"
