"""`skip-unless-open: true` (issue 43): a PR pin left out once its pull request is merged or closed, as
Unsloth's pr-set.json `"required": false` means. Read here; its effect on sim and report: tests/sim/test_pr_state.py."""

from __future__ import annotations

import pytest

from pinset.config.schema import load_pinset
from pinset.errors import ConfigError
from tests.testing import GitRepo, write_pins

SHA = "a" * 40


def _pins(tmp_path, pin: str):
    return write_pins(tmp_path / "pins.yaml", f"""
        upstream: https://github.com/ggml-org/llama.cpp
        builds: [b1]
        pins:
{pin}
    """)


def test_a_pr_pin_takes_the_key(tmp_path):
    cfg = _pins(tmp_path, f"""          - id: ggml-org#1
            pr: https://github.com/ggml-org/llama.cpp/pull/1
            commit: {SHA}
            skip-unless-open: true
          - id: ggml-org#2
            pr: https://github.com/ggml-org/llama.cpp/pull/2
            commit: {SHA}""")
    first, second = load_pinset(cfg).pins
    assert (first.skip_unless_open, second.skip_unless_open) == (True, False)


def test_a_patch_pin_is_refused_naming_line_and_key(tmp_path):
    repo = GitRepo(tmp_path / "repo")
    repo.commit("base", {"a.c": "int a;\n"})
    repo.commit("change", {"a.c": "int a = 1;\n"})
    patch_dir = tmp_path / "p"
    repo.format_patch("HEAD~1..HEAD", patch_dir)
    cfg = _pins(tmp_path, f"""          - id: mine
            patches: {patch_dir}
            skip-unless-open: true""")
    with pytest.raises(ConfigError, match=r"pins.yaml:6: pins\[0\].skip-unless-open: only PR pins take"):
        load_pinset(cfg)


def test_not_a_boolean_is_refused(tmp_path):
    cfg = _pins(tmp_path, f"""          - id: ggml-org#1
            pr: https://github.com/ggml-org/llama.cpp/pull/1
            commit: {SHA}
            skip-unless-open: "when closed\"""")
    with pytest.raises(ConfigError, match=r"pins.yaml:7: pins\[0\].skip-unless-open: must be true or false"):
        load_pinset(cfg)
