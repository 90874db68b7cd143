"""Retirement across moved code: a pin upstream landed in a split or renamed file is `upstream`,
a pin made of boilerplate is not (real git histories, and the pure matching rule)."""

from __future__ import annotations

import json

import pytest

from pinset.cli import main
from pinset.sim.changes import BOILERPLATE_FILES, moved_match
from tests.nightly.test_blame import series
from tests.testing import GitRepo, write_pins
from tests.testing.history import FastHistory

BOILER = ["#include <metal_stdlib>", "using namespace metal;", "threadgroup_barrier(mem_flags::mem_threadgroup);",
          "const int tid = tpitg.x;", "const int nb = args.ne00/QK_K;"]


def kernel(name: str, n: int = 8) -> str:
    """A kernel: boilerplate lines every kernel shares, then `n` lines only this kernel has."""
    body = "".join(f"    float {name}_acc_{i} = {name}_grid[{i}] * d_{name} + {i}.5f;\n" for i in range(n))
    return (f"kernel void kernel_{name}(device const char * src0, uint3 tpitg[[thread_position_in_threadgroup]]) {{\n"
            + "".join(f"    {b}\n" for b in BOILER[2:]) + body + "}\n\n")


HEADER = "".join(b + "\n" for b in BOILER[:2]) + "\n"
MONOLITH = HEADER + kernel("q4_0") + kernel("q8_0") + kernel("iq2_xs")
PIN_KERNEL = kernel("iq1_m")
DISPATCH = "ggml/src/ggml-metal/ggml-metal-dispatch.metal"
DISPATCH_TEXT = "".join(f"constant int dispatch_{i} = {i};\n" for i in range(12))


@pytest.fixture
def world(tmp_path):
    """b1: one ggml-metal.metal. Then upstream splits it into kernels/*.metal at commit SPLIT; on the
    branch to `landed` the split brings the pin's kernel too (re-indented), on `split-only` it does not."""
    up = GitRepo(tmp_path / "upstream")
    h = FastHistory()
    marks = {0: h.commit("base", {"ggml/src/ggml-metal/ggml-metal.metal": MONOLITH, "src/noise.c": "0\n",
                                  DISPATCH: DISPATCH_TEXT})}
    h.tag("b1", marks[0])
    split = {f"ggml/src/ggml-metal/kernels/{k}.metal": HEADER + kernel(k) for k in ("q4_0", "q8_0", "iq2_xs")}
    split["ggml/src/ggml-metal/ggml-metal.metal"] = None
    split[DISPATCH] = None                                   # renamed into kernels/ as well
    split["ggml/src/ggml-metal/kernels/dispatch.metal"] = DISPATCH_TEXT
    for i in range(1, 41):
        files = {"src/noise.c": f"{i}\n"}
        if i == 30:
            files.update(split)
            files["ggml/src/ggml-metal/kernels/iq1_m.metal"] = HEADER + PIN_KERNEL.replace("    ", "\t")
            marks[i] = h.commit("metal: split the shader library into one file per kernel (#31337)", files)
        else:
            marks[i] = h.commit(f"change {i} (#{5000 + i})", files)
    h.tag("landed", marks[40])
    h.commit("metal: split the shader library (without iq1_m)", split, branch="split-only", parent=marks[0])
    h.tag("split-only", h._marks)
    shas = {i: sha for i, sha in ((i, h.write(up.path)[m]) for i, m in [(30, marks[30])])}
    up.git("checkout", "-q", "-f", "master")
    pins = tmp_path / "patches"
    base = up.git("rev-parse", "b1").strip()
    metal = "ggml/src/ggml-metal/ggml-metal.metal"
    series(up, base, "metal-iq1m", {metal: MONOLITH + PIN_KERNEL}, pins)
    # a pin of lines every kernel file has, plus one distinctive line upstream happens to have too, into
    # a file without them: after the split the whole tree holds all of them, yet none says the pin landed
    series(up, base, "boilerplate", {DISPATCH: DISPATCH_TEXT + "".join(f"    {b}\n" for b in BOILER[2:])
                                     + "    float q4_0_acc_0 = q4_0_grid[0] * d_q4_0 + 0.5f;\n"}, pins)
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1, split-only, landed]
        pins:
          - id: metal-iq1m
            patches: patches/metal-iq1m
          - id: boilerplate
            patches: patches/boilerplate
        """)
    return up, cfg, shas


def test_a_pin_landed_in_a_split_file_is_upstream_and_says_where(world, tmp_path):
    _, cfg, _ = world
    out = tmp_path / "sim.json"
    main(["sim", "-c", str(cfg), "--json", str(out)])
    builds = {b["build"]: {p["id"]: p for p in b["pins"]} for b in json.loads(out.read_text())["builds"]}
    assert builds["b1"]["metal-iq1m"]["status"] == "applied"
    assert builds["split-only"]["metal-iq1m"]["status"] == "conflict"      # the file is gone, the kernel too
    landed = builds["landed"]["metal-iq1m"]
    assert landed["status"] == "upstream" and landed["retire"]
    assert landed["detail"] == ("build already carries this pin in moved code: 9 of its 9 distinctive added "
                                "lines found in ggml/src/ggml-metal/kernels/iq1_m.metal (9)")
    # boilerplate lines are everywhere after the split: never a reason to retire a pin. Its file was moved
    # whole into kernels/: `git am -3` merges the pin into it there, and so does the sim
    assert builds["b1"]["boilerplate"]["status"] == "applied"
    for name in ("landed", "split-only"):
        pin = builds[name]["boilerplate"]
        assert pin["status"] == "applied" and not pin["retire"] and pin["apply_mode"] == "3-way", pin
        assert pin["detail"].endswith(f"{DISPATCH} -> ggml/src/ggml-metal/kernels/dispatch.metal"), pin


def test_blame_says_the_split_landed_the_pin(world, tmp_path):
    _, cfg, shas = world
    out = tmp_path / "blame.json"
    code = main(["blame", "-c", str(cfg), "--good", "b1", "--bad", "landed", "--pin", "metal-iq1m", "--json", str(out)])
    (pin,) = json.loads(out.read_text())["pins"]
    assert code == 1 and pin["status"] == "upstream" and pin["first_bad"]["commit"] == shas[30]
    assert pin["first_bad"]["pr"] == 31337 and pin["summary"].startswith(f"landed upstream in {shas[30][:12]}")
    assert "kernels/iq1_m.metal" in pin["detail"]


def test_moved_match_rule():
    pin = {f"distinct {i}": 1 for i in range(8)} | {"boiler": 2}
    everywhere = {f"f{i}.c": 1 for i in range(BOILERPLATE_FILES)}
    locations = {f"distinct {i}": {"new/a.c": 1} for i in range(8)} | {"boiler": everywhere}
    m = moved_match(pin, locations)
    assert (m.total, m.distinctive, m.found, m.fraction) == (10, 8, 8, 1.0) and m.carried(0.95)
    assert m.where == [("new/a.c", 8)]
    # found in two files: both named, most first
    locations["distinct 0"] = {"new/b.c": 1}
    assert moved_match(pin, locations).where == [("new/a.c", 7), ("new/b.c", 1)]
    # one distinctive line missing out of 8: 87.5 % < 95 %
    del locations["distinct 7"]
    assert not moved_match(pin, locations).carried(0.95)
    # mostly boilerplate: 2 distinctive lines found of 12 -> too little to recognise the pin by
    small = {"a": 1, "b": 1} | {f"boiler {i}": 1 for i in range(10)}
    locs = {"a": {"x.c": 1}, "b": {"x.c": 1}} | {f"boiler {i}": everywhere for i in range(10)}
    assert not moved_match(small, locs).carried(0.95)
    # a line the pin adds twice needs two copies in the build
    assert moved_match({"dup": 2, "c": 1, "d": 1}, {"dup": {"x.c": 1}, "c": {"x.c": 1}, "d": {"x.c": 1}}).found == 3
