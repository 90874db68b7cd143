"""`pinset report` reads ./pins.yaml by default like every other verb (issue 43): the pins' descriptions and the
pins without a result, as with -c; a ./pins.yaml of another pin set is left out with one warning (-c of
another pin set stays bad input); no ./pins.yaml is as before."""

from __future__ import annotations

import shutil

import pytest

from pinset.cli import main
from tests.testing import FIXTURES

FIX = FIXTURES / "report"
GREEN = [str(p) for p in sorted((FIX / "green").glob("*.json"))]


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    folder = tmp_path / "checkout"
    shutil.copytree(FIX / "pins", folder)
    monkeypatch.chdir(folder)
    return folder


def report(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["report", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dot_pins_yaml_is_read_as_with_c(checkout, capsys):
    with_c = report(capsys, *GREEN, "-c", str(checkout / "pins.yaml"))
    default = report(capsys, *GREEN)
    assert default == with_c and with_c[2] == ""
    assert "MMQ (integer matrix multiply) kernels for IQ1_M on CUDA" in default[1]
    assert "pass `-c pins.yaml`" not in default[1]


def test_another_pin_set_in_dot_pins_yaml_is_left_out_with_a_warning(checkout, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = report(capsys, *GREEN)   # no ./pins.yaml here
    (tmp_path / "pins.yaml").write_text((checkout / "pins.yaml").read_text().replace("IQ1 quantisation", "Another"))
    shutil.copytree(checkout / "patches", tmp_path / "patches")
    other = report(capsys, *GREEN)
    assert other[:2] == (code, out)
    assert other[2].strip().splitlines() == [
        other[2].strip()] and other[2].startswith("pinset report: warning: ./pins.yaml is pin set ")
    assert "(./pins.yaml left out: pass -c to name the pin set's file)" in other[2]
    assert report(capsys, *GREEN, "-c", "pins.yaml")[0] == 2   # named explicitly: still bad input
