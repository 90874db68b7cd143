"""Integration: `pinset sim` on real llama.cpp snapshots (sdists from PyPI), real pins."""

from __future__ import annotations

import json

import pytest

from pinset.cli import main
from tests.testing import ROOT as REPO, write_pins
from tests.testing.snapshots import SNAPSHOTS, build_name, copy_store, make_backport_pins

MMQ_SERIES = REPO / "patches" / "cuda-mmq-iq1m"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real(tmp_path_factory, snapshot_seed):
    root = tmp_path_factory.mktemp("real")
    seed, builds = snapshot_seed
    store = copy_store(seed, root / "cache")
    pins = make_backport_pins(store, builds["0.3.35"], builds["0.3.36"], root / "pins", count=6)
    return store, builds, pins, root


def test_snapshot_commits_come_from_the_changelog(real):
    _, builds, _, _ = real
    assert {v: b.commit for v, b in builds.items()} == SNAPSHOTS


def test_backports_are_upstream_on_new_and_apply_on_old(real, monkeypatch):
    store, builds, pins, root = real
    monkeypatch.setenv("PINSET_CACHE", str(store.root))
    entries = "".join(f"  - id: {p.name}\n    patches: {p}\n" for p in pins)
    extra = f"  - id: cuda-mmq-iq1m\n    patches: {MMQ_SERIES}\n" if MMQ_SERIES.is_dir() else ""
    cfg = write_pins(root / "pins.yaml", "builds: [" + ", ".join(build_name(v) for v in SNAPSHOTS) + "]\npins:\n" + extra + entries)
    out = root / "sim.json"
    code = main(["sim", "-c", str(cfg), "--json", str(out)])
    data = json.loads(out.read_text())
    by_build = {b["build"]: {p["id"]: p for p in b["pins"]} for b in data["builds"]}
    assert len(pins) == 6
    new, old, older = (by_build[build_name(v)] for v in ("0.3.36", "0.3.35", "0.3.34"))
    for pin in pins:
        assert new[pin.name]["status"] == "upstream" and new[pin.name]["retire"] is True, new[pin.name]
        assert old[pin.name]["status"] == "applied", old[pin.name]
        assert old[pin.name]["contract"]["ok"] is True, old[pin.name]
        assert older[pin.name]["status"] in ("applied", "conflict", "upstream")
        if older[pin.name]["status"] == "conflict":
            assert older[pin.name]["conflict_with"] == "upstream"
    if MMQ_SERIES.is_dir():
        mmq = new["cuda-mmq-iq1m"]
        assert mmq["status"] == "applied" and mmq["contract"]["ok"] is True, mmq
        assert "ggml/src/ggml-cuda/mmq.cu" in mmq["files"]
    assert code == (0 if data["ok"] else 1)
