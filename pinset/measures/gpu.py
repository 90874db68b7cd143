"""What the GPU was doing around each benchmark round (nvidia-smi): name, clocks, other processes.

A round measured while another process used the GPU, or with clocks far below the others, is not
comparable; recording both lets the bench verdict exclude such rounds and lets a reader check.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

from pinset import runner
from pinset.checks.machine import VALUE_RE

QUERY = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,utilization.gpu"


@dataclass(frozen=True)
class GpuSnapshot:
    name: str
    driver: str
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    max_sm_clock_mhz: int | None
    temperature_c: int | None
    power_w: float | None
    utilization_pct: int | None
    other_processes: list[str]

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _num(text: str, kind=int):
    text = text.strip()
    try:
        return kind(float(text)) if kind is int else kind(text)
    except (ValueError, OverflowError):
        return None  # "[N/A]", "[Not Supported]", "inf"


def parse_query_gpu(text: str) -> list[dict]:
    """`nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits` lines -> one dict per GPU."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 8 or not (re.fullmatch(VALUE_RE["name"], parts[0])
                                   and re.fullmatch(VALUE_RE["driver_version"], parts[1])):
            continue  # an error message or a malformed line: no GPU rather than a made-up one
        gpus.append({"name": parts[0], "driver": parts[1], "sm_clock_mhz": _num(parts[2]),
                     "mem_clock_mhz": _num(parts[3]), "max_sm_clock_mhz": _num(parts[4]),
                     "temperature_c": _num(parts[5]), "power_w": _num(parts[6], float),
                     "utilization_pct": _num(parts[7])})
    return gpus


def parse_compute_apps(text: str) -> list[str]:
    """`--query-compute-apps=pid,process_name,used_memory --format=csv,noheader` -> ["pid name mem", ...]."""
    apps = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("No running"):
            continue
        apps.append(" ".join(p.strip() for p in line.split(",")))
    return apps


def snapshot(index: int | str | None = None) -> GpuSnapshot | None:
    """The GPU `index` (an nvidia-smi index or UUID; default: the first GPU visible under CUDA_VISIBLE_DEVICES,
    which is not nvidia-smi's GPU 0 in a cell pinned to another GPU) right now; None without nvidia-smi or GPU."""
    if shutil.which("nvidia-smi") is None:
        return None
    if index is None:
        from pinset.checks.machine import visible_gpus

        visible = visible_gpus()
        index = visible[0].uuid if visible and visible[0].uuid else 0
    q = runner.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-i", str(index)],
                   timeout=30)
    gpus = parse_query_gpu(q.stdout) if q.ok else []
    if not gpus:
        return None
    apps = runner.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader",
                       "-i", str(index)], timeout=30)
    return GpuSnapshot(**gpus[0], other_processes=parse_compute_apps(apps.stdout) if apps.ok else [])
