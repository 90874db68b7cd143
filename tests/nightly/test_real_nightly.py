"""Retirement across moved code and blame on real llama.cpp code (slow: imports two sdist snapshots).

Upstream 0.3.35 -> 0.3.36 changed ggml/src/ggml-cuda/convert.cu; a pin backporting that change lands
upstream in 0.3.36. Here 0.3.36 is given a second shape in which convert.cu was split in two files
under a new folder, as upstream does with big files: the pin no longer applies, and must be found
upstream in the two new files. The repo's own IQ1_M MMQ series (real CUDA code, full of lines every
CUDA file has) conflicts on 0.3.35 and must stay a conflict, not be retired by boilerplate.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pinset.cli import main
from tests.testing import GIT_ENV, ROOT, write_pins
from tests.testing.snapshots import copy_store

pytestmark = pytest.mark.slow

CONVERT = "ggml/src/ggml-cuda/convert.cu"
SERIES = ROOT / "patches" / "cuda-mmq-iq1m"


def git(repo: Path, *args: str, input: str | None = None) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], input=input, capture_output=True, text=True,
                          check=True, env=dict(os.environ, **GIT_ENV)).stdout.strip()


@pytest.fixture(scope="module")
def real(tmp_path_factory, snapshot_seed):
    root = tmp_path_factory.mktemp("real-nightly")
    seed, builds = snapshot_seed
    store = copy_store(seed, root / "cache")
    old, new = builds["0.3.35"], builds["0.3.36"]
    up = root / "upstream.git"
    git(up, "init", "-q", "--bare")
    git(up, "fetch", "-q", str(store.mirror), f"{old.oid}:refs/snap/old", f"{new.oid}:refs/snap/new")
    s35 = git(up, "commit-tree", old.tree, "-m", "llama.cpp 4df29be4f (llama-cpp-python 0.3.35)")
    git(up, "tag", "s35", s35)
    # 0.3.36 with convert.cu split into two files under convert/
    text = git(up, "show", f"{new.oid}:{CONVERT}") + "\n"
    lines = text.splitlines(True)
    half = len(lines) // 2
    index = root / "index"
    env_index = {"GIT_INDEX_FILE": str(index)}
    run = lambda *a, input=None: subprocess.run(["git", "--git-dir", str(up), *a], input=input, text=True,  # noqa: E731
                                                capture_output=True, check=True,
                                                env=dict(os.environ, **GIT_ENV, **env_index)).stdout.strip()
    run("read-tree", new.tree)
    info = f"0 {'0' * 40}\t{CONVERT}\n"
    for name, part in (("convert-a.cu", lines[:half]), ("convert-b.cu", lines[half:])):
        blob = run("hash-object", "-w", "--stdin", input="".join(part))
        info += f"100644 {blob}\tggml/src/ggml-cuda/convert/{name}\n"
    run("update-index", "--index-info", input=info)
    moved = git(up, "commit-tree", run("write-tree"), "-p", s35, "-m", "cuda: split convert.cu (#4242)")
    git(up, "tag", "s36-moved", moved)
    pin = root / "pins" / "backport-convert"
    pin.mkdir(parents=True)
    diff = subprocess.run(["git", "--git-dir", str(up), "diff", "--full-index", old.oid, new.oid, "--", CONVERT],
                          capture_output=True, text=True, check=True).stdout   # as is: a trailing " " line matters
    (pin / "0001-backport.patch").write_text(f"From: t\nSubject: [PATCH] backport convert.cu\n\n---\n{diff}")
    cfg = write_pins(root / "pins.yaml", f"""
        upstream: {up}
        builds: [s35, s36-moved]
        pins:
          - id: cuda-mmq-iq1m
            patches: {SERIES}
          - id: backport-convert
            patches: pins/backport-convert
        """)
    return cfg, store, moved


def test_real_pin_found_in_split_files_and_real_boilerplate_never_retires(real, tmp_path):
    cfg, store, _ = real
    out = tmp_path / "sim.json"
    main(["sim", "-c", str(cfg), "--cache", str(store.root), "--json", str(out)])
    builds = {b["build"]: {p["id"]: p for p in b["pins"]} for b in json.loads(out.read_text())["builds"]}
    assert builds["s35"]["backport-convert"]["status"] == "applied"
    landed = builds["s36-moved"]["backport-convert"]
    assert landed["status"] == "upstream" and landed["retire"], landed
    assert "ggml/src/ggml-cuda/convert/convert-a.cu" in landed["detail"] or \
        "ggml/src/ggml-cuda/convert/convert-b.cu" in landed["detail"]
    series = builds["s35"]["cuda-mmq-iq1m"]
    assert series["status"] == "conflict" and not series["retire"]


def test_real_blame_names_the_split(real, tmp_path):
    cfg, store, moved = real
    out = tmp_path / "blame.json"
    code = main(["blame", "-c", str(cfg), "--cache", str(store.root), "--good", "s35", "--bad", "s36-moved",
                 "--pin", "backport-convert", "--json", str(out)])
    (pin,) = json.loads(out.read_text())["pins"]
    assert code == 1 and pin["status"] == "upstream" and pin["first_bad"]["commit"] == moved
    assert pin["first_bad"]["pr"] == 4242 and pin["summary"].startswith("landed upstream in")
