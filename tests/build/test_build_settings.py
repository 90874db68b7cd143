"""One pin set, one set of CUDA build settings: verify, kld, bench and model configure the same flags, so
they share one build folder per tree (the cache key is the tree plus the flags)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pinset.build.settings import CPU_BUILD, BuildSettings, build_settings, normalize_architectures
from pinset.cli import main
from pinset.config.schema import PinSet
from pinset.errors import ToolchainError
from tests.testing import fake_program, write_pins

SMI_86_90 = ('#!/bin/sh\ncase "$*" in\n'
             '  *compute_cap,*) echo "NVIDIA RTX A6000, 580.1, 8.6, 49140"; echo "NVIDIA H200, 580.1, 9.0, 143771";;\n'
             '  *compute_cap*) echo "8.6"; echo "9.0";;\n'
             '  *) exit 1;;\nesac\n')


def a_pinset(architectures=None, flags=()) -> PinSet:
    return PinSet(Path("pins.yaml"), None, ("v1",), (), architectures, cuda_flags=tuple(flags))


@pytest.fixture
def gpus_86_90(tmp_path, monkeypatch):
    fake_program(tmp_path / "smi", "nvidia-smi", SMI_86_90)
    monkeypatch.setenv("PATH", f"{tmp_path / 'smi'}{os.pathsep}{os.environ['PATH']}")


def test_architectures_have_one_spelling():
    assert normalize_architectures("86,90") == normalize_architectures(" 90 ; 86 ") == "86;90"
    assert normalize_architectures("100,90,90") == "90;100"
    assert normalize_architectures("90a") == "90a"


@pytest.mark.parametrize("architectures, override, expected", [
    ("86,90", None, "86;90"), ("90", None, "90"), (None, None, "86;90"), ("86,90", "90", "90")])
def test_architectures_from_override_then_pins_yaml_then_the_gpus(architectures, override, expected, gpus_86_90):
    settings = build_settings(a_pinset(architectures), cuda=True, gpu_hint="use --cpu", architectures=override)
    assert settings == BuildSettings(True, expected, "86;90", ())
    assert (settings.coverage_warning() is None) == (expected == "86;90")


def test_flags_are_pins_yaml_first_then_the_command_line_once(gpus_86_90):
    settings = build_settings(a_pinset("90", ["-DGGML_CUDA_FA=OFF"]), cuda=True, gpu_hint="x",
                              extra_flags=["-DGGML_CUDA_F16=ON", "-DGGML_CUDA_FA=OFF"])
    assert settings.cuda_flags == ("-DGGML_CUDA_FA=OFF", "-DGGML_CUDA_F16=ON")


def test_cpu_build_needs_no_gpu_and_ignores_cuda_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    assert build_settings(a_pinset("90", ["-DGGML_CUDA_FA=OFF"]), cuda=False, gpu_hint="x") == CPU_BUILD
    with pytest.raises(ToolchainError, match=r"^no NVIDIA GPU visible \(use --cpu\)$"):
        build_settings(a_pinset("90"), cuda=True, gpu_hint="use --cpu")


# --- every verb, end to end: what each one hands to cmake ----------------------------------------

RECORDING_CMAKE = """#!/bin/sh
case " $* " in
  *" -DGGML_CUDA=ON "*) printf '%s\\n' "$@" >> "{record}"; echo "--end--" >> "{record}"
                         echo "CMake Error: recorded, not configured" >&2; exit 1;;
esac
exec "{cmake}" "$@"
"""


def recorded_configures(record: Path) -> list[tuple[str, list[str]]]:
    """(build folder key, flags without -S/-B) of each recorded CUDA configure."""
    runs = []
    for block in record.read_text().split("--end--\n"):
        argv = block.splitlines()
        if not argv:
            continue
        build_dir = Path(argv[argv.index("-B") + 1])
        flags = [a for i, a in enumerate(argv) if a not in ("-S", "-B") and argv[i - 1] not in ("-S", "-B")]
        runs.append((build_dir.parent.name, flags))
    return runs


@pytest.mark.skipif(not all(shutil.which(p) for p in ("cmake", "ninja", "cc", "ctest")),
                    reason="cmake, ninja, ctest and cc are needed (verify's CPU gates build the stand-in tree)")
def test_verify_kld_bench_and_model_configure_the_same_cuda_build(tmp_path, make_repo, monkeypatch):
    from tests.testing.stand_in import stand_in_files

    up = make_repo("upstream")
    v1 = up.commit("v1", {k: v for k, v in stand_in_files().items() if v is not None})
    up.tag("v1")
    up.git("checkout", "-q", "-b", "pin", v1)
    up.commit("note", {"README": "pinned\n"})
    up.format_patch(f"{v1}..pin", tmp_path / "patches" / "note")
    record = tmp_path / "cmake-calls"
    fake = tmp_path / "fake"
    fake_program(fake, "cmake", RECORDING_CMAKE.format(record=record, cmake=shutil.which("cmake")))
    fake_program(fake, "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    fake_program(fake, "nvidia-smi", SMI_86_90)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    model, reference = tmp_path / "m.gguf", tmp_path / "ref.gguf"
    model.write_bytes(b"GGUF")
    reference.write_bytes(b"GGUF")

    for architectures, expected in (('"86,90"', "86;90"), ("90", "90"), (None, "86;90")):
        cuda = "cuda:\n  flags: [-DGGML_CUDA_FA=OFF]\n" + (f"  architectures: {architectures}\n" if architectures else "")
        pins = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [v1]\n{cuda}"
                          "pins:\n  - id: note\n    patches: patches/note\n    unchecked: a note\n")
        record.unlink(missing_ok=True)
        verbs = {  # each fails at the recorded CUDA configure: a red gate or a runtime failure, exit 1
            "verify": ["verify", "-c", str(pins), "--cuda", "--no-progress", "-j", "2"],
            "kld": ["kld", "-c", str(pins), "-m", str(model)],
            "bench": ["bench", "-c", str(pins), "-m", str(model)],
            "bench --vs-model": ["bench", "-c", str(pins), "-m", str(model), "--vs-model", str(reference)],
            "model synth": ["model", "synth", "--arch", "llama", "--size", "tiny", "-o", str(tmp_path / "out"),
                            "-c", str(pins), "--cuda"],
        }
        for name, argv in verbs.items():
            assert main(argv) == 1, name
        runs = dict(zip(verbs, recorded_configures(record)))
        assert len(runs) == len(verbs) == len(recorded_configures(record))
        flags = {name: run[1] for name, run in runs.items()}
        assert all(f == flags["verify"] for f in flags.values()), flags
        assert f"-DCMAKE_CUDA_ARCHITECTURES={expected}" in flags["verify"]
        assert flags["verify"].count("-DGGML_CUDA_FA=OFF") == 1
        # the pinned tree (verify, bench --vs-model) and the bare tree (kld, bench, model): one folder each
        assert runs["verify"][0] == runs["bench --vs-model"][0]
        assert runs["kld"][0] == runs["bench"][0] == runs["model synth"][0] != runs["verify"][0]


SMI_WITH_UUIDS = ('#!/bin/sh\ncase "$*" in\n'
                  '  *index,uuid*) echo "0, GPU-5e3c0000-0000-0000-0000-000000000000";;\n'
                  '  *compute_cap,*) echo "NVIDIA H200, 580.159.04, 9.0, 143771";;\n'
                  '  *compute_cap*) echo "9.0";;\n'
                  '  *) exit 1;;\nesac\n')


@pytest.mark.parametrize("visible", ["", "1", "GPU-ffff", "-1"])
def test_a_cuda_build_with_every_gpu_hidden_from_cuda_is_refused(tmp_path, monkeypatch, visible):
    # nvidia-smi lists every GPU whatever CUDA_VISIBLE_DEVICES says: with none visible to CUDA, the CUDA build
    # and GPU gates would run for nothing and the result name no GPU
    fake_program(tmp_path / "smi", "nvidia-smi", SMI_WITH_UUIDS)
    monkeypatch.setenv("PATH", f"{tmp_path / 'smi'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with pytest.raises(ToolchainError, match=r"^no NVIDIA GPU visible: CUDA_VISIBLE_DEVICES=.* hides"):
        build_settings(a_pinset(), cuda=True, gpu_hint="use --cpu")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert build_settings(a_pinset(), cuda=True, gpu_hint="use --cpu").cuda_architectures == "90"
