"""`pinset history` on nights of real results (tests/testing/nights.py: sim, pick, blame, verify, bench, kld and
forecast JSON written by the verbs on a moving upstream): every cell of the grid against the sim files it came
from, red streaks and their blame against blame's own file, refreshes against the digests, alarms against the
forecasts; ordering by start time, never by file times; a results branch read like the folder; damaged,
foreign and old files; the markdown against its golden; the page in a real browser (headless Chromium)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.results import Doc
from pinset.sim.model import SimResult
from tests.testing import FIXTURES, GIT_ENV, GOLDEN
from tests.testing.nights import NIGHTS

GOLDEN_MD = GOLDEN / "history" / "history.md"


def run_history(capsys, *argv) -> tuple[int, str]:
    rc = main(["history", *map(str, argv)])
    return rc, capsys.readouterr().err


def expected_cells(results: Path) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(pin, night) -> [(build, state)] read from each night's sim.json through sim's own model."""
    out: dict = {}
    for night in sorted(p.name for p in results.iterdir()):
        path = results / night / "sim.json"
        sim = SimResult.from_json(Doc(json.loads(path.read_text()), path, "sim"))
        for b in sim.builds:
            for p in b.pins:
                out.setdefault((p.id, night), []).append((b.build, p.state))
    return out


def digests(results: Path) -> dict[str, list[tuple[str, str]]]:
    out: dict = {}
    for night in NIGHTS:
        doc = json.loads((results / night / "sim.json").read_text())
        for p in doc["builds"][0]["pins"]:
            out.setdefault(p["id"], []).append((night, p["digest"]))
    return out


def test_history_json_against_the_results(history_nights, tmp_path, capsys):
    rc, err = run_history(capsys, history_nights, "--json", tmp_path / "h.json")
    doc = json.loads((tmp_path / "h.json").read_text())
    assert rc == 1, "types is red on the last night"
    assert doc["kind"] == "history" and doc["started"].endswith("Z")
    assert [n["night"] for n in doc["nights"]] == list(NIGHTS)
    cells = expected_cells(history_nights)
    assert {(c[0], c[1]) for c in cells} == {(p["id"], n) for p in doc["pins"] for n in NIGHTS}
    for pin in doc["pins"]:
        for night, state in zip(NIGHTS, pin["states"]):
            assert [(b["build"], b["state"]) for b in state["builds"]] == cells[(pin["id"], night)]
            assert state["shipped"] == cells[(pin["id"], night)][0][1]
    by_id = {p["id"]: p for p in doc["pins"]}
    # the story: feat red on n2 the second night, replaced the third; types moved, refreshed, red on n3
    assert cells[("feat", "2026-11-02")] == [("n1", "applied"), ("n2", "conflict")]
    assert by_id["feat"]["red_since"] is None
    for pin, seen in digests(history_nights).items():
        changed = [n for (_, a), (n, b) in zip(seen, seen[1:]) if a != b]
        assert by_id[pin]["refreshed_on"] == changed == ["2026-11-03"]
    blame = json.loads((history_nights / "2026-11-04" / "blame.json").read_text())
    first_bad = next(p["first_bad"] for p in blame["pins"] if p["id"] == "types")
    red = by_id["types"]["red_since"]
    assert red["night"] == "2026-11-04" and red["build"] == "n3" and red["state"] == "conflict"
    assert red["blamed"]["commit"] == first_bad["commit"] and red["blamed"]["by"] == "blame"
    # the forecast: PR 2 would break feat, on the last two nights; PR 1 (merged as n3) no longer open
    assert [(a["pr"], a["pin"], a["since"], a["nights"]) for a in doc["forecast_alarms"]] == [(2, "feat", "2026-11-03", 2)]
    assert [n["night"] for b in doc["bench"] for n in b["nights"]] == list(NIGHTS) * len(doc["bench"])
    # damaged and foreign files: named on stderr and in the JSON, never counted
    skipped = {Path(s["path"]).name: s["why"] for s in doc["skipped"]}
    assert set(skipped) == {"damaged.json", "matrix.json"}
    assert "not JSON" in skipped["damaged.json"] and "not a result history reads" in skipped["matrix.json"]
    assert err.count("pinset history: skipped ") == 2 and "damaged.json" in err
    assert doc["nights"][-1]["files"] == len([p for p in (history_nights / NIGHTS[-1]).glob("*.json")]) - 2


def test_every_verb_wrote_its_start_time(history_nights):
    """sim, pick, blame, verify, bench, kld and forecast: each file says when its run began, in UTC, after schema
    and kind; the nights' runs started in the order they were made."""
    kinds, times = set(), []
    for night in NIGHTS:
        for path in sorted((history_nights / night).glob("*.json")):
            if path.name in ("damaged.json", "matrix.json"):
                continue
            doc = json.loads(path.read_text())
            assert list(doc)[:3] == ["schema", "kind", "started"], path
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["started"]), path
            kinds.add(doc["kind"])
            times.append((night, doc["started"]))
    verified = all(shutil.which(t) for t in ("cmake", "ninja", "cc", "ctest"))   # as the fixture decides
    assert kinds == {"sim", "pick", "blame", "bench", "kld", "forecast"} | ({"verify"} if verified else set())
    firsts = [min(t for n, t in times if n == night) for night in NIGHTS]
    assert firsts == sorted(firsts)


def test_runs_are_ordered_by_start_time_never_by_name_or_file_time(history_nights, tmp_path, capsys):
    """Folders named against their order, file times against it too: the start times decide. Without start
    times (files of older pinsets) the folder names decide."""
    src = tmp_path / "runs"
    names = {night: f"run-{9 - i}" for i, night in enumerate(NIGHTS)}     # run-9 is the first night
    for i, (night, name) in enumerate(names.items()):
        shutil.copytree(history_nights / night, src / name)
        for f in (src / name).iterdir():
            os.utime(f, (2_000_000_000 - i * 86400,) * 2)                  # the first night has the newest files
    rc, _ = run_history(capsys, src, "--json", tmp_path / "h.json")
    doc = json.loads((tmp_path / "h.json").read_text())
    assert [n["night"] for n in doc["nights"]] == [names[n] for n in NIGHTS]
    for f in src.glob("*/*.json"):   # older files: no start time
        try:
            data = json.loads(f.read_text())
        except ValueError:
            continue
        data.pop("started", None)
        f.write_text(json.dumps(data))
    run_history(capsys, src, "--json", tmp_path / "h2.json")
    doc2 = json.loads((tmp_path / "h2.json").read_text())
    assert [n["night"] for n in doc2["nights"]] == sorted(names.values())
    assert all(n["started"] is None for n in doc2["nights"])


def test_a_results_branch_reads_like_the_folder(history_nights, tmp_path, capsys):
    repo = tmp_path / "repo"
    shutil.copytree(history_nights, repo)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["checkout", "-q", "-b", "pinset-results"], ["add", "-A"],
                 ["commit", "-q", "-m", "nights"], ["checkout", "-q", "--orphan", "other"], ["rm", "-rqf", "."]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    rc_folder, _ = run_history(capsys, history_nights, "--json", tmp_path / "folder.json")
    rc_branch, err = run_history(capsys, repo, "--branch", "pinset-results", "--json", tmp_path / "branch.json")
    folder, branch = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("folder", "branch"))
    assert rc_folder == rc_branch == 1
    for doc in (folder, branch):
        doc.pop("started")
        doc["skipped"] = [Path(s["path"].split(":")[-1]).name for s in doc["skipped"]]
    assert folder == branch
    assert "pinset-results:2026-11-04/damaged.json" in err
    rc, err = run_history(capsys, repo, "--branch", "no-such-branch")
    assert rc == 2 and "no-such-branch" in err and len(err.strip().splitlines()) == 1


def test_older_schemas_read_and_a_foreign_or_newer_file_is_skipped(history_nights, tmp_path, capsys):
    src = tmp_path / "runs"
    shutil.copytree(history_nights / NIGHTS[0], src / NIGHTS[0])
    sim = json.loads((src / NIGHTS[0] / "sim.json").read_text())
    for p in (pin for b in sim["builds"] for pin in b["pins"]):
        p.pop("digest")           # a sim of before the digest
    sim.pop("started")
    (src / NIGHTS[0] / "sim.json").write_text(json.dumps(sim))
    (src / NIGHTS[0] / "sim-next.json").write_text(json.dumps({**sim, "schema": 99}))
    (src / NIGHTS[0] / "model.json").write_text(json.dumps({"schema": 1, "kind": "model"}))
    (src / NIGHTS[0] / "bad-sim.json").write_text(json.dumps({**sim, "builds": "none"}))
    # a bench of schema 1 (recorded on an H200 before schema 2) counts on the night it lies in
    (src / NIGHTS[0] / "cell").mkdir()
    shutil.copy(FIXTURES / "report" / "green" / "bench-h200.json", src / NIGHTS[0] / "cell" / "bench-h200.json")
    rc, err = run_history(capsys, src, "--json", tmp_path / "h.json")
    doc = json.loads((tmp_path / "h.json").read_text())
    assert rc == 0 and [p["states"][0]["digest"] for p in doc["pins"]] == [None, None]
    old_bench = json.loads((FIXTURES / "report" / "green" / "bench-h200.json").read_text())
    assert old_bench["schema"] == 1
    shown = {b["benchmark"]: b["nights"] for b in doc["bench"]}
    for row in old_bench["rows"]:
        (name,) = [n for n in shown if n.startswith(f"{row['test']} · {old_bench['model']['name']} · ") and "CPU" not in n]
        assert shown[name] == [{"night": NIGHTS[0], "ratio": row["ratio"], "ci95": row["ci95"], "verdict": row["verdict"]}]
    why = {Path(s["path"]).name: s["why"] for s in doc["skipped"]}
    assert "sim schema 99" in why["sim-next.json"] and "kind 'model'" in why["model.json"]
    assert "sim.builds: expected a list" in why["bad-sim.json"]
    assert err.count("skipped") == 3


def test_a_pin_taken_out_of_the_set_is_red_no_longer(history_nights, tmp_path, capsys):
    """feat is red on the second night; on a third night whose sim no longer names it, nothing is red."""
    src = tmp_path / "runs"
    for night in NIGHTS[:2]:
        shutil.copytree(history_nights / night, src / night)
    rc, _ = run_history(capsys, src, "--json", tmp_path / "two.json")
    feat = {p["id"]: p for p in json.loads((tmp_path / "two.json").read_text())["pins"]}["feat"]
    assert rc == 1 and feat["red_since"]["night"] == NIGHTS[1] and feat["red_since"]["build"] == "n2"
    sim = json.loads((history_nights / NIGHTS[1] / "sim.json").read_text())
    for b in sim["builds"]:
        b["pins"] = [p for p in b["pins"] if p["id"] != "feat"]
    sim["started"] = "2030-01-01T00:00:00Z"
    (src / "2030-01-01").mkdir()
    (src / "2030-01-01" / "sim.json").write_text(json.dumps(sim))
    rc, _ = run_history(capsys, src, "--json", tmp_path / "three.json", "--markdown", tmp_path / "three.md")
    feat = {p["id"]: p for p in json.loads((tmp_path / "three.json").read_text())["pins"]}["feat"]
    assert rc == 0 and feat["red_since"] is None and feat["states"][-1] is None
    assert f"(on {NIGHTS[1]}; not since)" in (tmp_path / "three.md").read_text()


def test_no_runs_and_no_folder(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    rc, _ = run_history(capsys, tmp_path / "empty", "--markdown", tmp_path / "e.md", "--html", tmp_path / "e.html")
    assert rc == 0 and "No runs found." in (tmp_path / "e.md").read_text()
    assert "0 nights (no runs)" in (tmp_path / "e.html").read_text()
    rc, err = run_history(capsys, tmp_path / "missing")
    assert rc == 2 and err.count("\n") == 1 and "missing: no such folder of results" in err


def test_a_link_from_a_result_file_is_only_ever_a_web_link(history_nights, tmp_path, capsys):
    src = tmp_path / "runs"
    shutil.copytree(history_nights / NIGHTS[-1], src / NIGHTS[-1])
    forecast = json.loads((src / NIGHTS[-1] / "forecast.json").read_text())
    forecast["prs"][0]["url"] = "javascript:alert(1)"
    (src / NIGHTS[-1] / "forecast.json").write_text(json.dumps(forecast))
    run_history(capsys, src, "--html", tmp_path / "h.html", "--markdown", tmp_path / "h.md")
    for name in ("h.html", "h.md"):
        text = (tmp_path / name).read_text()
        assert "javascript:" not in text and "#2" in text


def test_without_pandas_or_matplotlib_one_line_exit_2(history_nights, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    rc, err = run_history(capsys, history_nights)
    assert rc == 2 and err.strip() == "pinset history: error: pinset history needs matplotlib: pip install 'pinset[measure]'"


def test_markdown_golden(history_nights, tmp_path, capsys, monkeypatch):
    """Run from the folder above the results, as the workflow does: the files are named relative to it."""
    monkeypatch.chdir(history_nights.parent)
    out = tmp_path / "summary.md"
    run_history(capsys, "results", "-c", history_nights.parent / "project" / "pins.yaml", "--markdown", out)
    text = out.read_text()
    if os.environ.get("PINSET_REGEN_GOLDENS"):
        GOLDEN_MD.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN_MD.write_text(text)
    assert text == GOLDEN_MD.read_text()
    assert (tmp_path / "summary-bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![head/base ratio over the nights](summary-bench.png)" in text


# --- the page in a real browser ------------------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Grid(HTMLParser):
    """The grid's cells as the browser's DOM has them: (pin, night) -> (state, [(build, state)])."""

    def __init__(self):
        super().__init__()
        self.cells: dict = {}
        self.at: tuple | None = None
        self.tags: set[str] = set()
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        self.sources += [a[k] for k in ("src",) if k in a]
        if tag == "link" and a.get("href"):
            self.sources.append(a["href"])
        if tag == "td" and "data-pin" in a:
            self.at = (a["data-pin"], a["data-night"])
            self.cells[self.at] = (a["data-state"], [])
        elif tag == "span" and self.at and "data-build" in a:
            self.cells[self.at][1].append((a["data-build"], a["data-state"]))

    def handle_endtag(self, tag):
        if tag == "td":
            self.at = None


def chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", "--user-data-dir=" + str(Path(args[-1][7:]).parent / "profile"), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is needed (.ci/run installs it)")
def test_the_page_in_headless_chromium(history_nights, tmp_path, capsys):
    page = tmp_path / "history.html"
    run_history(capsys, history_nights, "--html", page)
    text = page.read_text()
    assert "<script" not in text.lower() and "@import" not in text
    dom = chromium("--dump-dom", f"file://{page}")
    assert dom.returncode == 0, dom.stderr[-2000:]
    grid = Grid()
    grid.feed(dom.stdout)
    assert {"table", "img"} <= grid.tags
    assert all(s.startswith("data:image/png;base64,") for s in grid.sources), grid.sources  # nothing fetched
    expected = expected_cells(history_nights)
    assert set(grid.cells) == set(expected)
    for key, builds in expected.items():
        assert grid.cells[key] == (builds[0][1], builds), key
    shot = tmp_path / "shot.png"
    done = chromium("--window-size=412,915", f"--screenshot={shot}", f"file://{page}")   # a phone's width
    assert shot.is_file(), done.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    colours = {tuple(round(float(c), 2) for c in px) for px in pixels.reshape(-1, pixels.shape[-1])[::7]}
    assert len(colours) > 50, "a blank or nearly blank screenshot"
    red = [c for c in colours if c[0] > .7 and c[1] < .25 and c[2] < .3]   # the conflict cells, in the grid's red
    assert red, "no conflict cell drawn"
    assert re.search(r'data-state="conflict"', dom.stdout)
