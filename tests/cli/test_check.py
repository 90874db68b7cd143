"""`pinset check` (issue 43): pins.yaml and its patches read, nothing fetched, no cache, under a second; bad
input the one line every verb gives, exit 2."""

from __future__ import annotations

import time

from pinset.cli import main
from tests.testing import GitRepo, write_pins


def _project(tmp_path):
    repo = GitRepo(tmp_path / "work")
    repo.commit("base", {"a.c": "int a;\n"})
    repo.commit("change", {"a.c": "int a = 1;\n"})
    repo.format_patch("HEAD~1..HEAD", tmp_path / "patches" / "p")
    return write_pins(tmp_path / "pins.yaml", f"""
        upstream: https://no-such-host.invalid/ggml-org/llama.cpp   # never contacted
        builds: [b1, "tags:b*:2:48h", pypi:llama-cpp-python==99.0]
        pins:
          - id: p
            patches: patches/p
          - id: ggml-org#1
            pr: https://no-such-host.invalid/ggml-org/llama.cpp/pull/1
            commit: {"a" * 40}
            skip-unless-open: true
    """)


def test_a_good_pin_set_is_one_line_and_touches_nothing(tmp_path, capsys, isolated_cache):
    cfg = _project(tmp_path)
    start = time.monotonic()
    assert main(["check", str(cfg)]) == 0
    assert time.monotonic() - start < 1.0
    out = capsys.readouterr().out
    assert out == f"ok: {cfg}: 2 pins (1 PR, 1 patch pins with 1 patch file), 3 builds (1 selector)\n"
    assert not isolated_cache.exists()   # no mirror, no download, no scratch


def test_bad_input_is_one_line_exit_2(tmp_path, capsys):
    cfg = _project(tmp_path)
    cfg.write_text(cfg.read_text().replace("patches: patches/p", "patchs: patches/p"))
    assert main(["check", "-c", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pins.yaml:5: pins[0].patchs: unknown key" in err


def test_a_corrupt_patch_is_bad_input(tmp_path, capsys):
    cfg = _project(tmp_path)
    patch = next((tmp_path / "patches" / "p").glob("*.patch"))
    text = patch.read_text()
    patch.write_text(text.replace(text[text.index("@@"):text.index("@@", 2) + 2], "@@ -1,5 +1,9 @@"))  # a cut hunk
    assert main(["check", str(cfg)]) == 2
    assert patch.name in capsys.readouterr().err


def test_without_arguments_it_reads_pins_yaml_here(tmp_path, capsys, monkeypatch):
    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 0 and capsys.readouterr().out.startswith("ok: pins.yaml: 2 pins")
