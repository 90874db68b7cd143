"""Same verdict on real llama.cpp snapshots whatever the cache imported before (issue 12, section 6).

Before: `--builds pypi:llama-cpp-python==0.3.35` listed 4 conflicting files of cuda-mmq-iq1m on a
fresh cache and 3 once 0.3.36 had been imported (a 3-way merge found 0.3.36's blob of
mmq-config-rdna3.cuh). Needs the sdists (PINSET_SDIST_CACHE).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.store import Store
from tests.testing import ROOT as REPO, without_start, write_pins
from tests.testing.snapshots import build_name, copy_store, import_snapshots, make_backport_pins, seed_downloads

MMQ_SERIES = REPO / "patches" / "cuda-mmq-iq1m"

pytestmark = pytest.mark.slow


def sim(cache: Path, cfg: Path, builds: str, out: Path, monkeypatch) -> dict:
    monkeypatch.setenv("PINSET_CACHE", str(cache))
    seed_downloads(Store.open(cache), [b.split("==")[1] for b in builds.split(",")])
    main(["sim", "-c", str(cfg), "--builds", builds, "--json", str(out)])
    return without_start(json.loads(out.read_text()))


def test_mmq_series_on_0335_fresh_cache_and_after_0336(tmp_path, monkeypatch):
    assert MMQ_SERIES.is_dir()
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        builds: [{build_name("0.3.35")}]
        pins:
          - id: cuda-mmq-iq1m
            patches: {MMQ_SERIES}
    """)
    fresh = sim(tmp_path / "fresh", cfg, build_name("0.3.35"), tmp_path / "fresh.json", monkeypatch)
    warm_store = Store.open(tmp_path / "warm")
    import_snapshots(warm_store, ("0.3.36",))
    warm = sim(warm_store.root, cfg, build_name("0.3.35"), tmp_path / "warm.json", monkeypatch)
    assert fresh == warm
    pin = fresh["builds"][0]["pins"][0]
    assert pin["status"] == "conflict" and pin["conflict_with"] == "upstream"
    assert pin["files"] == [f"ggml/src/ggml-cuda/mmq-config-{n}.cuh"
                            for n in ("gcn", "pascal-dp4a", "pascal-older", "rdna3")]
    assert "patch failed: ggml/src/ggml-cuda/mmq-config-rdna3.cuh:160 at hunk @@ -160,6 +160,18 @@" in pin["detail"]
    assert "missing in this build: ggml/src/ggml-cuda/mmq-config-gcn.cuh" in pin["detail"]


def test_backports_on_0334_alone_and_with_their_source_builds_imported(tmp_path, monkeypatch, snapshot_seed):
    """Pins cut from 0.3.35..0.3.36 name 0.3.35's blobs as preimages: on 0.3.34 the verdict must not
    depend on whether 0.3.35 and 0.3.36 sit in the mirror."""
    seed, builds = snapshot_seed
    warm_store = copy_store(seed, tmp_path / "warm")  # every snapshot imported, as the seed was
    pins = make_backport_pins(warm_store, builds["0.3.35"], builds["0.3.36"], tmp_path / "pins", count=13)
    cfg = write_pins(tmp_path / "pins.yaml", f"builds: [{build_name('0.3.34')}]\npins:\n"
                     + "".join(f"  - id: {p.name}\n    patches: {p}\n" for p in pins))
    warm = sim(warm_store.root, cfg, build_name("0.3.34"), tmp_path / "warm.json", monkeypatch)
    fresh = sim(tmp_path / "fresh", cfg, build_name("0.3.34"), tmp_path / "fresh.json", monkeypatch)
    assert fresh == warm
    statuses = {p["status"] for p in fresh["builds"][0]["pins"]}
    assert statuses <= {"applied", "conflict", "upstream"} and len(fresh["builds"][0]["pins"]) == len(pins)
