"""The Simulation owns its mirror (a context manager) and answers verify's question about pin symbols."""

from __future__ import annotations

import pytest

from pinset.config.schema import load_pinset
from pinset.sim.run import simulate
from pinset.store import Store
from tests.sim.test_sim import pin_set, world  # noqa: F401  (the fixture)


def _simulate(tmp_path, up, pins, builds, *ids):
    cfg = pin_set(tmp_path, up, builds, pins, *ids)
    return simulate(load_pinset(cfg), builds, Store.open(str(tmp_path / "cache")))


def test_with_block_closes_the_mirror_even_when_it_raises(world, tmp_path):  # noqa: F811
    up, pins = world
    with pytest.raises(RuntimeError):
        with _simulate(tmp_path, up, pins, ["b1"], "feat-iq1m") as sim:
            scratch = sim.mirror._tmp
            assert scratch.is_dir()
            raise RuntimeError("the command fails half-way")
    assert not scratch.exists()


def test_feature_symbols_are_those_of_the_pins_the_build_carries(world, tmp_path):  # noqa: F811
    up, pins = world
    with _simulate(tmp_path, up, pins, ["b1", "b2"], "feat-iq1m", "readme-note") as sim:
        b1, b2 = sim.result.builds
        assert sim.feature_symbols(b1) == {"GGML_TYPE_IQ1_M"}   # applied on b1
        assert sim.feature_symbols(b2) == set()                  # a conflict on b2: not in its programs
