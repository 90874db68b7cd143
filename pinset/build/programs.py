"""A build's bin/ folder: where kld, bench and model synth find the llama.cpp programs they run."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pinset.errors import ToolchainError


@dataclass(frozen=True)
class LlamaBin:
    """A folder of llama.cpp programs (build/bin)."""

    bin_dir: Path

    def exe(self, name: str, who: str | None = None) -> Path:
        """The program's path; one clear error (naming `who` needs it) when it was not built."""
        path = self.bin_dir / name
        if not (path.is_file() and os.access(path, os.X_OK)):
            prefix = f"{who}: " if who else ""
            raise ToolchainError(f"{prefix}{name} not found in {self.bin_dir} (build the {name} target)")
        return path
