"""Where a verify ran: GPU, driver, compilers, CMake (parsers of the tools' own version output)."""

from __future__ import annotations

import os
import re
import shutil
import socket
from dataclasses import asdict, dataclass, field

from pinset import runner


@dataclass
class GpuInfo:
    name: str
    driver: str
    compute_capability: str
    memory_mib: int
    uuid: str | None = None     # "GPU-8c3e...": tells two GPUs of one model (and one host) apart


COLUMNS = ["name", "driver_version", "compute_cap", "memory.total"]
# What each value must look like: a malformed line (an error message with commas, "[N/A]", a header
# of other columns) is no GPU rather than a GPU with made-up facts.
VALUE_RE = {"name": r"[^\[\],]*[A-Za-z0-9][^\[\],]*", "driver_version": r"\d+(?:\.\d+)+",
            "compute_cap": r"\d+\.\d+", "memory.total": r"[1-9]\d*(?: MiB)?"}


def parse_nvidia_smi(text: str) -> list[GpuInfo]:
    """`nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader,nounits`.

    Also reads `--format=csv` output (a header line names the columns, values carry units) with
    these four columns among others. A line counts as a GPU only when every one of the four values
    is well-formed; a header without all four columns makes the lines under it unreadable.
    """
    columns: list[str] | None = list(COLUMNS)
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if parts and parts[0] == "name":
            named = [re.sub(r"\s*\[.*\]$", "", p) for p in parts]
            columns = named if set(COLUMNS) <= set(named) and len(set(named)) == len(named) else None
            continue
        if columns is None or len(parts) != len(columns):
            continue
        row = dict(zip(columns, parts))
        if not all(re.fullmatch(VALUE_RE[c], row[c]) for c in COLUMNS):
            continue
        gpus.append(GpuInfo(row["name"], row["driver_version"], row["compute_cap"],
                            int(row["memory.total"].split()[0]), row.get("uuid")))
    return gpus


def parse_gpu_ids(text: str) -> list[tuple[int, str]]:
    """`nvidia-smi --query-gpu=index,uuid --format=csv,noheader` -> [(index, uuid), ...]."""
    ids = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and re.fullmatch(r"(GPU|MIG)-[0-9A-Za-z-]+", parts[1]):
            ids.append((int(parts[0]), parts[1]))
    return ids


def visible_indices(ids: list[tuple[int, str]], cuda_visible_devices: str | None) -> list[int]:
    """The nvidia-smi indices a CUDA program sees, in CUDA's order (nvidia-smi itself ignores
    CUDA_VISIBLE_DEVICES and lists every GPU). Entries are indices or UUID prefixes; as in CUDA, an entry
    that names no GPU hides it and every later one; unset means every GPU, empty means none."""
    if cuda_visible_devices is None:
        return [index for index, _ in ids]
    chosen: list[int] = []
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if entry.isdigit():
            match = [index for index, _ in ids if index == int(entry)]
        else:
            prefix = entry if entry.startswith(("GPU-", "MIG-")) else f"GPU-{entry}"
            match = [index for index, uuid in ids if entry and uuid.startswith(prefix)]
        if len(match) != 1 or match[0] in chosen:
            break
        chosen.append(match[0])
    return chosen


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


def visible_gpus() -> list[GpuInfo]:
    """The GPUs a CUDA program started now would see, each with its UUID (none without nvidia-smi).

    When the UUIDs cannot be read, every GPU nvidia-smi lists is returned, without UUID."""
    gpus = parse_nvidia_smi(_version(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap,memory.total",
                                      "--format=csv,noheader,nounits"]))
    ids = parse_gpu_ids(_version(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"])) if gpus else []
    if len(ids) != len(gpus):
        return gpus
    for gpu, (_, uuid) in zip(gpus, ids):
        gpu.uuid = uuid
    position = {index: i for i, (index, _) in enumerate(ids)}
    return [gpus[position[index]] for index in visible_indices(ids, os.environ.get("CUDA_VISIBLE_DEVICES"))]


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
