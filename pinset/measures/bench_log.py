"""The round log of a bench (`round_log`): every round as recorded, warm-up included, typed.

One form for everyone who reads rounds: the analysis of a bench that just ran (bench_run.Round.record, once per
round), the re-analysis of a file (`RoundRecord.from_json`, any schema), and the report (failed runs, round orders,
clocks). A record read from a file writes its keys as read, in order, keys it does not name included: a file read
and written again keeps its round log byte for byte. Values a file may hold that are no speed (an older or edited
file's) are kept as recorded and named by `SpeedRecord.problem`, never refused here: the analysis leaves such a
run out and the report counts it as failed, as bench counts its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pinset.measures.llama_bench import run_speed, speed_problem
from pinset.results import NUM, Doc


def _written(named: dict, keys: tuple[str, ...], rest: dict) -> dict:
    """A record's JSON: its keys in their order, each named value from the record, the others as read."""
    return {k: named[k] if k in named else rest[k] for k in keys}


SPEED_KEYS = ("test", "params", "avg_ts", "stddev_ts", "samples_ts")


@dataclass(frozen=True)
class SpeedRecord:
    """One test of one llama-bench run: llama-bench's per-repetition samples and its mean."""

    test: str
    params: dict
    avg_ts: Any                      # as recorded: a speed, or what an edited file holds (`problem` says)
    stddev_ts: Any
    samples_ts: list[float] | None   # None: not recorded (older llama-bench)
    rest: dict = field(default_factory=dict, compare=False)
    keys: tuple[str, ...] = SPEED_KEYS

    @property
    def key(self) -> tuple:
        """The test's identity across runs and rounds: its parameters."""
        return tuple(sorted((k, repr(v)) for k, v in self.params.items()))

    @property
    def problem(self) -> str | None:
        """Why the recorded values are no usable speed (None: they are one)."""
        for value in self.samples_ts or [self.avg_ts]:
            if why := speed_problem(value):
                return why
        return None

    @property
    def tps(self) -> float:
        """The run's speed for this test (llama_bench.run_speed: the median of its samples)."""
        return run_speed(self.samples_ts or (), self.avg_ts)

    def to_json(self) -> dict:
        named = {"test": self.test, "params": self.params, "avg_ts": self.avg_ts, "stddev_ts": self.stddev_ts,
                 "samples_ts": self.samples_ts}
        return _written(named, self.keys, self.rest)

    @classmethod
    def from_json(cls, t: Doc) -> SpeedRecord:
        test, params = t.get("test", str), t.get("params", dict)
        samples = t.nums("samples_ts") if t.has("samples_ts") else None
        return cls(test, params, t.raw.get("avg_ts"), t.raw.get("stddev_ts"), samples,
                   {k: v for k, v in t.raw.items() if k not in SPEED_KEYS}, tuple(t.raw))


RUN_KEYS = ("ok", "detail", "seconds", "tests")


@dataclass(frozen=True)
class RunRecord:
    """One llama-bench run of one side in one round."""

    ok: bool
    detail: str | None               # why it failed (or what was odd about it)
    seconds: float | None
    tests: list[SpeedRecord]
    rest: dict = field(default_factory=dict, compare=False)
    keys: tuple[str, ...] = RUN_KEYS

    def matching(self, key: tuple) -> list[SpeedRecord]:
        """This run's results for the test `key` (SpeedRecord.key): one, or none, or (a damaged run) more."""
        return [t for t in self.tests if t.key == key]

    @property
    def failure(self) -> str | None:
        """Why the run is no measurement: it failed, or a test of it has no usable speed ("pp512: why");
        None when it is one. What bench counts as a failed run, and the report too."""
        if self.ok:
            return next((f"{t.test}: {why}" for t in self.tests if (why := t.problem)), None)
        return self.detail or "failed"

    def to_json(self) -> dict:
        named = {"ok": self.ok, "detail": self.detail, "seconds": self.seconds,
                 "tests": [t.to_json() for t in self.tests]}
        return _written(named, self.keys, self.rest)

    @classmethod
    def from_json(cls, run: Doc) -> RunRecord:
        ok, detail = run.get("ok", bool), run.get("detail", str, None, default=None)
        return cls(ok, detail, run.get("seconds", *NUM, None, default=None),
                   [SpeedRecord.from_json(t) for t in run.objs("tests", default=[])],
                   {k: v for k, v in run.raw.items() if k not in RUN_KEYS}, tuple(run.raw))


ROUND_KEYS = ("round", "order", "warmup", "gpu_clock_mhz", "other_gpu_processes", "gpu_before", "gpu_after", "runs")


@dataclass(frozen=True)
class RoundRecord:
    """One round: both sides' runs in the order they ran ("BH": base first), and the GPU around them."""

    round: int
    order: str                       # "BH" | "HB"
    warmup: bool                     # round 0: recorded, never used
    gpu_clock_mhz: int | None
    other_gpu_processes: bool | None   # another process used the GPU (None: not known, GPU hidden)
    gpu_before: dict | None          # measures.gpu.GpuSnapshot's JSON, as recorded
    gpu_after: dict | None
    runs: dict[str, RunRecord] | None   # by side label; None: not recorded (schema 1 report fixtures)
    rest: dict = field(default_factory=dict, compare=False)
    keys: tuple[str, ...] = ROUND_KEYS

    def run(self, label: str) -> RunRecord | None:
        return (self.runs or {}).get(label)

    def failed_runs(self) -> list[str]:
        """"round N base: why" for each run of the round that is no measurement (RunRecord.failure)."""
        return [f"round {self.round} {label}: {why}" for label, run in (self.runs or {}).items()
                if (why := run.failure)]

    def to_json(self) -> dict:
        named = {"round": self.round, "order": self.order, "warmup": self.warmup, "gpu_clock_mhz": self.gpu_clock_mhz,
                 "other_gpu_processes": self.other_gpu_processes, "gpu_before": self.gpu_before,
                 "gpu_after": self.gpu_after,
                 "runs": None if self.runs is None else {label: r.to_json() for label, r in self.runs.items()}}
        return _written(named, self.keys, self.rest)

    @classmethod
    def from_json(cls, r: Doc) -> RoundRecord:
        number, order, warmup = r.get("round", int), r.get("order", str), r.get("warmup", bool)
        clock, busy = r.get("gpu_clock_mhz", int, None), r.get("other_gpu_processes", bool, None)
        runs = r.obj("runs", default=None)
        return cls(number, order, warmup, clock, busy, r.get("gpu_before", dict, None, default=None),
                   r.get("gpu_after", dict, None, default=None),
                   None if runs is None else {label: RunRecord.from_json(runs.obj(label)) for label in runs.raw},
                   {k: v for k, v in r.raw.items() if k not in ROUND_KEYS}, tuple(r.raw))


def read_round_log(d: Doc, key: str = "round_log") -> list[RoundRecord]:
    """A document's round log; a round number recorded twice is refused (it would count as two rounds)."""
    log = []
    seen: set[int] = set()
    for r in d.objs(key):
        record = RoundRecord.from_json(r)
        if record.round in seen:
            r.fail("round", f"round {record.round} is recorded twice")
        seen.add(record.round)
        log.append(record)
    return log
