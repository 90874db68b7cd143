"""Small typed parts that several result models share (the GPU a result names, the machine a verify ran on).

Each is frozen, read with `from_json` from a results.Doc and written back with `to_json`. A part read from a
file writes the keys that file held, in its order (`keys`), and keeps the keys it does not name (`rest`) as
they were: older files come back byte-identical, and a reader uses attributes, never the JSON keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, cast

from pinset.results import Doc


class FieldsJson:
    """For a dataclass whose JSON object is its fields as they are (strings, numbers), in their order: one
    `to_json` instead of a dict literal per class that must list every field again."""

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(cast(Any, self))}


def _written(named: dict, rest: dict, keys: tuple[str, ...]) -> dict:
    """The JSON object of a part: its keys in the order read, named values from the fields, the rest as read."""
    return {k: named[k] if k in named else rest[k] for k in keys}


GPU_KEYS = ("name", "driver", "compute_capability", "memory_mib")


@dataclass(frozen=True)
class GpuRecord:
    """A GPU as a result names it: verify's machine.gpu (all four facts, nvidia_smi.GpuInfo) or bench's gpu
    (name and driver only)."""

    name: str
    driver: str
    compute_capability: str | None = None
    memory_mib: int | None = None
    rest: dict = field(default_factory=dict, compare=False)   # keys it does not name (uuid), as written
    keys: tuple[str, ...] = GPU_KEYS

    def to_json(self) -> dict:
        named = {"name": self.name, "driver": self.driver, "compute_capability": self.compute_capability,
                 "memory_mib": self.memory_mib}
        return _written(named, self.rest, self.keys)

    @classmethod
    def from_json(cls, d: Doc) -> GpuRecord:
        """verify's machine.gpu: the four facts are required; other keys (uuid) are kept as written."""
        name, driver = d.get("name", str), d.get("driver", str)
        cc, memory = d.get("compute_capability", str), d.get("memory_mib", int)
        return cls(name, driver, cc, memory, {k: v for k, v in d.raw.items() if k not in GPU_KEYS}, tuple(d.raw))

    @classmethod
    def name_driver(cls, d: Doc) -> GpuRecord:
        """bench's gpu: name and driver, the only keys its model reads and writes."""
        return cls(d.get("name", str), d.get("driver", str), keys=("name", "driver"))


MACHINE_KEYS = ("hostname", "gpu", "gpus", "cuda_version", "compiler", "cmake", "ninja", "ccache", "gpu_uuids",
                "runner")


@dataclass(frozen=True)
class MachineRecord:
    """The machine a verify ran on (checks/machine.py Machine.to_json): host, first visible GPU, tool versions.
    gpus, ninja, ccache and runner are kept as written (the model never checked them); older files lack them."""

    hostname: str
    gpu: GpuRecord | None
    cuda_version: str | None = None
    compiler: str | None = None
    cmake: str | None = None
    ninja: Any = None
    ccache: Any = None
    gpus: Any = None
    gpu_uuids: tuple[str, ...] | None = None       # None: a file from before UUIDs were recorded
    runner: Any = None
    rest: dict = field(default_factory=dict, compare=False)
    keys: tuple[str, ...] = MACHINE_KEYS

    def to_json(self) -> dict:
        named = {"hostname": self.hostname, "gpu": self.gpu.to_json() if self.gpu else None, "gpus": self.gpus,
                 "cuda_version": self.cuda_version, "compiler": self.compiler, "cmake": self.cmake,
                 "ninja": self.ninja, "ccache": self.ccache,
                 "gpu_uuids": list(self.gpu_uuids) if self.gpu_uuids is not None else None, "runner": self.runner}
        return _written(named, self.rest, self.keys)

    @classmethod
    def from_json(cls, d: Doc) -> MachineRecord:
        hostname = d.get("hostname", str)
        g = d.obj("gpu", null=True)
        gpu = GpuRecord.from_json(g) if g is not None else None
        cuda, compiler, cmake = (d.get(key, str, None) for key in ("cuda_version", "compiler", "cmake"))
        uuids = d.strs("gpu_uuids", default=None)  # with the host, what tells two cells apart: text, or absent
        raw = d.raw
        return cls(hostname, gpu, cuda, compiler, cmake, raw.get("ninja"), raw.get("ccache"), raw.get("gpus"),
                   tuple(uuids) if d.has("gpu_uuids") else None, raw.get("runner"),
                   {k: v for k, v in raw.items() if k not in MACHINE_KEYS}, tuple(raw))

    @classmethod
    def of(cls, machine: dict) -> MachineRecord:
        """A machine given as its JSON object by a producer (Machine.to_json(), a test's short dict): taken as
        given, the keys it has written back as they are (from_json is the check of a file)."""
        g = machine.get("gpu")
        gpu = GpuRecord(g["name"], g["driver"], g.get("compute_capability"), g.get("memory_mib"),
                        {k: v for k, v in g.items() if k not in GPU_KEYS}, tuple(g)) if g else None
        uuids = machine.get("gpu_uuids")
        return cls(machine["hostname"], gpu, machine.get("cuda_version"), machine.get("compiler"),
                   machine.get("cmake"), machine.get("ninja"), machine.get("ccache"), machine.get("gpus"),
                   tuple(uuids) if uuids is not None else None, machine.get("runner"),
                   {k: v for k, v in machine.items() if k not in MACHINE_KEYS}, tuple(machine))
