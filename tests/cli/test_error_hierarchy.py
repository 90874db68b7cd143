"""One error hierarchy (pinset/errors.py), one exit mapping (pinset.cli.main), no `except Exception` in a verb."""

from __future__ import annotations

import re

import pytest

from pinset import errors
from pinset.build.cmake import BuildFailed as CmakeBuildFailed
from pinset.cli import main
from pinset.config.patches import SeriesProblem as PatchesSeriesProblem
from pinset.github.client import GitHubError as GithubPostError
from tests.testing import ROOT

COMMANDS = ROOT / "pinset" / "commands"


@pytest.mark.parametrize("cls", [errors.BuildFailed, errors.PostError, errors.CacheDamaged, errors.BenchParseError])
def test_runtime_failures_exit_1(cls):
    assert issubclass(cls, errors.RuntimeFailure) and not issubclass(cls, errors.PinsetError)
    assert cls.exit_code == 1


@pytest.mark.parametrize("cls", [errors.ConfigError, errors.UpstreamError, errors.ToolchainError,
                                 errors.SeriesProblem])
def test_bad_input_exits_2(cls):
    assert issubclass(cls, errors.BadInput) and not issubclass(cls, errors.RuntimeFailure)
    assert cls.exit_code == 2


def test_each_error_is_defined_once():
    assert CmakeBuildFailed is errors.BuildFailed
    assert GithubPostError is errors.PostError
    assert PatchesSeriesProblem is errors.SeriesProblem


def test_cli_maps_a_runtime_failure_to_exit_1(monkeypatch, capsys):
    import pinset.commands.matrix as matrix

    def fail(args):
        raise errors.CacheDamaged("/cache/mirror.git", "object 1234 is missing")

    monkeypatch.setattr(matrix, "run", fail)
    assert main(["matrix"]) == 1
    assert capsys.readouterr().err.strip() == ("pinset matrix: error: cache damaged: /cache/mirror.git "
                                               "(object 1234 is missing); remove it and run again")


def test_no_verb_catches_every_exception():
    """A verb turns no exception into an exit code by catching everything: cli.main maps the two roots."""
    offenders = [f"{p.name}:{i}" for p in sorted(COMMANDS.glob("*.py"))
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if re.search(r"except\s+(Exception|BaseException)\b|except\s*:", line)]
    assert offenders == []
