"""`pinset report` on pick and blame results made by the real producers on a synthetic upstream."""

from __future__ import annotations

import pytest

from pinset.cli import main
from tests.nightly import test_pick
from tests.nightly.test_pick import BREAK
from tests.testing.report import dump, load, report


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """pick.json (picked b10; b11, b12 passed over), blame.json (b10 -> b12) and sim.json, all real, made once
    on test_pick's upstream (tags b9 < b10 < b11 < b12, `feat` broken at BREAK)."""
    root = tmp_path_factory.mktemp("nightly")
    up, cfg, shas = test_pick.world.__wrapped__(root)
    files = root / "in"
    files.mkdir()
    assert main(["pick", "-c", str(cfg), "--json", str(files / "pick.json")]) == 0
    assert main(["blame", "-c", str(cfg), "--good", "b10", "--bad", "b12", "--json", str(files / "blame.json")]) == 1
    main(["sim", "-c", str(cfg), "--builds", "b10,b12", "--json", str(files / "sim.json")])
    return cfg, shas, files


def test_pick_and_blame_in_the_comment(results, tmp_path, capsys):
    cfg, shas, files = results
    rc, md = report([files / "pick.json", files / "blame.json", files / "sim.json", "-c", cfg], tmp_path)
    assert md is not None, capsys.readouterr().err
    base = next(line for line in md.splitlines() if line.startswith("- **Base:**"))
    bad = shas[BREAK][:12]
    assert base.startswith("- **Base:** picked b10; b12 skipped: pin feat conflicts with upstream since upstream "
                           f"commit {bad} (#{7000 + BREAK}) in src/mmq.cu; b11 skipped: pin feat")
    assert "### Base and blame" in md
    row = next(line for line in md.splitlines() if line.startswith("| `feat` | conflicts with upstream since"))
    assert f"`{bad}` (#{7000 + BREAK})" in row and f"change {BREAK} (#{7000 + BREAK})" in row and "`src/mmq.cu`" in row
    # the blame explains why b12 was skipped; the sim of b12 is what blocks (b12 is in this report)
    assert rc == 1 and "blocked" in md.splitlines()[3]
    assert "Base b10: picked by simulation only" in md


def test_blame_is_information_not_a_blocker(results, tmp_path):
    cfg, shas, files = results
    rc, md = report([files / "pick.json", files / "blame.json"], tmp_path)
    line = md.splitlines()[3]
    assert "blocked" not in line and "not enough evidence" in line  # no sim/verify/kld/bench: not ready either
    assert "landed upstream" not in md and "**Blame b10 → b12:** `feat` conflicts with upstream since" in md


def test_no_green_base_blocks(results, tmp_path):
    cfg, shas, files = results
    doc = load(files / "pick.json")
    for b in doc["builds"]:
        if b["verdict"] == "picked":
            b["verdict"], b["reasons"] = "verify failed", [{"pin": None, "status": "verify",
                                                            "detail": "backend-ops", "summary": "verify failed: backend-ops"}]
        elif b["verdict"] == "not tried":
            b["verdict"], b["commit"], b["reasons"] = "not green", shas[10], [{"pin": "types", "status": "conflict",
                                                                                 "summary": "pin types conflicts"}]
    doc["picked"], doc["ok"] = None, False
    rc, md = report([dump(tmp_path / "none.json", doc)], tmp_path)
    assert rc == 1
    assert md.splitlines()[3].startswith("**❌ blocked:** no green base: pinset pick found no build")
    assert "b10: verify failed: backend-ops" in md and "- **Base:** no build is green (b12 skipped:" in md


def test_contradictory_picks_are_refused(results, tmp_path, capsys):
    cfg, shas, files = results
    doc = load(files / "pick.json")
    other = [b for b in doc["builds"] if b["build"] == "b9"][0]
    other.update(verdict="picked", commit=shas[10], reasons=[])
    picked = [b for b in doc["builds"] if b["build"] == "b10"][0]
    picked.update(verdict="not green", reasons=[{"pin": "feat", "status": "conflict", "summary": "pin feat conflicts"}])
    doc["picked"] = "b9"
    rc, md = report([files / "pick.json", dump(tmp_path / "other.json", doc)], tmp_path)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and md is None and len(err.splitlines()) == 1 and "disagree on pick" in err


def test_identical_duplicates_merge(results, tmp_path):
    cfg, shas, files = results
    copy = dump(tmp_path / "copy.json", load(files / "blame.json"))
    rc, md = report([files / "pick.json", files / "blame.json", copy], tmp_path)
    assert md.count("| `feat` | conflicts with upstream since") == 1


def beside_sim(files, tmp_path, capsys, doc, name):
    """`pinset report` of sim.json and `doc` (written as `name`): its exit code and what it said on stderr."""
    rc, _ = report([files / "sim.json", dump(tmp_path / name, doc)], tmp_path)
    return rc, capsys.readouterr().err.strip()


def test_blame_contradicting_sim_is_refused(results, tmp_path, capsys):
    cfg, shas, files = results
    doc = load(files / "blame.json")
    for p in doc["pins"]:
        if p["id"] == "feat":
            p["bad_status"] = "applied"
    rc, err = beside_sim(files, tmp_path, capsys, doc, "b.json")
    assert rc == 2 and "disagree on pin feat on build b12" in err


def test_pick_reason_contradicting_sim_is_refused(results, tmp_path, capsys):
    cfg, shas, files = results
    doc = load(files / "pick.json")
    b12 = next(b for b in doc["builds"] if b["build"] == "b12")
    b12["reasons"][0]["status"] = "contract"
    rc, err = beside_sim(files, tmp_path, capsys, doc, "p.json")
    assert rc == 2 and "disagree on pin feat on build b12: conflict (sim) vs contract (pick)" in err


def test_other_pin_set_is_refused(results, tmp_path, capsys):
    cfg, shas, files = results
    doc = load(files / "blame.json")
    doc["pinset"] = "0" * 16
    rc, err = beside_sim(files, tmp_path, capsys, doc, "b.json")
    assert rc == 2 and "different pin sets" in err
    rc, _ = report([dump(tmp_path / "b.json", doc), "-c", cfg], tmp_path)
    assert rc == 2 and "re-run the verbs" in capsys.readouterr().err


def _drop(d, key):
    d.pop(key)


@pytest.mark.parametrize("kind,change,message", [
    ("pick", lambda d: d.update(picked=3), "pick.picked: expected a string or null"),
    ("pick", lambda d: d.update(picked="b12"), "pick.picked: 'b12' is not the one build"),
    ("pick", lambda d: d["builds"][0].update(verdict="great"), "pick.builds[0].verdict: unknown value"),
    ("pick", lambda d: d["builds"][0]["reasons"][0].update(files="src/x"), "pick.builds[0].reasons[0].files"),
    ("pick", lambda d: _drop(d, "builds"), "pick.builds: missing"),
    ("pick", lambda d: d.update(schema=2), "schema 2, this pinset reads pick schema 1 only"),
    ("blame", lambda d: _drop(d["good"], "commit"), "blame.good.commit: missing"),
    ("blame", lambda d: d.update(commits="many"), "blame.commits: expected"),
    ("blame", lambda d: d["pins"][0].update(first_bad=None), "blame.pins[0].first_bad: missing for status"),
    ("blame", lambda d: d["pins"][0].update(steps=1.5), "blame.pins[0].steps"),
    ("blame", lambda d: d["pins"][0]["first_bad"].update(pr="#12"), "blame.pins[0].first_bad.pr"),
    ("blame", lambda d: d["pins"][0].update(monotone="no"), "blame.pins[0].monotone"),
    ("pick", lambda d: d["builds"][0]["reasons"][0].update(monotone=0), "pick.builds[0].reasons[0].monotone"),
])
def test_malformed_pick_and_blame_are_one_line_exit_2(results, tmp_path, capsys, kind, change, message):
    cfg, shas, files = results
    doc = load(files / f"{kind}.json")
    doc["pins"] = sorted(doc["pins"], key=lambda p: p["first_bad"] is None) if kind == "blame" else None
    if kind == "pick":
        doc.pop("pins")
        doc["builds"][0]["reasons"] = doc["builds"][0]["reasons"] or [{"pin": "x", "status": "conflict"}]
    change(doc)
    bad = dump(tmp_path / f"{kind}.json", doc)
    rc, md = report([bad], tmp_path)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and md is None and len(err.splitlines()) == 1, err
    assert message in err, err
