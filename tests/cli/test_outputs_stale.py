"""Bad input changes nothing, the earlier result included: a build that does not resolve is refused before
the verb removes the result files it is about to replace (verify, kld, bench)."""

from __future__ import annotations

import shutil

import pytest

from pinset.cli import main
from tests.testing import one_pin_project

needs_cmake = pytest.mark.skipif(not shutil.which("cmake") or not (shutil.which("c++") or shutil.which("g++")),
                                 reason="verify/kld/bench check the toolchain before resolving builds")


@pytest.fixture
def project(tmp_path, make_repo, monkeypatch):
    up = make_repo()
    up.commit("base", {"a.txt": "one\ntwo\nthree\n"})
    up.tag("b1")
    one_pin_project(tmp_path, up)
    (tmp_path / "m.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    for name in ("old.json", "old.md"):
        (tmp_path / name).write_text("the earlier run's result\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@needs_cmake
@pytest.mark.parametrize("argv", [
    ["verify", "--builds", "no-such-tag", "--json", "old.json", "--markdown", "old.md"],
    ["kld", "-c", "pins.yaml", "--build", "no-such-tag", "--cpu", "-m", "m.gguf", "--json", "old.json",
     "--markdown", "old.md"],
    ["bench", "-c", "pins.yaml", "--build", "no-such-tag", "--cpu", "-m", "m.gguf", "--json", "old.json",
     "--markdown", "old.md"],
], ids=["verify", "kld", "bench"])
def test_an_unknown_build_keeps_the_earlier_result(project, capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no such tag" in err and err.count("\n") == 1, err
    for name in ("old.json", "old.md"):
        assert (project / name).read_text() == "the earlier run's result\n", name
