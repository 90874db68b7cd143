"""One-line errors with the right exit code, for every verb that builds or runs on the GPU.

No GPU visible (nvidia-smi missing, failing, or listing none) is one line and exit 2 before anything is
built; a build that fails (cmake configure, ninja) is a runtime failure: exit 1, one line naming the log.
Faults are injected with small fake programs on PATH; git and the pin set are real.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinset.cli import main
from tests.testing import fake_program, write_pins

NO_SMI_DRIVER = "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9\n"
NO_SMI_DEVICES = "#!/bin/sh\necho 'No devices were found'\nexit 6\n"
NO_SMI_EMPTY = "#!/bin/sh\nexit 0\n"
CMAKE_ERROR = "#!/bin/sh\necho 'CMake Error at CMakeLists.txt:3 (project): No CMAKE_CUDA_COMPILER could be found.' >&2\nexit 1\n"
NINJA_FAILED = "#!/bin/sh\necho '[1/2] Building C object x.o'\necho 'FAILED: x.o'\necho 'x.c:1: error: boom'\nexit 1\n"
OK = "#!/bin/sh\nexit 0\n"


def only_git_on_path(folder: Path) -> str:
    """A PATH on which git is the only program (so nvidia-smi is surely missing)."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "git").symlink_to(shutil.which("git"))
    return str(folder)


@pytest.fixture
def pins(tmp_path, make_repo):
    """A real upstream (tag v1) and a pin set with one patch pin that applies."""
    up = make_repo("upstream")
    v1 = up.commit("v1", {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.14)\nproject(x C)\n",
                          "README": "upstream\n"})
    up.tag("v1")
    up.git("checkout", "-q", "-b", "pin", v1)
    up.commit("note", {"README": "upstream\npinned\n"})
    up.format_patch(f"{v1}..pin", tmp_path / "patches" / "note")
    up.git("checkout", "-q", "master")
    return write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [v1]
        pins:
          - id: note
            patches: patches/note
            unchecked: a note
        """)


def verb_argv(verb: str, pins: Path, tmp_path: Path, *, gpu: bool) -> list[str]:
    """The argv of `verb` building from pins.yaml; gpu=False asks for the CPU route."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    argv = {
        "kld": ["kld", "-c", str(pins), "-m", str(model)] + ([] if gpu else ["--cpu"]),
        "bench": ["bench", "-c", str(pins), "-m", str(model)] + ([] if gpu else ["--cpu"]),
        "model": ["model", "synth", "--arch", "llama", "--size", "tiny", "-o", str(tmp_path / "out"),
                  "-c", str(pins)] + (["--cuda"] if gpu else []),
        "verify": ["verify", "-c", str(pins), "--no-progress"] + (["--cuda"] if gpu else []),
    }
    return argv[verb]


NO_GPU_LINES = {
    "kld": "pinset kld: error: no NVIDIA GPU visible (use --cpu)",
    "bench": "pinset bench: error: no NVIDIA GPU visible (use --cpu)",
    "model": "pinset model: error: no NVIDIA GPU visible (drop --cuda)",
    "verify": "pinset verify: error: no NVIDIA GPU visible (drop --cuda for the CPU gates only)",
}


@pytest.mark.parametrize("smi", ["missing", NO_SMI_DRIVER, NO_SMI_DEVICES, NO_SMI_EMPTY],
                         ids=["missing", "driver-fails", "no-devices", "empty"])
@pytest.mark.parametrize("verb", ["kld", "bench", "model", "verify"])
def test_no_gpu_is_one_line_and_exit_2_before_any_build(verb, smi, pins, tmp_path, monkeypatch, capsys):
    if smi == "missing":
        monkeypatch.setenv("PATH", only_git_on_path(tmp_path / "only-git"))
    else:
        fake_program(tmp_path / "fake", "nvidia-smi", smi)
        monkeypatch.setenv("PATH", f"{tmp_path / 'fake'}{os.pathsep}{os.environ['PATH']}")
    assert main(verb_argv(verb, pins, tmp_path, gpu=True)) == 2
    assert capsys.readouterr().err.splitlines() == [NO_GPU_LINES[verb]]
    assert not (tmp_path / "cache" / "builds").exists()


@pytest.mark.parametrize("verb", ["kld", "bench"])
def test_no_gpu_with_explicit_folders_too(verb, tmp_path, monkeypatch, capsys):
    """--base-bin/--head-bin without --cpu run on the GPU: a CPU run must not stand in for it."""
    bin_dir = tmp_path / "bin"
    for name in ("llama-perplexity", "llama-bench"):
        fake_program(bin_dir, name, OK)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("PATH", only_git_on_path(tmp_path / "only-git"))
    assert main([verb, "--base-bin", str(bin_dir), "--head-bin", str(bin_dir), "-m", str(model)]) == 2
    assert capsys.readouterr().err.splitlines() == [NO_GPU_LINES[verb]]


def fake_toolchain(folder: Path, *, cmake: str, ninja: str) -> None:
    """cmake and ninja as given; a C++ compiler that is never called (configure is faked)."""
    fake_program(folder, "cmake", cmake)
    fake_program(folder, "ninja", ninja)
    fake_program(folder, "c++", OK)


@pytest.mark.parametrize("stage", ["configure", "build"])
@pytest.mark.parametrize("verb", ["kld", "bench", "model"])
def test_failed_build_is_exit_1_with_the_log(verb, stage, pins, tmp_path, monkeypatch, capsys):
    fake_toolchain(tmp_path / "fake", cmake=CMAKE_ERROR if stage == "configure" else OK,
                   ninja=NINJA_FAILED if stage == "build" else OK)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fake'}{os.pathsep}{os.environ['PATH']}")
    assert main(verb_argv(verb, pins, tmp_path, gpu=False)) == 1
    logs = list((tmp_path / "cache" / "builds").glob(f"*/logs/v1-base-{stage}.log"))
    assert len(logs) == 1
    assert ("CMake Error" if stage == "configure" else "x.c:1: error: boom") in logs[0].read_text()
    what = "cmake configure failed (exit 1)" if stage == "configure" else "build of {} failed (exit 1)".format(
        {"kld": "llama-perplexity", "bench": "llama-bench", "model": "llama-imatrix, llama-quantize"}[verb])
    # the build's progress bar comes before; the error is one line, the last
    assert capsys.readouterr().err.splitlines()[-1] == \
        f"pinset {verb}: error: base build of v1 failed at {stage}: {what} (log: {logs[0]})"


def test_failed_build_in_verify_is_a_red_gate_exit_1_with_the_log(pins, tmp_path, monkeypatch, capsys):
    fake_toolchain(tmp_path / "fake", cmake=CMAKE_ERROR, ninja=OK)
    fake_program(tmp_path / "fake", "ctest", OK)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fake'}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "verify.json"
    assert main(verb_argv("verify", pins, tmp_path, gpu=False) + ["--json", str(out)]) == 1
    import json

    gate = json.loads(out.read_text())["builds"][0]["gates"][0]
    log = tmp_path / "verify-logs" / "v1" / "cpu-configure.log"  # the name docs/verify.md gives
    assert gate["name"] == "cpu-build" and gate["status"] == "failed"
    assert gate["detail"] == f"cmake configure failed (exit 1) — configure log: {log}"
    assert "CMake Error" in log.read_text()


def test_a_pin_set_that_does_not_apply_is_exit_1(pins, tmp_path, capsys):
    note = next((tmp_path / "patches" / "note").glob("*.patch"))
    note.write_text(note.read_text().replace("+pinned", "+pinned\n+more").replace(" upstream", " elsewhere"))
    assert main(verb_argv("kld", pins, tmp_path, gpu=False)) == 1
    assert capsys.readouterr().err.splitlines() == [
        "pinset kld: error: build v1: the pin set does not apply (run `pinset sim`)"]


def test_a_failing_llama_imatrix_in_model_synth_is_exit_1_with_the_log(tmp_path, capsys):
    from tests.testing.gguf import make_vocab, needs_gguf

    if needs_gguf.args[0]:
        pytest.skip(needs_gguf.kwargs["reason"])
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "llama-imatrix", "#!/bin/sh\necho 'llama_model_load: error loading model' >&2\nexit 1\n")
    fake_program(bin_dir, "llama-quantize", OK)
    out = tmp_path / "out"
    rc = main(["model", "synth", "--arch", "llama", "--size", "tiny", "--bin", str(bin_dir), "-o", str(out),
               "--vocab", str(make_vocab(tmp_path / "vocab.gguf")), "--name", "m"])
    assert rc == 1
    log = out / "m-IQ1_M.log"
    assert capsys.readouterr().err.splitlines() == [f"pinset model: error: llama-imatrix failed: exit 1 (log: {log})"]
    assert "error loading model" in log.read_text()
