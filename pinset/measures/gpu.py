"""What the GPU was doing around each benchmark round (nvidia-smi): name, clocks, other processes.

A round measured while another process used the GPU, or with clocks far below the others, is not
comparable; recording both lets the bench verdict exclude such rounds and lets a reader check.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinset.checks import nvidia_smi


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


def snapshot(index: int | str | None = None) -> GpuSnapshot | None:
    """The GPU `index` (an nvidia-smi index or UUID; default: the first GPU visible under CUDA_VISIBLE_DEVICES,
    which is not nvidia-smi's GPU 0 in a cell pinned to another GPU) right now; None without nvidia-smi or GPU."""
    if index is None:
        visible = nvidia_smi.visible_gpus()
        index = visible[0].uuid if visible and visible[0].uuid else 0
    values, others = nvidia_smi.query_snapshot(index)
    return GpuSnapshot(**values, other_processes=others) if values else None
