"""Where a verify ran: GPU, driver, compilers, CMake (parsers of the tools' own version output)."""

from __future__ import annotations

import re
import shutil
import socket
from dataclasses import asdict, dataclass

from pinset import runner


@dataclass
class GpuInfo:
    name: str
    driver: str
    compute_capability: str
    memory_mib: int


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
                            int(row["memory.total"].split()[0])))
    return gpus


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
    gpu: GpuInfo | None
    gpus: int
    cuda_version: str | None
    compiler: str | None
    cmake: str | None
    ninja: str | None
    ccache: str | None

    def to_json(self) -> dict:
        out = asdict(self)
        out["gpu"] = asdict(self.gpu) if self.gpu else None
        return out


def _version(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None and not argv[0].startswith("/"):
        return ""
    result = runner.run(argv, timeout=60)
    return result.stdout + result.stderr if result.ok else ""


def probe_machine(nvcc: str | None = None) -> Machine:
    """Ask the tools themselves; any that is missing is recorded as null."""
    gpus = parse_nvidia_smi(_version(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap,memory.total",
                                      "--format=csv,noheader,nounits"]))
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
    )
