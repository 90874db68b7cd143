"""`pinset cache info|clean` on a real cache layout (issue 23 §5): sizes by kind, what goes, what stays (the
mirror, ccache, whatever a running pinset holds, anything outside the cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinset import cli
from pinset.store import Store, scratch_dir
from tests.sim.test_sim import pin_set, world  # noqa: F401  (the fixture)
from tests.testing import child_env
from tests.testing.sim import run_sim

DAY = 86400.0


def _file(path: Path, size: int, age_days: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))
    _age(path, age_days)
    return path


def _age(path: Path, days: float) -> None:
    t = time.time() - days * DAY
    os.utime(path, (t, t), follow_symlinks=False)


def _build(root: Path, key: str, size: int, age_days: float) -> Path:
    folder = root / "builds" / key
    _file(folder / "build" / "bin" / "llama-cli", size, age_days)
    _file(folder / "key.json", 10, age_days)
    (folder / "lock").touch()
    for p in (folder / "lock", folder / "build" / "bin", folder / "build", folder):
        _age(p, age_days)
    return folder


@pytest.fixture
def cache(tmp_path):
    root = Store.open(tmp_path / "cache").root
    subprocess.run(["git", "init", "-q", "--bare", str(root / "mirror.git")], check=True)
    _build(root, "old", 300_000, 30)
    _build(root, "new", 200_000, 1)
    _file(root / "downloads" / "llama_cpp_python-0.3.36.tar.gz", 100_000, 20)
    _file(root / "downloads" / "llama_cpp_python-0.3.36.tar.gz.sha256", 65, 20)
    _file(root / "downloads" / "llama_cpp_python-0.3.37.tar.gz.part", 50_000, 20)  # a download to resume
    _file(root / "pins" / "o-r-1-abc-def.diff", 5_000, 10)
    _file(root / "ccache" / "a" / "obj", 40_000, 40)
    return root


def _cli(capsys, *argv) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_info_sizes_each_kind(cache, capsys):
    code, out = _cli(capsys, "cache", "info", "--cache", str(cache), "--json")
    doc = json.loads(out)
    kinds = {k["kind"]: k for k in doc["kinds"]}
    assert code == 0 and doc["schema"] == 1 and doc["cache"] == str(cache)
    assert kinds["builds"]["entries"] == 2 and kinds["builds"]["bytes"] >= 500_000
    assert kinds["sdists"]["entries"] == 2 and kinds["sdists"]["bytes"] >= 150_000  # the sdist and the .part
    assert kinds["mirror"]["bytes"] > 0 and kinds["ccache"]["bytes"] >= 40_000 and kinds["results"]["entries"] == 1
    assert doc["bytes"] == sum(k["bytes"] for k in doc["kinds"])
    code, out = _cli(capsys, "cache", "info", "--cache", str(cache))
    assert code == 0 and out.splitlines()[0] == f"cache {cache}"
    assert next(line for line in out.splitlines() if line.split()[0] == "builds").split()[1:3] != ["0", "B"]


def test_info_on_a_missing_cache_creates_nothing(tmp_path, capsys):
    code, out = _cli(capsys, "cache", "info", "--cache", str(tmp_path / "nothing"))
    assert code == 0 and "does not exist yet" in out and not (tmp_path / "nothing").exists()


def test_clean_builds_older_than_takes_only_old_build_folders(cache, capsys):
    code, out = _cli(capsys, "cache", "clean", "--cache", str(cache), "--builds", "--older-than", "7", "--json")
    doc = json.loads(out)
    assert code == 0 and [e["path"] for e in doc["removed"]] == ["builds/old"]
    assert not (cache / "builds" / "old").exists() and (cache / "builds" / "new" / "key.json").exists()
    assert (cache / "downloads" / "llama_cpp_python-0.3.36.tar.gz").exists()
    assert doc["freed_bytes"] >= 300_000


def test_dry_run_removes_nothing(cache, capsys):
    before = sorted(str(p) for p in cache.rglob("*"))
    code, out = _cli(capsys, "cache", "clean", "--cache", str(cache), "--dry-run")
    assert code == 0 and "would remove builds: builds/old" in out and "would remove sdists" in out
    assert sorted(str(p) for p in cache.rglob("*")) == before


def test_clean_keeps_the_mirror_ccache_and_unfinished_downloads(cache, capsys):
    code, out = _cli(capsys, "cache", "clean", "--cache", str(cache))
    assert code == 0
    assert not (cache / "builds" / "old").exists() and not (cache / "builds" / "new").exists()
    assert not (cache / "downloads" / "llama_cpp_python-0.3.36.tar.gz").exists()
    assert not (cache / "downloads" / "llama_cpp_python-0.3.36.tar.gz.sha256").exists()
    assert not (cache / "pins" / "o-r-1-abc-def.diff").exists()
    assert (cache / "downloads" / "llama_cpp_python-0.3.37.tar.gz.part").exists()
    assert (cache / "mirror.git" / "HEAD").exists() and (cache / "ccache" / "a" / "obj").exists()


def test_a_build_folder_a_running_pinset_holds_is_kept(cache, capsys):
    """A real second process holds the build's lock, as a running verify does (store.locked)."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom pathlib import Path\nfrom pinset.store import locked\n"
        "with locked(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(60)\n"),
        str(cache / "builds" / "old" / "lock")], stdout=subprocess.PIPE, text=True,
        env=child_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        code, out = _cli(capsys, "cache", "clean", "--cache", str(cache), "--builds")
        assert code == 0 and "kept builds: builds/old (in use" in out and "removed builds: builds/new" in out
        assert (cache / "builds" / "old" / "build" / "bin" / "llama-cli").exists()
        assert not (cache / "builds" / "new").exists()
    finally:
        holder.kill()
        holder.wait()
    code, out = _cli(capsys, "cache", "clean", "--cache", str(cache), "--builds")
    assert "removed builds: builds/old" in out and not (cache / "builds" / "old").exists()


def test_a_download_in_progress_is_kept(cache, capsys):
    lock = cache / "downloads" / ".llama_cpp_python-0.3.36.lock"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom pathlib import Path\nfrom pinset.store import locked\n"
        "with locked(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(60)\n"), str(lock)],
        stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        _cli(capsys, "cache", "clean", "--cache", str(cache))
        assert (cache / "downloads" / "llama_cpp_python-0.3.36.tar.gz").exists()
    finally:
        holder.kill()
        holder.wait()


def test_nothing_outside_the_cache_goes(cache, tmp_path, capsys):
    outside = _file(tmp_path / "precious" / "model.gguf", 1000)
    (cache / "builds" / "old" / "link-to-outside").symlink_to(outside.parent)  # inside a build folder
    (cache / "builds" / "linked").symlink_to(outside.parent)                    # a build "folder" that is a link
    (cache / "logs").mkdir()
    (cache / "logs" / "verify").symlink_to(outside.parent)
    _age(cache / "logs" / "verify", 30)
    _cli(capsys, "cache", "clean", "--cache", str(cache))
    assert outside.read_bytes() and not (cache / "builds" / "old").exists()
    assert (tmp_path / "precious").is_dir()


def test_a_scratch_folder_of_a_live_run_is_kept_a_dead_ones_goes(cache, capsys):
    live = scratch_dir(cache / "tmp", "sdist-")
    dead = cache / "tmp" / "sdist-999-dead"
    dead.mkdir()
    try:
        _cli(capsys, "cache", "clean", "--cache", str(cache))
        assert live.path.is_dir() and not dead.exists()
    finally:
        live.close()


@pytest.mark.parametrize("days", ["0", "-1", "nan", "inf", "x"])
def test_older_than_must_be_a_positive_number(cache, days, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["cache", "clean", "--cache", str(cache), "--older-than", days])
    assert exc.value.code == 2 and (cache / "builds" / "old").exists()


def test_a_file_as_the_cache_is_bad_input(tmp_path, capsys):
    f = _file(tmp_path / "file", 10)
    assert cli.main(["cache", "clean", "--cache", str(f)]) == 2 and f.exists()


def _outside(tmp_path: Path) -> dict[str, Path]:
    """A folder outside the cache laid out as each kind folder would be, every entry old (what clean would take)."""
    out = tmp_path / "outside"
    made = {
        "builds": _build(out, "k1", 1000, 30).parent,
        "downloads": _file(out / "downloads" / "llama_cpp_python-0.3.1.tar.gz", 1000, 30).parent,
        "pins": _file(out / "pins" / "o-r-1-a-b.diff", 100, 30).parent,
        "logs": _file(out / "logs" / "verify" / "x.log", 100, 30).parent.parent,
        "tmp": (out / "tmp"),
    }
    (out / "tmp" / "precious-folder").mkdir(parents=True)  # no pinset lock on it: reads as a dead run's scratch
    _file(out / "tmp" / "precious-folder" / "data", 100, 30)
    return made


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_kind_folder_that_is_a_link_is_removed_as_a_link_never_followed(tmp_path, capsys):
    root = Store.open(tmp_path / "cache").root
    targets = _outside(tmp_path)
    for kind, target in targets.items():
        (root / kind).symlink_to(target, target_is_directory=True)
    before = _tree(tmp_path / "outside")
    code, out = _cli(capsys, "cache", "clean", "--cache", str(root))
    assert code == 0, out
    assert _tree(tmp_path / "outside") == before and len(before) > 10  # nothing it points at went
    assert not any((root / kind).is_symlink() or (root / kind).exists() for kind in targets)  # the links went
    code, out = _cli(capsys, "cache", "clean", "--cache", str(root))
    assert code == 0 and _tree(tmp_path / "outside") == before


def test_builds_only_and_dry_run_never_follow_a_linked_kind_folder(tmp_path, capsys):
    root = Store.open(tmp_path / "cache").root
    targets = _outside(tmp_path)
    (root / "builds").symlink_to(targets["builds"])
    before = _tree(tmp_path / "outside")
    code, out = _cli(capsys, "cache", "clean", "--cache", str(root), "--dry-run")
    assert code == 0 and "k1" not in out and (root / "builds").is_symlink()
    code, out = _cli(capsys, "cache", "clean", "--cache", str(root), "--builds")
    assert code == 0 and "k1" not in out and not (root / "builds").is_symlink()
    assert _tree(tmp_path / "outside") == before


def test_links_deeper_in_the_cache_are_removed_as_links(cache, tmp_path, capsys):
    targets = _outside(tmp_path)
    sdist = targets["downloads"] / "llama_cpp_python-0.3.1.tar.gz"
    (cache / "downloads" / "llama_cpp_python-0.3.2.tar.gz").symlink_to(sdist)          # an sdist that is a link
    (cache / "pins" / "o-r-2-a-b.diff").symlink_to(targets["pins"] / "o-r-1-a-b.diff")  # a PR diff that is a link
    (cache / "builds" / "linked").symlink_to(targets["builds"] / "k1")                  # a build that is a link
    (cache / "builds" / "old" / "build" / "out").symlink_to(targets["builds"])          # a link inside a build
    (cache / "tmp").mkdir()
    (cache / "tmp" / "refresh-1-dead").symlink_to(targets["tmp"])                       # a scratch "folder"
    for link in ("downloads/llama_cpp_python-0.3.2.tar.gz", "pins/o-r-2-a-b.diff", "builds/linked"):
        _age(cache / link, 30)
    before = _tree(tmp_path / "outside")
    code, out = _cli(capsys, "cache", "clean", "--cache", str(cache))
    assert code == 0 and _tree(tmp_path / "outside") == before
    for link in ("downloads/llama_cpp_python-0.3.2.tar.gz", "pins/o-r-2-a-b.diff", "builds/linked", "builds/old"):
        assert not os.path.lexists(cache / link), link


def test_safe_remove_never_goes_through_a_link(tmp_path):
    from pinset.store import safe_remove

    root = tmp_path / "cache"
    outside = _file(tmp_path / "outside" / "keep" / "file", 10).parent
    root.mkdir()
    (root / "kind").symlink_to(outside.parent)
    assert safe_remove(root, root / "kind" / "keep") is False and outside.is_dir()   # reached through a link
    with pytest.raises(ValueError):
        safe_remove(root, outside)                                                   # not inside the cache
    with pytest.raises(ValueError):
        safe_remove(root, root / "kind" / ".." / ".." / "outside")
    assert safe_remove(root, root / "kind") is True and outside.is_dir() and not os.path.lexists(root / "kind")


def test_clean_trims_sim_s_remembered_answers_by_age_and_all_of_them_without(world, tmp_path, capsys,
                                                                             isolated_cache):  # noqa: F811
    """memo/ (apply answers, whole builds, their blobs) and moved/ are the cache's too: `clean` takes them (one
    line of text), `--older-than` only the old ones, and the next sim works out the same answers again."""
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2", "b3"], pins, "feat-iq1m", "readme-note", "rival")
    _, first = run_sim(tmp_path, cfg)
    capsys.readouterr()
    memo = [p for p in (isolated_cache / "memo").rglob("*") if p.is_file()]
    kinds = {p.relative_to(isolated_cache / "memo").parts[0] for p in memo}
    assert kinds == {"apply", "build", "objects"} and list((isolated_cache / "moved").iterdir())
    code, out = _cli(capsys, "cache", "info", "--cache", str(isolated_cache), "--json")
    assert {k["kind"]: k for k in json.loads(out)["kinds"]}["memo"]["bytes"] > 0
    builds = sorted((isolated_cache / "memo" / "build").rglob("*.json"))
    for path in (builds[0], builds[0].with_name(builds[0].name + ".sha256")):
        _age(path, 30)
    code, out = _cli(capsys, "cache", "clean", "--cache", str(isolated_cache), "--older-than", "7", "--json")
    doc = json.loads(out)
    assert code == 0 and [e["path"] for e in doc["removed"]] == [str(builds[0].relative_to(isolated_cache))]
    assert not builds[0].exists() and not builds[0].with_name(builds[0].name + ".sha256").exists()
    assert all(p.exists() for p in builds[1:])
    code, out = _cli(capsys, "cache", "clean", "--cache", str(isolated_cache))
    assert code == 0 and len([line for line in out.splitlines() if line.startswith("removed memo:")]) == 1
    assert not any(p.is_file() for p in (isolated_cache / "memo").rglob("*"))
    assert not any(p.is_file() for p in (isolated_cache / "moved").rglob("*"))
    assert not list((isolated_cache / "memo").rglob("*"))   # the emptied shard folders go too
    assert (isolated_cache / "mirror.git" / "HEAD").exists()
    _, again = run_sim(tmp_path, cfg)
    assert again == first
