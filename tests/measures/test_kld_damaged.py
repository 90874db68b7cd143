"""`pinset kld` when base and head did not run alike (another device, a partial offload) or the cached CPU
reference is damaged: no verdict from unlike runs, and a damaged cache is rebuilt, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinset.cli import main
from tests.testing import run_doc
from tests.testing.fake_llama import DEVICE_LINES, fake_perplexity, visible_gpu  # noqa: F401  (autouse fixture)


def run(tmp_path: Path, base: Path, head: Path, *extra: str) -> tuple[int, dict | None]:
    model = tmp_path / "model.gguf"
    if not model.exists():   # written once: its mtime is part of the reference's cache key
        model.write_bytes(b"GGUF")
    out = tmp_path / "kld.json"
    code = main(["kld", "--base-bin", str(base), "--head-bin", str(head), "-m", str(model), "--ctx", "256",
                 "--chunks", "3", "--cache", str(tmp_path / "cache"), "--json", str(out), *extra])
    return code, run_doc(out.read_text()) if out.is_file() else None


# A head that left layers on the CPU is closer to the CPU reference for that reason alone; one on another GPU
# is compared with a run it did not share.
@pytest.mark.parametrize("line, head_line, said", [
    ("offloaded 5/5", "offloaded 3/5", "offloaded"),
    ("CUDA0 (NVIDIA H200)", "CUDA1 (NVIDIA A100)", "NVIDIA A100"),
], ids=["fewer-layers-offloaded", "another-gpu"])
def test_a_head_that_did_not_run_as_base_did_gets_no_verdict(tmp_path, line, head_line, said):
    fake_perplexity(tmp_path / "base")
    fake_perplexity(tmp_path / "head", device_lines=DEVICE_LINES.replace(line, head_line))
    code, doc = run(tmp_path, tmp_path / "base", tmp_path / "head")
    assert code == 1 and doc["ok"] is False
    assert doc["verdict"]["sigma"] is None and said in doc["verdict"]["text"]


def test_same_device_and_offload_on_both_sides_gets_a_verdict(tmp_path):
    fake_perplexity(tmp_path / "base")
    fake_perplexity(tmp_path / "head")
    code, doc = run(tmp_path, tmp_path / "base", tmp_path / "head")
    assert code == 0 and doc["ok"] and doc["verdict"]["text"] == "as close to the CPU result as base"


def test_a_damaged_cached_reference_is_made_again(tmp_path):
    fake_perplexity(tmp_path / "bin")
    code, first = run(tmp_path, tmp_path / "bin", tmp_path / "bin")
    assert code == 0 and first["reference"]["cached"] is False
    [meta] = list((tmp_path / "cache").rglob("reference.json"))
    folder = meta.parent
    for damage in ("truncate", "empty logits", "no stdout key"):
        meta, logits = folder / "reference.json", folder / "logits.bin"
        if damage == "truncate":
            meta.write_text(meta.read_text()[:100])
        elif damage == "empty logits":
            logits.write_bytes(b"")
        else:
            meta.write_text(json.dumps({"argv": []}))
        code, doc = run(tmp_path, tmp_path / "bin", tmp_path / "bin")
        assert code == 0 and doc["reference"]["cached"] is False, damage
        code, doc = run(tmp_path, tmp_path / "bin", tmp_path / "bin")
        assert code == 0 and doc["reference"]["cached"] is True, damage


def test_a_kld_that_stops_early_leaves_no_older_result_under_its_name(tmp_path):
    from tests.testing.fake_llama import REF_ERR

    fake_perplexity(tmp_path / "bin", ref_stderr=REF_ERR.replace("PPL = 2735044.2682", "PPL = nan"))
    (tmp_path / "kld.json").write_text(json.dumps({"kind": "kld", "ok": True}))
    code, doc = run(tmp_path, tmp_path / "bin", tmp_path / "bin")
    assert code == 1 and doc is None and not (tmp_path / "kld.json").exists()
