"""`pinset matrix`: one cell per sim-green build x GPU class, each with the exact pinset commands it runs;
pins.yaml's `gpus:` validated like every other key; no green build is exit 1 in one line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from pinset.cli import build_parser, main
from pinset.config.schema import load_pinset
from pinset.sim.model import BuildResult, PinResult, SimResult
from tests.testing import write_pins

B36, B35, B34 = (f"pypi:llama-cpp-python==0.3.{n}" for n in (36, 35, 34))
PATCH = "From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\ndiff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"  # a series pins.yaml accepts


def pins(tmp_path: Path, gpus: str, builds=(B36,)) -> Path:
    series = tmp_path / "patches" / "s"
    series.mkdir(parents=True, exist_ok=True)
    (series / "0001-x.patch").write_text(PATCH)
    text = f"builds: [{', '.join(builds)}]\n" + gpus + "pins:\n  - id: p\n    patches: patches/s\n"
    return write_pins(tmp_path / "pins.yaml", text)


def sim_json(tmp_path: Path, cfg: Path, status: dict[str, str]) -> Path:
    """A sim result of `cfg` in which pin p has the given status per build ("applied" is green)."""
    builds = [BuildResult(b, "0c1e57098", [PinResult("p", s, True)]) for b, s in status.items()]
    path = tmp_path / "sim.json"
    path.write_text(json.dumps(SimResult(builds, load_pinset(cfg).digest).to_json()))
    return path


def matrix(tmp_path, cfg, sim, *extra, capsys) -> tuple[int, dict | None, str]:
    rc = main(["matrix", "-c", str(cfg), "--sim", str(sim), *extra])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if rc == 0 else None), out.err


ONE = 'gpus:\n  h200: {runs-on: [self-hosted, h200], architectures: "90"}\n'
TWO = ONE + "  a100:\n    runs-on: gpu-a100\n    architectures: 80\n"


def test_one_build_one_gpu_class(tmp_path, capsys):
    cfg = pins(tmp_path, ONE)
    rc, doc, _ = matrix(tmp_path, cfg, sim_json(tmp_path, cfg, {B36: "applied"}), capsys=capsys)
    assert rc == 0 and list(doc) == ["include"]  # any other top-level key would be a matrix dimension
    (cell,) = doc["include"]
    assert (cell["build"], cell["gpu"], cell["runs-on"], cell["architectures"]) == (B36, "h200", ["self-hosted", "h200"], "90")
    assert cell["kinds"] == ["verify"] and cell["pinset"] == load_pinset(cfg).digest
    assert cell["script"] == "\n".join(cell["commands"])


def test_many_builds_many_gpu_classes_in_pins_yaml_order(tmp_path, capsys):
    cfg = pins(tmp_path, TWO, builds=(B36, B35))
    rc, doc, _ = matrix(tmp_path, cfg, sim_json(tmp_path, cfg, {B36: "applied", B35: "upstream"}), capsys=capsys)
    assert rc == 0
    cells = doc["include"]
    assert [(c["build"], c["gpu"]) for c in cells] == [(B36, "h200"), (B36, "a100"), (B35, "h200"), (B35, "a100")]
    assert [c["runs-on"] for c in cells][:2] == [["self-hosted", "h200"], ["gpu-a100"]]
    assert cells[1]["architectures"] == "80"  # `architectures: 80` (a YAML integer) reads as "80"
    for key in ("artifact", "results", "cell"):  # one upload and one folder per cell
        assert len({c[key] for c in cells}) == 4
    for c in cells:
        assert all(ch.isalnum() or ch in "._-" for ch in c["artifact"])  # upload-artifact refuses : / and the like



def test_cells_whose_names_clash_get_their_own_artifact(tmp_path, capsys):
    # "1+a" and "1-a" both read "1-a" in an artifact name; build "==2" with class "x-h200" and build "==2-x" with
    # class "h200" both join to "...-2-x-h200": every cell must still upload to its own artifact and folder
    clash = ("pypi:llama-cpp-python==1+a", "pypi:llama-cpp-python==1-a", "pypi:llama-cpp-python==2",
             "pypi:llama-cpp-python==2-x")
    gpus = 'gpus:\n  h200: {runs-on: [h200], architectures: "90"}\n  x-h200: {runs-on: [x], architectures: "90"}\n'
    cfg = pins(tmp_path, gpus, builds=clash)
    rc, doc, _ = matrix(tmp_path, cfg, sim_json(tmp_path, cfg, dict.fromkeys(clash, "applied")), capsys=capsys)
    assert rc == 0
    cells = doc["include"]
    assert len(cells) == 8
    for key in ("artifact", "results"):
        assert len({c[key] for c in cells}) == 8, sorted(c[key] for c in cells)
    assert all(ch.isalnum() or ch in "._-" for c in cells for ch in c["artifact"])
    assert all(c["results"].endswith("/" + c["artifact"]) and c["commands"][0].count(c["results"] + "/") == 3
               for c in cells)


def test_selectors_take_the_builds_the_sim_resolved_them_to(tmp_path, capsys):
    """pins.yaml's (or --builds') selectors stand for the builds the sim resolved them to: the matrix takes
    those from the sim JSON (a selector's newest N, in the sim's order), not the selector itself."""
    series = tmp_path / "patches" / "s"
    series.mkdir(parents=True)
    (series / "0001-x.patch").write_text(PATCH)
    cfg = write_pins(tmp_path / "pins.yaml", "upstream: https://github.com/ggml-org/llama.cpp\n"
                     "builds: [\"tags:b*:2\", \"pypi:llama-cpp-python>=0.3.35\", b5000]\n" + ONE
                     + "pins:\n  - id: p\n    patches: patches/s\n")
    # a sim of this pins.yaml and of an earlier one with tags:b*:3: tags:b*:2 is the newest two of b6001..b6003
    # (b5000 matches b* but is named on its own), pypi:...>=0.3.35 not the pre-release nor 0.3.34
    simulated = {"b6001": "applied", "b6002": "conflict", "b6003": "applied", B34: "applied", B35: "applied",
                 B36: "applied", "pypi:llama-cpp-python==0.4.0rc1": "applied", "b5000": "applied"}
    rc, doc, err = matrix(tmp_path, cfg, sim_json(tmp_path, cfg, simulated), capsys=capsys)
    assert rc == 0, err
    assert [c["build"] for c in doc["include"]] == ["b6003", B35, B36, "b5000"]
    assert "b6002 left out: the sim is red" in err and "b6001" not in err
    rc = main(["matrix", "-c", str(cfg), "--sim", str(tmp_path / "sim.json"), "--builds", "tags:c*:1"])
    err = capsys.readouterr().err
    assert rc == 2 and "no simulated build matches the selector tags:c*:1" in err and len(err.splitlines()) == 1


def test_more_cells_than_actions_runs_is_one_line_exit_2(tmp_path, capsys):
    builds = tuple(f"pypi:llama-cpp-python==0.3.{n}" for n in range(129))
    cfg = pins(tmp_path, TWO, builds=builds)
    sim = sim_json(tmp_path, cfg, dict.fromkeys(builds, "applied"))
    rc, _, err = matrix(tmp_path, cfg, sim, capsys=capsys)
    assert rc == 2 and "258 cells, but GitHub Actions expands at most 256 jobs" in err and len(err.splitlines()) == 1
    rc, doc, _ = matrix(tmp_path, cfg, sim, "--gpus", "h200", capsys=capsys)
    assert rc == 0 and len(doc["include"]) == 129


@pytest.mark.parametrize("flag, value, expected", [("--pinset-command", "", "--pinset-command: empty"),
                                                   ("--pinset-command", "  ", "--pinset-command: empty"),
                                                   ("--results-dir", "", "--results-dir '': a folder name"),
                                                   ("--results-dir", "/", "--results-dir '/': a folder name")])
def test_empty_command_or_results_folder_is_one_line_exit_2(tmp_path, capsys, flag, value, expected):
    cfg = pins(tmp_path, ONE)
    rc, _, err = matrix(tmp_path, cfg, sim_json(tmp_path, cfg, {B36: "applied"}), flag, value, capsys=capsys)
    assert rc == 2 and expected in err and len(err.splitlines()) == 1, err

def test_commands_are_exact_pinset_command_lines(tmp_path, capsys):
    cfg = pins(tmp_path, TWO, builds=(B36,))
    rc, doc, _ = matrix(tmp_path, cfg, sim_json(tmp_path, cfg, {B36: "applied"}), "--kld-model", "/m/a b.gguf",
                        "--bench-model", "/m/x.gguf", "--bench-args", "-p 512 -ngl 99", "--verify-args", "--op-jobs 4",
                        capsys=capsys)
    assert rc == 0
    for cell in doc["include"]:
        assert cell["kinds"] == ["verify", "kld", "bench"]
        parsed = {}
        for line in cell["commands"]:
            argv = shlex.split(line)
            assert argv[0] == "pinset"
            parsed[argv[1]] = build_parser(argv[1]).parse_args(argv[1:])
        v, k, b = parsed["verify"], parsed["kld"], parsed["bench"]
        assert v.cuda and v.builds == B36 and v.gpu_class == cell["gpu"] and v.op_jobs == 4 and v.config == str(cfg)
        assert v.json == f"{cell['results']}/verify.json"
        assert (k.build, k.gpu_class, str(k.model), str(k.json)) == (B36, cell["gpu"], "/m/a b.gguf", f"{cell['results']}/kld.json")
        assert (b.build, b.gpu_class, b.llama_bench_args) == (B36, cell["gpu"], ["--", "-p", "512", "-ngl", "99"])


def test_a_red_build_gets_no_cell_and_is_named(tmp_path, capsys):
    cfg = pins(tmp_path, TWO, builds=(B36, B35, B34))
    rc, doc, err = matrix(tmp_path, cfg, sim_json(tmp_path, cfg, {B36: "applied", B35: "conflict", B34: "applied"}),
                          capsys=capsys)
    assert rc == 0
    assert {c["build"] for c in doc["include"]} == {B36, B34} and len(doc["include"]) == 4
    assert f"{B35} left out: the sim is red (p conflict)" in err


def test_builds_and_gpus_select(tmp_path, capsys):
    cfg = pins(tmp_path, TWO, builds=(B36, B35))
    rc, doc, _ = matrix(tmp_path, cfg, sim_json(tmp_path, cfg, {B36: "applied", B35: "applied"}),
                        "--builds", B35, "--gpus", "a100", capsys=capsys)
    assert rc == 0 and [(c["build"], c["gpu"]) for c in doc["include"]] == [(B35, "a100")]


def test_no_green_build_is_exit_1_in_one_line_and_writes_nothing(tmp_path, capsys):
    cfg = pins(tmp_path, ONE, builds=(B36, B35))
    out = tmp_path / "matrix.json"
    rc, _, err = matrix(tmp_path, cfg, sim_json(tmp_path, cfg, {B36: "conflict", B35: "error"}), "--json", str(out),
                        capsys=capsys)
    assert rc == 1 and not out.exists()
    assert err.count("\n") == 3 and "no build is green in the sim (2 red)" in err.splitlines()[-1]


def test_json_file(tmp_path, capsys):
    cfg = pins(tmp_path, ONE)
    out = tmp_path / "m" / "matrix.json"
    rc = main(["matrix", "-c", str(cfg), "--sim", str(sim_json(tmp_path, cfg, {B36: "applied"})), "--json", str(out)])
    assert rc == 0 and capsys.readouterr().out == ""
    assert [c["gpu"] for c in json.loads(out.read_text())["include"]] == ["h200"]


@pytest.mark.parametrize("gpus, expected", [
    ("", "has no `gpus:`"),
    ("gpus: [h200]\n", "pins.yaml:2: gpus: must be a mapping, got a list"),
    ("gpus: {}\n", "pins.yaml:2: gpus: empty mapping"),
    ("gpus:\n  h200: {architectures: \"90\"}\n", "pins.yaml:3: gpus.h200.runs-on: missing"),
    ("gpus:\n  h200: {runs-on: [x]}\n", "pins.yaml:3: gpus.h200.architectures: missing"),
    ("gpus:\n  h200: {runs-on: [], architectures: \"90\"}\n", "pins.yaml:3: gpus.h200.runs-on: empty list"),
    ("gpus:\n  h200: {runs-on: null, architectures: \"90\"}\n", "pins.yaml:3: gpus.h200.runs-on: must be a string, got null"),
    ("gpus:\n  h200: {runs-on: [a, a], architectures: \"90\"}\n", "pins.yaml:3: gpus.h200.runs-on: duplicate runner label"),
    ("gpus:\n  h200: {runs-on: [\"a,b\"], architectures: \"90\"}\n", "gpus.h200.runs-on: malformed runner label"),
    ("gpus:\n  h200: {runs-on: [x], architectures: \"sm 90\"}\n", "pins.yaml:3: gpus.h200.architectures: malformed 'sm 90'"),
    ("gpus:\n  h200: {runs-on: [x], architectures: \"90\", labels: [y]}\n", "pins.yaml:3: gpus.h200.labels: unknown key"),
    ("gpus:\n  h200:\n    runs-on: [x]\n    runs-on: [y]\n    architectures: \"90\"\n", "pins.yaml:5: gpus.h200.runs-on: duplicate key"),
    ("gpus:\n  \"h 200\": {runs-on: [x], architectures: \"90\"}\n", "gpus.h 200: malformed GPU class name"),
])
def test_bad_gpus_is_one_line_exit_2(tmp_path, capsys, gpus, expected):
    cfg = pins(tmp_path, gpus)
    sim = tmp_path / "sim.json"
    sim.write_text("{}")
    rc = main(["matrix", "-c", str(cfg), "--sim", str(sim)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and expected in err, err


def test_unknown_gpu_class_stale_sim_and_unsimulated_build_are_exit_2(tmp_path, capsys):
    cfg = pins(tmp_path, ONE, builds=(B36, B35))
    sim = sim_json(tmp_path, cfg, {B36: "applied"})
    assert main(["matrix", "-c", str(cfg), "--sim", str(sim), "--gpus", "b200"]) == 2
    assert "no GPU class 'b200' (known: h200)" in capsys.readouterr().err
    assert main(["matrix", "-c", str(cfg), "--sim", str(sim)]) == 2
    assert f"build {B35} was not simulated" in capsys.readouterr().err
    cfg.write_text(cfg.read_text() + "description: changed\n")  # another pin set now
    assert main(["matrix", "-c", str(cfg), "--sim", str(sim), "--builds", B36]) == 2
    assert "re-run pinset sim" in capsys.readouterr().err


from tests.sim.test_sim import pin_set, world  # noqa: E402,F401  (a real upstream git repository and patch series)


def test_without_sim_json_the_sim_runs_and_decides(world, tmp_path, capsys):
    up, series = world
    cfg = pin_set(tmp_path, up, ["b1", "b2", "b3"], series, "feat-iq1m")  # feat-iq1m conflicts with b2's upstream
    cfg.write_text(cfg.read_text() + ONE)
    assert main(["matrix", "-c", str(cfg)]) == 0
    out = capsys.readouterr()
    assert [c["build"] for c in json.loads(out.out)["include"]] == ["b1", "b3"]
    assert "b2 left out: the sim is red (feat-iq1m conflict)" in out.err
