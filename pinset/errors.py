"""Errors that end a command with a one-line message instead of a traceback."""


class PinsetError(Exception):
    """Bad input (config, usage, unreachable upstream): exit 2, nothing changed."""

    exit_code = 2


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


class RuntimeFailure(Exception):
    """A step that ran and failed (a build, a llama.cpp program): exit 1, the message names the log.

    Not a PinsetError: exit 2 means the input was wrong and nothing was done.
    """

    exit_code = 1


class CacheDamaged(PinsetError):
    """A cache entry pinset cannot repair by itself (e.g. lost git objects): exit 1, naming it."""

    exit_code = 1

    def __init__(self, path, detail: str):
        self.path = str(path)
        super().__init__(f"cache damaged: {self.path} ({detail}); remove it and run again")
