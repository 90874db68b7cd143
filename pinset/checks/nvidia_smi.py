"""nvidia-smi: the one module that asks it and reads its answers (GPUs, UUIDs, clocks, compute caps).

Every parser is strict: a line whose values are not well-formed (an error message with commas,
"[N/A]" where a name belongs, a header of other columns) is no GPU rather than a GPU with made-up
facts, so a broken nvidia-smi reads as "no GPU visible", never as a GPU that was not there.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from pinset import runner

SNAPSHOT_QUERY = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,utilization.gpu"


def ask(*args: str, timeout: float = 60) -> str:
    """nvidia-smi's output for `args`; "" without nvidia-smi or when it fails."""
    if shutil.which("nvidia-smi") is None:
        return ""
    result = runner.run(["nvidia-smi", *args], timeout=timeout)
    return result.stdout if result.ok else ""


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


def _num(text: str, kind=int):
    text = text.strip()
    try:
        return kind(float(text)) if kind is int else kind(text)
    except (ValueError, OverflowError):
        return None  # "[N/A]", "[Not Supported]", "inf"


def parse_query_gpu(text: str) -> list[dict]:
    """`nvidia-smi --query-gpu=SNAPSHOT_QUERY --format=csv,noheader,nounits` lines -> one dict per GPU."""
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


def parse_compute_caps(text: str) -> str | None:
    """`nvidia-smi --query-gpu=compute_cap` lines ("9.0") -> CMAKE_CUDA_ARCHITECTURES ("90", "86;90")."""
    archs = sorted({line.strip().replace(".", "") for line in text.splitlines()
                    if re.fullmatch(r"\d+\.\d+", line.strip())}, key=int)
    return ";".join(archs) or None


def cuda_architectures_from_gpu() -> str | None:
    """The compute capabilities of the GPUs nvidia-smi lists, or None when it finds none."""
    return parse_compute_caps(ask("--query-gpu=compute_cap", "--format=csv,noheader"))


def visible_gpus() -> list[GpuInfo]:
    """The GPUs a CUDA program started now would see, each with its UUID (none without nvidia-smi).

    When the UUIDs cannot be read, every GPU nvidia-smi lists is returned, without UUID."""
    gpus = parse_nvidia_smi(ask(f"--query-gpu={','.join(COLUMNS)}", "--format=csv,noheader,nounits"))
    ids = parse_gpu_ids(ask("--query-gpu=index,uuid", "--format=csv,noheader")) if gpus else []
    if len(ids) != len(gpus):
        return gpus
    for gpu, (_, uuid) in zip(gpus, ids):
        gpu.uuid = uuid
    position = {index: i for i, (index, _) in enumerate(ids)}
    return [gpus[position[index]] for index in visible_indices(ids, os.environ.get("CUDA_VISIBLE_DEVICES"))]




def query_snapshot(index: int | str) -> tuple[dict | None, list[str]]:
    """GPU `index` (an nvidia-smi index or UUID) now: its SNAPSHOT_QUERY values and the other processes on it."""
    gpus = parse_query_gpu(ask(f"--query-gpu={SNAPSHOT_QUERY}", "--format=csv,noheader,nounits", "-i", str(index),
                               timeout=30))
    if not gpus:
        return None, []
    apps = ask("--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader", "-i", str(index),
               timeout=30)
    return gpus[0], parse_compute_apps(apps)


def gpu_order_env() -> dict[str, str]:
    """CUDA numbers GPUs fastest first unless told otherwise, nvidia-smi by PCI bus: with PCI_BUS_ID, CUDA0 and
    CUDA_VISIBLE_DEVICES mean the GPUs that nvidia-smi (and so machine.gpu) name. A user's own choice is kept."""
    return {} if "CUDA_DEVICE_ORDER" in os.environ else {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
