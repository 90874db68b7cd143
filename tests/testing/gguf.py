"""GGUF files for tests: gguf's writer (the `gguf` package, or gguf-py from a llama.cpp tree) and a small
real tokenizer GGUF, so tests need no model download."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinset.errors import ToolchainError
from pinset.models.gguf_module import import_gguf

try:
    gguf = import_gguf([os.environ.get("PINSET_TEST_LLAMA_BIN")])
except ToolchainError:
    gguf = None
needs_gguf = pytest.mark.skipif(gguf is None, reason="no `gguf` package and no llama.cpp tree (PINSET_LLAMA_TREE) "
                                                      "with gguf-py: cannot write or read GGUF files")


def make_vocab(path: Path, n: int = 300) -> Path:
    """A small real tokenizer GGUF (byte-level gpt2 style) so the test needs no llama.cpp tree."""
    w = gguf.GGUFWriter(str(path), "llama")
    tokens = [f"<{i}>" for i in range(n)]
    w.add_key_value("tokenizer.ggml.model", "gpt2", gguf.GGUFValueType.STRING)
    w.add_key_value("tokenizer.ggml.pre", "default", gguf.GGUFValueType.STRING)
    w.add_key_value("tokenizer.ggml.tokens", tokens, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.STRING)
    w.add_key_value("tokenizer.ggml.token_type", [1] * n, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    w.add_key_value("tokenizer.ggml.merges", ["< 1", "<1 >"], gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.STRING)
    w.add_key_value("tokenizer.ggml.bos_token_id", 1, gguf.GGUFValueType.UINT32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    return path
