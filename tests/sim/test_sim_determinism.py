"""Same pins, same builds -> same sim JSON, whatever the cache held before (issue 12, section 6).

`git apply --3way` uses the preimage blob a patch names (`index abc..def`) when the repository has
it. These tests put such blobs into the mirror through another build fetched earlier and check that
the verdict does not move; and that the blobs a pin legitimately brings (a series' `base-commit:`,
a PR's fork point) are used every time, on a fresh cache too.
"""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from pinset.cli import main
from tests.testing import without_start, write_pins

LINES = "".join(f"line {i}\n" for i in range(1, 31))
# The pin is written on `other`, where line 10 reads "ten"; its hunk (line 12) has line 10 as
# context, so it applies to the plain build only through a 3-way merge with other's blob.
OTHER = LINES.replace("line 10\n", "ten\n")
PINNED = OTHER.replace("line 12\n", "twelve\n")
BUILD = LINES.replace("line 25\n", "twenty-five\n")


@pytest.fixture
def upstream(make_repo, tmp_path):
    """base -> build (tag `b-build`); base -> other (tag `b-other`) -> pin commit (exported)."""
    up = make_repo("upstream")
    base = up.commit("base", {"src/f.c": LINES, "README": "r\n"})
    up.commit("build change", {"src/f.c": BUILD})
    up.tag("b-build")
    up.git("checkout", "-q", "-b", "side", base)
    other = up.commit("other change", {"src/f.c": OTHER})
    up.tag("b-other")
    up.git("checkout", "-q", "-b", "pin", other)
    up.commit("the pin", {"src/f.c": PINNED})
    up.git("checkout", "-q", "master")
    return up, other


def export(up, dest, *extra):
    up.git("format-patch", "-q", *extra, "-o", str(dest), "b-other..pin")
    return dest


def sim_json(tmp_path, cfg, builds, cache, monkeypatch, name="sim.json"):
    monkeypatch.setenv("PINSET_CACHE", str(cache))
    out = tmp_path / name
    code = main(["sim", "-c", str(cfg), "--builds", builds, "--json", str(out)])
    return code, without_start(json.loads(out.read_text()))


def pins_yaml(tmp_path, up, patches):
    return write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b-build]
        pins:
          - id: pin
            patches: {patches}
    """)


def test_blob_from_another_build_fetched_earlier_does_not_change_the_verdict(upstream, tmp_path, monkeypatch):
    up, _ = upstream
    cfg = pins_yaml(tmp_path, up, export(up, tmp_path / "series"))
    # One run with both builds, b-other first: b-build's verdict is the one it has alone.
    alone = sim_json(tmp_path, cfg, "b-build", tmp_path / "alone", monkeypatch, "alone.json")
    both = sim_json(tmp_path, cfg, "b-other,b-build", tmp_path / "both", monkeypatch, "both.json")
    assert both[1]["builds"][1] == alone[1]["builds"][0]
    # Another cache that fetched b-other first: the pin's preimage blob is in its mirror. Then upstream drops
    # that history (tag and branches), so a full clone made now lacks the blob: the warm cache must too.
    sim_json(tmp_path, cfg, "b-other", tmp_path / "warm", monkeypatch, "other.json")
    up.git("tag", "-d", "b-other")
    up.git("branch", "-q", "-D", "side", "pin")
    up.git("reflog", "expire", "--expire=now", "--all")
    up.git("gc", "-q", "--prune=now")
    fresh = sim_json(tmp_path, cfg, "b-build", tmp_path / "fresh", monkeypatch, "fresh.json")
    warm = sim_json(tmp_path, cfg, "b-build", tmp_path / "warm", monkeypatch, "warm.json")
    assert fresh == warm
    pin = fresh[1]["builds"][0]["pins"][0]
    # The series names no base and upstream no longer holds its preimage: the context mismatch is a conflict.
    assert pin["status"] == "conflict" and pin["files"] == ["src/f.c"], pin
    assert "patch failed: src/f.c:9 at hunk @@ -9,7 +9,7 @@" in pin["detail"]
    assert pin["hunk"][0].startswith("@@ -9,7 +9,7 @@") and " ten" in pin["hunk"]


def test_series_base_commit_gives_the_3way_merge_on_every_cache(upstream, tmp_path, monkeypatch):
    up, other = upstream
    cfg = pins_yaml(tmp_path, up, export(up, tmp_path / "series", f"--base={other}"))
    fresh = sim_json(tmp_path, cfg, "b-build", tmp_path / "fresh", monkeypatch, "fresh.json")
    sim_json(tmp_path, cfg, "b-other", tmp_path / "warm", monkeypatch, "other.json")
    warm = sim_json(tmp_path, cfg, "b-build", tmp_path / "warm", monkeypatch, "warm.json")
    assert fresh == warm
    code, data = fresh
    pin = data["builds"][0]["pins"][0]
    assert code == 0 and pin["status"] == "applied" and pin["contract"]["ok"], pin
    # The merged tree keeps the build's change and the pin's, and its blobs are in the mirror.
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "fresh"))
    out = tmp_path / "tree"
    assert main(["apply", "-c", str(cfg), "--build", "b-build", "--out", str(out)]) == 0
    text = (out / "src/f.c").read_text()
    assert "twelve\n" in text and "twenty-five\n" in text and "line 10\n" in text


def test_series_base_missing_upstream_is_not_used(upstream, tmp_path, monkeypatch):
    """A base-commit that upstream does not have (a private branch) gives no blobs: plain apply."""
    up, other = upstream
    series = export(up, tmp_path / "series", f"--base={other}")
    up.git("tag", "-d", "b-other")
    up.git("branch", "-q", "-D", "side", "pin")
    up.git("reflog", "expire", "--expire=now", "--all")
    up.git("gc", "-q", "--prune=now")
    cfg = pins_yaml(tmp_path, up, series)
    fresh = sim_json(tmp_path, cfg, "b-build", tmp_path / "fresh", monkeypatch, "fresh.json")
    assert fresh[1]["builds"][0]["pins"][0]["status"] == "conflict"


def test_pr_pin_merges_on_its_fork_point_with_or_without_other_builds(make_repo, tmp_path, monkeypatch):
    """A PR's fork point is its base: the 3-way merge it allows happens on a fresh cache too."""
    up = make_repo("upstream")
    up.commit("base", {"src/f.c": LINES})
    fork = up.commit("fork", {"src/f.c": OTHER})
    up.git("checkout", "-q", "-b", "pr", fork)
    pr_head = up.commit("pr", {"src/f.c": PINNED})
    up.git("update-ref", "refs/pull/5/head", pr_head)
    up.git("checkout", "-q", "master")
    up.commit("upstream reverts line 10", {"src/f.c": BUILD})
    up.tag("b-build")
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b-build]
        pins:
          - id: ggml-org#5
            pr: https://github.com/ggml-org/llama.cpp/pull/5
            commit: {pr_head}
    """)
    code, data = sim_json(tmp_path, cfg, "b-build", tmp_path / "fresh", monkeypatch)
    pin = data["builds"][0]["pins"][0]
    assert code == 0 and pin["status"] == "applied", pin


def test_build_older_than_the_series_base_is_named_in_detail(make_repo, tmp_path, monkeypatch):
    up = make_repo("upstream")
    up.commit("base", {"src/f.c": LINES})
    up.tag("b-old")
    newer = up.commit("rewrite", {"src/f.c": LINES.replace("line 12\n", "line twelve (new API)\n")})
    up.tag("b-new")
    up.commit("pin", {"src/f.c": LINES.replace("line 12\n", "line twelve (new API, pinned)\n")})
    patches = tmp_path / "series"
    up.git("format-patch", "-q", f"--base={newer}", "-o", str(patches), "b-new..HEAD")
    cfg = pins_yaml(tmp_path, up, patches)
    code, data = sim_json(tmp_path, cfg, "b-old,b-new", tmp_path / "c", monkeypatch)
    old, new = (b["pins"][0] for b in data["builds"])
    assert new["status"] == "applied" and "base_relation" not in new
    assert old["status"] == "conflict" and old["conflict_with"] == "upstream"
    assert old["base_relation"] == "older"
    assert f"this build is older than the pin's base {newer[:12]}" in old["detail"]


def test_unreachable_upstream_for_a_series_base_is_an_error_not_another_verdict(upstream, tmp_path, capsys, monkeypatch):
    """Offline, the base cannot be had: say so in one line rather than simulate without it."""
    up, other = upstream
    plain, based = export(up, tmp_path / "plain"), export(up, tmp_path / "based", f"--base={other}")
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "c"))
    # fetches b-build (the plain series merges with the preimage upstream's side branch holds)
    assert main(["sim", "-c", str(pins_yaml(tmp_path, up, plain)), "--builds", "b-build"]) == 0
    (up.path / ".git").rename(up.path / "gone")  # upstream is no longer reachable
    based = pins_yaml(tmp_path, up, based)
    capsys.readouterr()
    code = main(["sim", "-c", str(based), "--builds", "b-build"])
    err = capsys.readouterr().err
    # a local upstream that is gone is refused when pins.yaml is read (bad input), before any verdict
    assert code == 2 and "is not a git repository" in err, err
    assert len(err.strip().splitlines()) == 1


def fake_sdist(cache, version: str, upstream_commit: str, files: dict[str, str]) -> str:
    """A llama-cpp-python sdist in the cache's downloads: CHANGELOG naming the commit, vendored files."""
    downloads = cache / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    top = f"llama_cpp_python-{version}"
    with tarfile.open(downloads / f"{top}.tar.gz", "w:gz") as tar:
        members = {"CHANGELOG.md": f"## [{version}]\n\n- update llama.cpp to ggml-org/llama.cpp@{upstream_commit[:9]}\n",
                   **{f"vendor/llama.cpp/{path}": text for path, text in files.items()}}
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return f"pypi:llama-cpp-python=={version}"


def test_sdist_build_older_than_the_series_base_by_its_changelog_commit(make_repo, tmp_path, monkeypatch):
    up = make_repo("upstream")
    old = up.commit("base", {"src/f.c": LINES})
    newer = up.commit("rewrite", {"src/f.c": LINES.replace("line 12\n", "line twelve (new API)\n")})
    up.commit("pin", {"src/f.c": LINES.replace("line 12\n", "line twelve (new API, pinned)\n")})
    patches = tmp_path / "series"
    up.git("format-patch", "-q", f"--base={newer}", "-o", str(patches), "HEAD~1..HEAD")
    cfg = pins_yaml(tmp_path, up, patches)
    old_sdist = fake_sdist(tmp_path / "c", "0.0.1", old, {"src/f.c": LINES})
    unrelated = fake_sdist(tmp_path / "c", "0.0.2", "abcdef123", {"src/f.c": LINES.replace("line 12\n", "x\n")})
    code, data = sim_json(tmp_path, cfg, f"{old_sdist},{unrelated}", tmp_path / "c", monkeypatch)
    older, other = (b["pins"][0] for b in data["builds"])
    assert older["status"] == "conflict" and older["base_relation"] == "older", older
    assert f"this build is older than the pin's base {newer[:12]}" in older["detail"]
    assert other["status"] == "conflict" and "base_relation" not in other  # not known: neutral
