"""Find the `gguf` Python package: installed, or the copy every llama.cpp tree carries in gguf-py/.

Machines without network (the H200) have no `gguf` from PyPI, but they always have the llama.cpp
tree we build, so we fall back to it instead of asking for an install.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Sequence

from pinset.errors import ToolchainError

# Environment variable naming a llama.cpp source tree (its models/ and gguf-py/ are used).
TREE_ENV = "PINSET_LLAMA_TREE"


def candidate_trees(extra: Sequence[Path | str | None] = ()) -> list[Path]:
    """llama.cpp trees to look in, most specific first: given ones, $PINSET_LLAMA_TREE, trees above binaries."""
    trees: list[Path] = []
    for item in list(extra) + [os.environ.get(TREE_ENV)]:
        if item:
            trees.append(Path(item).expanduser())
    seen, out = set(), []
    for t in trees:
        # a bin dir (build/bin) sits two levels under its tree; pinset's cached builds keep the tree
        # in a sibling folder (builds/<key>/src next to builds/<key>/build/bin)
        for cand in [c for up in (t, *t.parents[:3]) for c in (up, up / "src")]:
            if (cand / "gguf-py" / "gguf" / "__init__.py").is_file() or (cand / "models").is_dir() and (cand / "ggml").is_dir():
                key = cand.resolve()
                if key not in seen:
                    seen.add(key)
                    out.append(key)
                break
    return out


def import_gguf(trees: Sequence[Path | str | None] = ()):
    """The gguf module: installed one first, else <tree>/gguf-py from the given or known trees."""
    try:
        return importlib.import_module("gguf")
    except ModuleNotFoundError:
        pass
    for tree in candidate_trees(list(trees)):
        gguf_py = tree / "gguf-py"
        if (gguf_py / "gguf" / "__init__.py").is_file():
            sys.path.insert(0, str(gguf_py))
            try:
                return importlib.import_module("gguf")
            except ModuleNotFoundError:
                sys.path.remove(str(gguf_py))
    raise ToolchainError(
        "the `gguf` Python package is missing: `pip install gguf`, or point --llama-tree / "
        f"${TREE_ENV} at a llama.cpp source tree (its gguf-py/ is used)")
