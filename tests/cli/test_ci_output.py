"""Output made for CI logs: no table cut when stdout is no terminal and COLUMNS is unset, NO_COLOR, results on
stdout and progress on stderr, GitHub Actions annotations and job summaries, pick's dropped optional pins."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from pinset import ci_annotations
from pinset.cli import main
from pinset.commands.pick import pick_table
from pinset.nightly.model import NOT_GREEN, PICKED, BuildPick, PickResult, Reason
from pinset.output import UNLIMITED_WIDTH, _Console
from tests.nightly.test_pick import world  # noqa: F401  (fixture)
from tests.testing import ROOT

LONG = ["pypi:llama-cpp-python==0.3.36+cu124.a-long-local-version-label",
        "pypi:llama-cpp-python==0.3.35+cu124.a-long-local-version-label"]


def pick_doc() -> PickResult:
    """Two builds with long names, the newer passed over ("pin feat conflicts with upstream in ...mmq.cu")."""
    return PickResult("d", LONG[1], [
        BuildPick(LONG[0], "a" * 40, NOT_GREEN, [Reason("feat", "conflict", files=["ggml/src/ggml-cuda/mmq.cu"])]),
        BuildPick(LONG[1], "b" * 40, PICKED)])


def render(table, environ: dict) -> str:
    screen = io.StringIO()
    _Console(file=screen, highlight=False, _environ=environ).print(table)
    return screen.getvalue()


def test_not_a_terminal_without_columns_shows_every_build_name_whole():
    text = render(pick_table(pick_doc()), {})
    assert "…" not in text and all(name in text for name in LONG)
    assert _Console(file=io.StringIO(), _environ={}).width == UNLIMITED_WIDTH


def test_columns_still_decides_where_set():
    text = render(pick_table(pick_doc()), {"COLUMNS": "60"})
    assert max(len(line) for line in text.splitlines()) <= 60
    assert not all(name in text for name in LONG)   # laid out for 60 columns, as asked


def run_cli(args, env_extra: dict, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "FORCE_COLOR", "GITHUB_ACTIONS",
                                                           "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE")}
    env.update({"PYTHONPATH": str(ROOT), **env_extra})
    return subprocess.run([sys.executable, "-m", "pinset", *args], cwd=cwd, env=env, capture_output=True, check=False,
                          text=True, timeout=600)


def optional_feat(cfg: Path) -> Path:
    cfg.write_text(cfg.read_text().replace("patches: patches/feat\n", "patches: patches/feat\n    required: false\n"))
    return cfg


def test_pick_results_on_stdout_progress_on_stderr_no_color_and_dropped_pins(world, tmp_path):  # noqa: F811
    _, cfg, _ = world
    optional_feat(cfg)
    store = {"PINSET_CACHE": str(tmp_path / "cache")} if "PINSET_CACHE" not in os.environ else {}
    done = run_cli(["pick", "-c", str(cfg), "--json", str(tmp_path / "p.json"), "--markdown", str(tmp_path / "p.md")],
                   {"FORCE_COLOR": "1", "NO_COLOR": "1", **store}, tmp_path)
    assert done.returncode == 0, done.stderr
    # stdout: the table and the result lines; stderr: what pick was doing
    assert "pinset pick" in done.stdout and "picked" in done.stdout
    assert "simulating the pin set" in done.stderr and "simulating" not in done.stdout
    # NO_COLOR: styles, but no colour (SGR 30-37/90-97 foreground, 38;... extended)
    assert not re.search(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|9[0-7])(?:;[0-9;]*)?m", done.stdout + done.stderr)
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["picked"] == "b12" and doc["dropped"] == ["feat"]
    row = doc["builds"][0]
    assert row["verdict"] == "picked" and row["dropped"][0]["pin"] == "feat" and not row["dropped"][0]["required"]
    assert "dropped optional pins on b12: feat" in done.stdout
    # FORCE_COLOR makes rich think it writes to a terminal; still no TTY, so the table is not cut or wrapped
    assert "dropped: pin feat (optional) conflicts with upstream in src/mmq.cu" in done.stdout
    assert "\x1b[?25l" not in done.stderr   # and no live bar (cursor hidden) in the log
    md = (tmp_path / "p.md").read_text()
    assert "It ships without the optional pins `feat`." in md and "dropped: pin feat (optional)" in md


def test_force_color_without_no_color_does_colour(world, tmp_path):  # noqa: F811
    """The NO_COLOR test above can fail: the same run without it is coloured."""
    _, cfg, _ = world
    done = run_cli(["pick", "-c", str(cfg)], {"FORCE_COLOR": "1"}, tmp_path)
    assert re.search(r"\x1b\[[0-9;]*3[0-7]m|\x1b\[3[0-7];", done.stdout)


def test_pick_under_github_actions_annotates_and_writes_the_summary(world, tmp_path):  # noqa: F811
    _, cfg, _ = world
    optional_feat(cfg)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    done = run_cli(["pick", "-c", str(cfg)], {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
                                              "GITHUB_WORKSPACE": str(tmp_path)}, tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(i for i, text in enumerate(cfg.read_text().splitlines(), 1) if "id: feat" in text)
    assert f"::warning file=pins.yaml,line={line},title=pinset pick::optional pin dropped on b12: pin feat (optional)" \
        in done.stderr
    assert "::" not in done.stdout   # annotations never mix into the results
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "## pinset pick" in text and "Base: picked **b12**" in text


def test_sim_conflict_annotates_pins_yaml_and_the_patch_line(world, tmp_path):  # noqa: F811
    _, cfg, _ = world
    summary = tmp_path / "summary.md"
    done = run_cli(["sim", "-c", str(cfg), "--builds", "b12"], {"GITHUB_ACTIONS": "true",
                   "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(tmp_path)}, tmp_path)
    assert done.returncode == 1
    line = next(i for i, text in enumerate(cfg.read_text().splitlines(), 1) if "id: feat" in text)
    errors = [x for x in done.stderr.splitlines() if x.startswith("::error ")]
    assert errors[0].startswith(f"::error file=pins.yaml,line={line},title=pinset%3A feat on b12::pin feat conflicts "
                                "with upstream in src/mmq.cu on b12 (start fixing: pinset rebase feat --onto b12)")
    patch = next((tmp_path / "patches" / "feat").glob("*.patch"))
    text = patch.read_text().splitlines()
    diff_line = next(i for i, t in enumerate(text, 1) if t.startswith("diff --git a/src/mmq.cu"))
    hunk_line = next(i for i, t in enumerate(text[diff_line:], diff_line + 1) if t.startswith("@@"))  # the failing hunk
    assert errors[1].startswith(f"::error file=patches/feat/{patch.name},line={hunk_line},")
    assert "## pinset sim" in summary.read_text() and "❌ conflict" in summary.read_text()


def test_config_error_is_an_annotation_at_its_line(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "pins.yaml"
    cfg.write_text("builds: [b1]\npins:\n  - id: x\n    bogus: 1\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    assert main(["sim", "-c", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"^::error file=pins.yaml,line=\d+,title=pinset sim::pinset sim%3A|^::error file=pins.yaml,line=\d+,title=pinset sim::pinset sim: ",
                     err, re.MULTILINE), err


def test_nothing_outside_actions(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "s.md"))
    assert not ci_annotations.annotate("error", "x") and not ci_annotations.step_summary("# x")
    assert capsys.readouterr().err == "" and not (tmp_path / "s.md").exists()


def test_command_escapes_what_would_end_it():
    assert ci_annotations.command("error", "50%\nnext", file="a,b:c.yaml", line=3, title="t: x") == \
        "::error file=a%2Cb%3Ac.yaml,line=3,title=t%3A x::50%25%0Anext"


def test_verify_failed_check_is_an_annotation_at_the_checks_line(tmp_path, capsys, monkeypatch):
    from pinset.config.schema import load_pinset
    fixtures = ROOT / "tests" / "fixtures" / "report"
    pinset = load_pinset(fixtures / "pins" / "pins-blocked.yaml", require_pins=False)
    from pinset.results import read_document
    from pinset.verify.model import VerifyResult
    doc = VerifyResult.from_json(read_document(fixtures / "blocked" / "verify-h200.json")[0])
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert ci_annotations.verify_annotations(pinset, doc) == 0
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(fixtures))
    assert ci_annotations.verify_annotations(pinset, doc) == 1
    line = next(i for i, text in enumerate(pinset.path.read_text().splitlines(), 1) if "op: MUL_MAT_ID, params: \"type_a=iq1_m\"" in text)
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith(f"::error file=pins/pins-blocked.yaml,line={line},title=pinset verify%3A pypi%3Allama-cpp-python==0.3.36::"
                          "feature check backend-op MUL_MAT_ID /type_a=iq1_m/ of pin cuda-mmq-iq1m failed on pypi:llama-cpp-python==0.3.36")


def test_a_conflict_in_the_second_patch_of_a_series_is_annotated_at_that_patch(make_repo, tmp_path, capsys,
                                                                               monkeypatch):
    """Trust III: the `::error` pointed at the first patch of a series (the first `diff --git` of any file the
    pin touches) when the conflict was in another."""
    from tests.testing import series, write_pins

    lines = "".join(f"line {i}\n" for i in range(1, 41))
    up = make_repo("upstream")
    b1 = up.commit("base", {"a.txt": lines})
    up.tag("b1")
    folder = series(up, b1, [("change line 5", {"a.txt": lines.replace("line 5\n", "line 5 pinned\n")}),
                             ("change line 30", {"a.txt": lines.replace("line 5\n", "line 5 pinned\n")
                                                 .replace("line 30\n", "line 30 pinned\n")})],
                    tmp_path / "patches" / "p", f"--base={b1}")
    up.commit("clash", {"a.txt": lines.replace("line 30\n", "line 30 upstream\n")})
    up.tag("b2")
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b2]\npins:\n  - id: p\n"
                                             f"    patches: patches/p\n    unchecked: test\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert main(["sim", "-c", str(cfg)]) == 1
    errors = [x for x in capsys.readouterr().err.splitlines() if x.startswith("::error ")]
    second = sorted(folder.glob("*.patch"))[1]
    text = second.read_text().splitlines()
    hunk_line = next(i for i, t in enumerate(text, 1) if t.startswith("@@") and "line 30" in "".join(text[i:i + 6]))
    at_patch = [e for e in errors if "file=patches/p/" in e]
    assert at_patch and at_patch[0].startswith(f"::error file=patches/p/{second.name},line={hunk_line},"), errors
