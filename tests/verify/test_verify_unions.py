"""A union no person wrote is verified, not trusted (issue 44): a pin whose new `case` arm repeats a label upstream
added elsewhere in the same switch is a provable union at its spot (the two additions there have disjoint
labels), yet the unioned file does not compile. verify's CPU gate (a real CMake/Ninja build of the stand-in tree,
tests/fixtures/verify/stand-in) is what catches it."""

from __future__ import annotations

import json
import shutil

import pytest

from pinset.cli import main
from tests.testing import write_pins
from tests.testing.sim import by_id, run_sim
from tests.testing.stand_in import stand_in_files

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")
                                     and shutil.which("ctest")), reason="cmake, ninja, ctest and cc are needed")

LABELS = "".join(f"        case {i}:\n" for i in range(10, 20))
SWITCH = ("int arch_kind(int a) {\n    switch (a) {\n        case 1:\n" + LABELS + "        case 2:\n"
          "            return 1;\n        default:\n            return 0;\n    }\n}\n")


def _chat(switch: str) -> str:
    return stand_in_files()["chat.c"].replace("int main(void) {", switch + "\nint main(void) {\n    (void) arch_kind(0);")


@pytest.mark.parametrize("repeat", [True, False], ids=["label-repeated", "labels-disjoint"])
def test_a_union_that_breaks_the_build_is_caught_by_the_cpu_gate(make_repo, tmp_path, repeat):
    up = make_repo("upstream")
    up.commit("v1", {**{k: v for k, v in stand_in_files().items() if v is not None}, "chat.c": _chat(SWITCH)})
    up.tag("b1")
    # the pin: its arm `case 7:` after case 2 (made on b1, its branch gone)
    up.git("checkout", "-q", "-b", "pin", "b1")
    up.commit("arch: case 7", {"chat.c": _chat(SWITCH.replace("        case 2:\n", "        case 2:\n        case 7:\n"))})
    up.git("format-patch", "-q", "-o", str(tmp_path / "patches" / "arch"), "b1..HEAD")
    up.git("checkout", "-q", "master")
    up.git("branch", "-q", "-D", "pin")
    # upstream: its own arm at the pin's spot (case 5), and (label-repeated) case 7 elsewhere in the same switch
    theirs = SWITCH.replace("        case 2:\n", "        case 2:\n        case 5:\n")
    if repeat:
        theirs = theirs.replace("        case 1:\n", "        case 7:\n        case 1:\n")
    up.commit("upstream: case 5", {"chat.c": _chat(theirs)})
    up.tag("b2")
    pins = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b2]
        unions: true
        pins:
          - id: arch
            patches: patches/arch
            unchecked: a switch arm
        """)
    code, data = run_sim(tmp_path, pins)
    pin = by_id(data["builds"][0])["arch"]
    assert code == 0 and pin["status"] == "applied" and pin["apply_mode"] == "union", pin
    (hunk,) = pin["unions"]
    assert hunk["file"] == "chat.c" and hunk["upstream"] == ["        case 5:"] and hunk["pin"] == ["        case 7:"]
    out = tmp_path / "verify.json"
    code = main(["verify", "-c", str(pins), "--json", str(out), "--no-progress", "-j", "2",
                 "--cache", str(tmp_path / "cache")])
    build = json.loads(out.read_text())["builds"][0]
    gate = {g["name"]: g for g in build["gates"]}["cpu-build"]
    if repeat:
        assert code == 1 and gate["status"] == "failed", gate
        assert "duplicate case" in "\n".join(gate.get("error", [])), gate
    else:
        assert gate["status"] == "passed", gate
