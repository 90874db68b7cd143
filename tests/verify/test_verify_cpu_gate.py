"""The real CPU gate (CI): `pinset verify` without --cuda on the newest offline build, llama.cpp
0c1e570 from llama-cpp-python 0.3.36, with a small real pin set (fixtures/verify/cpu-gate):
a patch adding four IQ1_S MUL_MAT cases to test-backend-ops (+ its three feature checks) and a
documentation patch that is `unchecked`.

It builds test-backend-ops, test-chat and test-grammar-parser for real (CPU only, static,
GGML_NATIVE=OFF), so it takes a while on 2 cores (dev VM, 2026-11-30, cold cache): 7.4 min when the
machine was otherwise idle (cpu-build 6.5 min, CPU gates 25 s, the no-rebuild re-verify 24 s;
reports/verify/cpu-gate-ci-vm.md), 16.6 min while other builds shared the cores (cpu-build 14.7 min).
The sdist comes from PINSET_SDIST_CACHE (default ~/.cache/pinset-sdists) or PyPI.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from pinset.cli import main
from pinset.store import Store
from tests.testing import FIXTURES
from tests.testing.snapshots import keep_downloads, seed_downloads

pytestmark = pytest.mark.slow

PINS = FIXTURES / "verify" / "cpu-gate" / "pins.yaml"
BUILD = "pypi:llama-cpp-python==0.3.36"


def gates(build: dict) -> dict:
    return {g["name"]: g for g in build["gates"]}


def test_real_cpu_gate_on_the_newest_offline_build(tmp_path_factory):
    cache = tmp_path_factory.mktemp("verify-cache")
    store = Store.open(cache)
    seed_downloads(store, ["0.3.36"])
    out = tmp_path_factory.mktemp("verify-out")
    jobs = os.environ.get("PINSET_TEST_JOBS", "2")
    args = ["verify", "-c", str(PINS), "--builds", BUILD, "--cache", str(cache), "-j", jobs, "--no-progress"]

    started = time.monotonic()
    code = main([*args, "--json", str(out / "cpu.json"), "--markdown", str(out / "cpu.md")])
    first_seconds = time.monotonic() - started
    keep_downloads(store)
    doc = json.loads((out / "cpu.json").read_text())
    (build,) = doc["builds"]
    g = gates(build)
    assert code == 0 and doc["ok"] and build["ok"], (out / "cpu.md").read_text()
    assert build["commit"].startswith("0c1e57098")
    assert [p["status"] for p in build["pins"]] == ["applied", "applied"]

    # the CPU gate: MUL_MAT / MUL_MAT_ID filtered to the pin's type (iq1_s, from GGML_TYPE_IQ1_S)
    assert g["cpu-backend-ops"]["types"] == ["iq1_s"]
    ops = {(o["op"], o.get("params")): o for o in g["cpu-backend-ops"]["ops"]}
    mm = ops[("MUL_MAT", "type_a=(iq1_s),")]
    assert mm["total"] > 0 and mm["passed"] == mm["total"] and mm["failures"] == []
    assert mm["total"] == 14 + 4               # upstream's IQ1_S cases + the 4 the pin adds
    assert ops[("MUL_MAT_ID", "type_a=(iq1_s),")]["passed"] == ops[("MUL_MAT_ID", "type_a=(iq1_s),")]["total"] > 0
    assert g["cpu-test-chat"]["status"] == "passed"

    # the pin's feature checks ran on the CPU build, each with cases
    checks = g["feature-checks"]["checks"]
    assert g["feature-checks"]["status"] == "passed"
    assert g["feature-checks"]["detail"].startswith("3/3 feature checks on CPU")
    by_kind = {c["check"].split()[0]: c for c in checks}
    assert by_kind["backend-op"]["cases"] == 4    # exactly the pin's new cases
    assert by_kind["ctest"]["cases"] == 1 and by_kind["command"]["cases"] == 4
    assert by_kind["unchecked"]["status"] == "unchecked"
    assert all(g[n]["not_requested"] for n in ("cuda-build", "test-chat", "backend-ops"))

    # an unchanged re-verify does no rebuild
    started = time.monotonic()
    assert main([*args, "--json", str(out / "again.json")]) == 0
    again_seconds = time.monotonic() - started
    again = gates(json.loads((out / "again.json").read_text())["builds"][0])
    assert again["cpu-build"]["cached"] is True and again["cpu-build"]["seconds"] < 60
    print(f"\nfirst verify {first_seconds:.0f} s (cpu-build {g['cpu-build']['seconds']:.0f} s), "
          f"re-verify {again_seconds:.0f} s (cpu-build {again['cpu-build']['seconds']:.1f} s)")
