"""Where a verify ran: GPU, driver, compilers, CMake (parsers of the tools' own version output)."""

from __future__ import annotations

import os
import re
import shutil
import socket
from dataclasses import asdict, dataclass, field

from pinset import runner
from pinset.checks.nvidia_smi import GpuInfo, visible_gpus


def parse_nvcc_version(text: str) -> str | None:
    """'Cuda compilation tools, release 13.0, V13.0.88' -> '13.0.88'."""
    m = re.search(r"release [\d.]+, V(\d+(?:\.\d+)+)", text)
    if m:
        return m.group(1)
    m = re.search(r"release (\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def parse_cc_version(text: str) -> str | None:
    """First line of `c++ --version` ('c++ (Debian 12.2.0-14+deb12u1) 12.2.0'): names vendor and version."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else None


def parse_cmake_version(text: str) -> str | None:
    m = re.search(r"cmake version (\S+)", text)
    return m.group(1) if m else None


@dataclass
class Machine:
    hostname: str
    gpu: GpuInfo | None     # the first GPU visible to the run (CUDA_VISIBLE_DEVICES applied)
    gpus: int               # how many are visible
    cuda_version: str | None
    compiler: str | None
    cmake: str | None
    ninja: str | None
    ccache: str | None
    gpu_uuids: list[str] = field(default_factory=list)  # every visible GPU's UUID, in CUDA's order
    runner: dict | None = None                          # runner_identity(): the CI runner and run, if any

    def to_json(self) -> dict:
        out = asdict(self)
        out["gpu"] = asdict(self.gpu) if self.gpu else None
        return out


RUNNER_VARIABLES = {"name": "RUNNER_NAME", "run_id": "GITHUB_RUN_ID", "run_attempt": "GITHUB_RUN_ATTEMPT",
                    "job": "GITHUB_JOB", "repository": "GITHUB_REPOSITORY"}


def runner_identity(environ=os.environ) -> dict | None:
    """The GitHub Actions runner and run a result was made in (None outside Actions): with the host and the
    GPU UUIDs, it tells apart two cells of a matrix, and names the run whose logs hold the details."""
    found = {key: environ[var] for key, var in RUNNER_VARIABLES.items() if environ.get(var)}
    return found or None


def host_identity() -> dict:
    """Where a kld/bench ran: host, the visible GPUs' UUIDs, and the CI runner (see runner_identity)."""
    return {"hostname": socket.gethostname(), "gpu_uuids": [g.uuid for g in visible_gpus() if g.uuid],
            "runner": runner_identity()}


def _version(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None and not argv[0].startswith("/"):
        return ""
    result = runner.run(argv, timeout=60)
    return result.stdout + result.stderr if result.ok else ""


def probe_machine(nvcc: str | None = None) -> Machine:
    """Ask the tools themselves; any that is missing is recorded as null."""
    gpus = visible_gpus()
    nvcc = nvcc or shutil.which("nvcc")
    ninja = _version(["ninja", "--version"]).strip() or None
    return Machine(
        hostname=socket.gethostname(),
        gpu=gpus[0] if gpus else None,
        gpus=len(gpus),
        cuda_version=parse_nvcc_version(_version([nvcc, "--version"])) if nvcc else None,
        compiler=parse_cc_version(_version(["c++", "--version"])),
        cmake=parse_cmake_version(_version(["cmake", "--version"])),
        ninja=ninja,
        ccache=shutil.which("ccache"),
        gpu_uuids=[g.uuid for g in gpus if g.uuid],
        runner=runner_identity(),
    )


def read_host(d) -> dict | None:
    """The optional `host` object of a kld or bench result (a results.Doc): None in files written before it."""
    host = d.obj("host", null=True, default=None)
    if host is None:
        return None
    runner = host.obj("runner", null=True, default=None)
    if runner is not None:
        for key in RUNNER_VARIABLES:
            runner.get(key, str, default=None)
    return {"hostname": host.get("hostname", str), "gpu_uuids": host.strs("gpu_uuids", default=[]),
            "runner": dict(runner.raw) if runner else None, "gpu_class": host.get("gpu_class", str, None, default=None)}
