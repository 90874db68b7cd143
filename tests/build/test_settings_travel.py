"""Build settings travel whole (ensure_build takes a BuildSettings; VerifyOptions carries it) and one check of
extra CUDA flags serves pins.yaml and the command line."""

from __future__ import annotations

import pytest

from pinset.build.settings import CPU_BUILD, BuildSettings
from pinset.cli import main
from pinset.config.schema import cuda_flag_problem
from pinset.verify.gates import VerifyOptions


@pytest.mark.parametrize("flag", ["-D", "-DX", "-D=1", "-D1X=ON", "GGML_CUDA_FA=OFF"])
def test_a_malformed_flag_is_refused_on_the_command_line_as_in_pins_yaml(flag, capsys):
    assert cuda_flag_problem(flag)
    assert main(["verify", "--cuda", f"--cuda-flags={flag}"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"pinset verify: error: --cuda-flags: {cuda_flag_problem(flag)}"


def test_a_good_flag_passes_the_one_check():
    assert cuda_flag_problem("-DGGML_CUDA_FA=OFF") is None
    assert cuda_flag_problem("-DCMAKE_CUDA_FLAGS:STRING=-lineinfo") is None


def test_verify_options_carry_the_cuda_settings_whole():
    settings = BuildSettings(True, "90", "90", ("-DGGML_CUDA_FA=OFF",))
    options = VerifyOptions(cuda=True, ops=[], settings=settings)
    assert options.build_settings(True) is settings
    assert options.build_settings(False) is CPU_BUILD   # the CPU build never takes the CUDA flags
    loose = VerifyOptions(cuda=True, ops=[], cuda_architectures="86;90", cuda_flags=["-DA=1"])
    assert loose.build_settings(True) == BuildSettings(True, "86;90", None, ("-DA=1",))
