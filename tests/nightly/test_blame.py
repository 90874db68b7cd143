"""`pinset blame` on long synthetic upstream histories made with real git (fast-import)."""

from __future__ import annotations

import json
import math
import os
import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from pinset.cli import main
from pinset.nightly.bisect import SENTINELS, bisect_pins
from pinset.nightly.blame import BlameResult
from pinset.nightly.history import pr_number
from tests.testing import GIT_ENV, without_start
from tests.testing.history import FastHistory
from tests.testing.nightly import BROKEN_MMQ, FILLER, MMQ_CU, README, TYPES_H, feat_and_types, import_history, series

STEADY = FILLER.replace("filler", "steady")
COMMITS = 300
BREAK_FEAT, MERGE_TYPES, MERGE_PR, SQUASH_README = 137, 200, 220, 250


def git(path, *args) -> str:
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True,
                          env=dict(os.environ, **GIT_ENV)).stdout


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """300 first-parent commits; one breaks `feat`, a merged side branch breaks `types`, a merged PR
    lands the PR pin, a squash merge lands `readme-note`; `steady` never changes."""
    from tests.testing import GitRepo

    root = tmp_path_factory.mktemp("blame")
    up = GitRepo(root / "upstream")
    h = FastHistory()
    marks = {}
    prev = h.commit("base", {"src/types.h": TYPES_H, "src/mmq.cu": MMQ_CU, "README": README,
                             "src/steady.c": STEADY, "src/noise.c": "int noise = 0;\n"})
    marks[0] = prev
    h.tag("b0", prev)
    pr = h.commit("feature: add pr555 file", {"src/pr555.c": "int pr555_feature(void) { return 555; }\n"},
                  branch="pr555", parent=marks[0])
    h.ref("refs/pull/555/head", pr)
    for i in range(1, COMMITS + 1):
        files = {"src/noise.c": f"int noise = {i};\n"}
        if i == BREAK_FEAT:
            files["src/mmq.cu"] = BROKEN_MMQ
            marks[i] = h.commit(f"cuda: gate mmq on a runtime flag (#{9000 + i})", files)
        elif i == MERGE_TYPES:
            merged = {"src/types.h": TYPES_H.replace("    GGML_TYPE_COUNT", "    GGML_TYPE_Q1_0 = 3,\n    GGML_TYPE_COUNT"),
                      "docs/q1.md": "Q1_0\n", "tests/q1.c": "int q1;\n"}
            side = None
            for path, text in merged.items():  # fast-import: a merge's tree is what we give it, so give it all
                side = h.commit(f"ggml: Q1_0 {path}", {path: text}, branch="side", parent=side or marks[i - 1])
            files.update(merged)
            marks[i] = h.commit("Merge pull request #4242 from someone/q1-type", files, merge=side)
        elif i == MERGE_PR:
            marks[i] = h.commit("Merge pull request #555 from someone/feature", files, merge=pr)
        elif i == SQUASH_README:
            files["README"] = README + "The pinned build carries extra MMQ types for 1-bit quants.\nSee docs.\n"
            marks[i] = h.commit("docs: readme note (#777)", files)
        else:
            marks[i] = h.commit(f"noise {i} (#{9000 + i})", files)
    h.tag("bad", marks[COMMITS])
    shas = import_history(h, up, marks)
    pins = root / "patches"
    series(up, shas[0], "readme-note",
           {"README": README + "The pinned build carries extra MMQ types for 1-bit quants.\n"}, pins)
    series(up, shas[0], "steady", {"src/steady.c": STEADY + "int steady_extra(void) { return 42; }\n"}, pins)
    pr_sha = git(up.path, "rev-parse", "refs/pull/555/head").strip()
    cfg = feat_and_types(up, shas[0], pins, root / "pins.yaml", "b0, bad",
                         "  - id: readme-note\n    patches: patches/readme-note\n"
                         f"  - id: pr555\n    pr: https://github.com/ggml-org/llama.cpp/pull/555\n    commit: {pr_sha}\n"
                         "  - id: steady\n    patches: patches/steady\n")
    return up, cfg, shas


def run_blame(cfg, tmp_path, *extra):
    out = tmp_path / "blame.json"
    code = main(["blame", "-c", str(cfg), "--good", "b0", "--bad", "bad", "--json", str(out),
                 "--markdown", str(tmp_path / "blame.md"), *extra])
    return code, json.loads(out.read_text()) if out.exists() else None


def test_blame_names_each_breaking_commit(world, tmp_path):
    up, cfg, shas = world
    code, doc = run_blame(cfg, tmp_path)
    assert code == 1 and doc["kind"] == "blame" and doc["schema"] == 1 and not doc["ok"]
    assert doc["commits"] == COMMITS and doc["good"] == {"build": "b0", "commit": shas[0]}
    pins = {p["id"]: p for p in doc["pins"]}
    feat = pins["feat"]
    assert feat["status"] == "conflict" and feat["good_status"] == "applied" and feat["bad_status"] == "conflict"
    assert feat["first_bad"]["commit"] == shas[BREAK_FEAT] and feat["last_good"]["commit"] == shas[BREAK_FEAT - 1]
    assert feat["first_bad"]["pr"] == 9000 + BREAK_FEAT and feat["files"] == ["src/mmq.cu"]
    assert feat["first_bad"]["subject"].startswith("cuda: gate mmq")
    # the merge commit on the first-parent line is blamed, and its PR named
    types = pins["types"]
    assert types["status"] == "conflict" and types["first_bad"]["commit"] == shas[MERGE_TYPES]
    assert types["first_bad"]["merge"] is True and types["first_bad"]["pr"] == 4242
    assert types["first_bad"]["merged_commits"] == 3
    # landed upstream: a squash merge and a PR merged with a merge commit
    readme = pins["readme-note"]
    assert readme["status"] == "upstream" and readme["first_bad"]["commit"] == shas[SQUASH_README]
    assert readme["summary"].startswith(f"landed upstream in {shas[SQUASH_README][:12]} (#777)")
    pr = pins["pr555"]
    assert pr["status"] == "upstream" and pr["first_bad"]["commit"] == shas[MERGE_PR] and pr["first_bad"]["pr"] == 555
    assert pins["steady"]["status"] == "ok" and pins["steady"]["first_bad"] is None and pins["steady"]["steps"] == 0
    # shared bisection: each pin needs at most ceil(log2(n)) steps, and the probes are shared (besides
    # the sentinels that look for a second flip)
    bound = math.ceil(math.log2(COMMITS))
    assert all(p["steps"] <= bound for p in doc["pins"])
    assert doc["probes"] - SENTINELS < sum(p["steps"] for p in doc["pins"])
    assert all(p["monotone"] is True for p in doc["pins"] if p["first_bad"])
    md = (tmp_path / "blame.md").read_text()
    assert shas[BREAK_FEAT][:12] in md and "(#4242)" in md
    assert BlameResult.from_json(doc).to_json() == without_start(doc)


def test_blame_agrees_with_sim_on_both_sides_of_the_break(world, tmp_path):
    up, cfg, shas = world
    out = tmp_path / "sim.json"
    main(["sim", "-c", str(cfg), "--builds", f"{shas[BREAK_FEAT - 1]},{shas[BREAK_FEAT]}", "--json", str(out)])
    before, after = (next(p for p in b["pins"] if p["id"] == "feat") for b in json.loads(out.read_text())["builds"])
    assert before["status"] == "applied" and after["status"] == "conflict"


def test_blame_of_a_fine_pin_exits_0(world, tmp_path):
    _, cfg, _ = world
    code, doc = run_blame(cfg, tmp_path, "--pin", "steady")
    assert code == 0 and doc["ok"] and [p["id"] for p in doc["pins"]] == ["steady"] and doc["probes"] == 0


def test_blame_only_named_pins(world, tmp_path):
    _, cfg, shas = world
    code, doc = run_blame(cfg, tmp_path, "--pin", "feat")
    assert code == 1 and [p["id"] for p in doc["pins"]] == ["feat"]
    assert doc["pins"][0]["first_bad"]["commit"] == shas[BREAK_FEAT]


@pytest.mark.parametrize("args, message", [
    (["--good", "bad", "--bad", "b0"], "is not an ancestor"),
    (["--good", "b0", "--bad", "b0"], "same commit"),
    (["--good", "b0", "--bad", "bad", "--pin", "nope"], "--pin nope: no such pin"),
    (["--good", "b0", "--bad", "no-such-tag"], "no such tag"),
    (["--good", "pypi:llama-cpp-python==0.3.35", "--bad", "bad"], "no history to bisect"),
    (["--good", "b0", "--bad", "tags:b*:2"], "no history to bisect"),
])
def test_blame_bad_input_is_one_line_exit_2(world, tmp_path, capsys, args, message):
    _, cfg, _ = world
    code = main(["blame", "-c", str(cfg), *args, "--json", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "x.json").exists()


def test_pr_number_from_subjects():
    assert pr_number("cuda: faster mmq (#12345)") == 12345
    assert pr_number("Merge pull request #77 from a/b") == 77
    assert pr_number("see #12 for details") is None
    assert pr_number("fix (#12) and more") is None


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 400), st.lists(st.tuples(st.integers(1, 399), st.booleans()), min_size=1, max_size=6))
def test_shared_bisection_finds_every_flip(count, flips):
    """Monotonic pins: the found first-bad index is the flip point; every probe is inside the range."""
    flips = {f"p{i}": (min(at, count - 1), retire) for i, (at, retire) in enumerate(flips)}
    probes = []

    def probe(i):
        assert 0 < i < count - 1
        probes.append(i)
        return {p: ("upstream" if retire else "conflict") if i >= at else "applied" for p, (at, retire) in flips.items()}

    found = bisect_pins(count, dict.fromkeys(flips, "applied"), probe)
    for pin, (at, _) in flips.items():
        assert found[pin].first_bad == at and found[pin].last_good == at - 1
        assert found[pin].steps <= math.ceil(math.log2(count))
    assert len(probes) == len(set(probes))   # a commit is never probed twice
    assert len(probes) <= len(flips) * math.ceil(math.log2(count)) + SENTINELS
    assert all(f.monotone for f in found.values())


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_bisection_of_any_state_sequence_ends_on_a_flip(data):
    """Non-monotonic states (a pin that breaks, heals and breaks again): the answer is still a real
    flip, last_good in the good state and first_bad, right after it, not."""
    count = data.draw(st.integers(2, 200))
    states = {p: data.draw(st.lists(st.sampled_from(["applied", "conflict", "upstream"]), min_size=count,
                                    max_size=count)) for p in ("a", "b", "c")}
    for seq in states.values():
        seq[0] = "applied"
        if seq[-1] == "applied":
            seq[-1] = "conflict"
    probed = []

    def probe(i):
        probed.append(i)
        return {p: s[i] for p, s in states.items()}

    found = bisect_pins(count, dict.fromkeys(states, "applied"), probe)
    for pin, f in found.items():
        assert f.first_bad == f.last_good + 1
        assert states[pin][f.last_good] == "applied" and states[pin][f.first_bad] != "applied"
        # honest: no probed commit before the answer was broken, and "monotone" only when no probe
        # after it was fine again
        assert all(states[pin][i] == "applied" for i in probed if i < f.first_bad)
        healed = any(states[pin][i] == "applied" for i in probed if i > f.first_bad)
        assert f.monotone is not healed   # (a flip no probe landed in may stay unseen, as with git bisect)
