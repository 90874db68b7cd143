"""The one error hierarchy: every exception that ends a command with a one-line message instead of a
traceback derives from one of two roots, and `pinset.cli.main` is the only place that turns them into
exit codes.

- `PinsetError` (alias `BadInput`): the input was wrong (config, usage, unreachable upstream, missing
  toolchain, a result file that does not hold what it must): exit 2, nothing changed.
- `RuntimeFailure`: a step that ran and failed (a build, a llama.cpp program, a damaged cache, posting the
  report): exit 1, the message names the log or the path.
"""

from __future__ import annotations

from pathlib import Path


class PinsetError(Exception):
    """Bad input (config, usage, unreachable upstream): exit 2, nothing changed."""

    exit_code = 2


BadInput = PinsetError


class ConfigError(PinsetError):
    """A problem in pins.yaml, reported as `file:line: key: message`."""

    def __init__(self, path, line, key, message):
        self.path, self.line, self.key = str(path), line, key
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


class UpstreamError(PinsetError):
    """An upstream source could not give us the build or pin asked for."""


class ToolchainError(PinsetError):
    """A required external program (cmake, nvcc, nvidia-smi, ...) is missing."""


class SeriesProblem(PinsetError):
    """What is wrong with a patch series; the pins.yaml reader adds the file, line and key."""


class RuntimeFailure(Exception):
    """A step that ran and failed (a build, a llama.cpp program): exit 1, the message names the log.

    Not a PinsetError: exit 2 means the input was wrong and nothing was done.
    """

    exit_code = 1


class CacheDamaged(RuntimeFailure):
    """A cache entry pinset cannot repair by itself (e.g. lost git objects): exit 1, naming it."""

    def __init__(self, path, detail: str):
        self.path = str(path)
        super().__init__(f"cache damaged: {self.path} ({detail}); remove it and run again")


class BuildFailed(RuntimeFailure):
    """CMake or ninja failed: a red gate (exit 1), not a usage error."""

    def __init__(self, stage: str, message: str, tail: str, log: Path, seconds: float):
        super().__init__(message)
        self.stage, self.tail, self.log, self.seconds = stage, tail, log, seconds


class GitHubError(RuntimeFailure):
    """The GitHub client (pinset/github/) failed: an HTTP error, a rate limit, the network, a malformed answer,
    on a read as on a post. Exit 1; `report --post` keeps the report itself."""


PostError = GitHubError  # the name report --post and bump used before the client had its own floor


class BenchParseError(RuntimeFailure, ValueError):
    """llama-bench wrote a line that is not a measurement (exit 1 when it ends a run; a ValueError for the
    callers that judge a single run); raised by pinset/measures/llama_bench.py."""
