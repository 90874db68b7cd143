"""Parse `llama-bench -o jsonl`: one JSON object per test on stdout (logs go to stderr).

A test is identified by the parameters that change what is measured (prompt/gen sizes, batch sizes,
offload, flash attention, cache types, threads...), so base and head runs of the same invocation pair
up row by row. Each line keeps llama-bench's per-repetition samples; `run_speed` takes their median.

A line is refused (BenchParseError) unless every speed is a real number in (0, MAX_TOKENS_PER_SECOND]:
NaN, infinite, zero, negative, absurd or non-numeric speeds are not measurements. `run_problem` then
checks a whole run against what was asked: -r samples per test, the -p/-n/-pg sizes, no test twice.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from statistics import median
from typing import Any, Sequence

from pinset.errors import BenchParseError

# Fields that define *which* test a line is (not build, model path or timings).
PARAM_FIELDS = ("n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch", "n_threads", "n_gpu_layers",
                "n_cpu_moe", "flash_attn", "type_k", "type_v", "split_mode", "main_gpu", "no_kv_offload",
                "embeddings", "tensor_split", "cpu_mask", "poll", "use_mmap", "devices")


@dataclass(frozen=True)
class BenchLine:
    test: str                        # "pp512", "tg128", "pp512+tg128", "pp512 @ d4096"
    params: dict
    avg_ts: float
    stddev_ts: float
    samples_ts: tuple[float, ...]
    build_commit: str | None
    build_number: int | None
    model_type: str | None
    model_size: int | None
    backends: str | None
    gpu_info: str | None

    @property
    def key(self) -> tuple:
        """Identity of the test across runs and builds."""
        return tuple((k, json.dumps(self.params.get(k), sort_keys=True)) for k in sorted(self.params))

    @property
    def tps(self) -> float:
        """The run's speed for this test (run_speed)."""
        return run_speed(self.samples_ts, self.avg_ts)


def run_speed(samples_ts: Sequence[float], avg_ts: Any) -> float:
    """The speed of one run of one test: the median of its samples; llama-bench's avg_ts (their mean) only
    where no samples were recorded (older llama-bench). On CUDA the first sample still captures the CUDA graphs
    and is often the slowest by ~20 %: a mean would carry that warm-up into every round."""
    return float(median(samples_ts)) if samples_ts else float(avg_ts)


# No llama.cpp run produces more than this: a toy 2-layer model on an H200 stays below ~1e6 t/s (the
# 4-layer 3B-A0.3B MoE makes 1.3e5 t/s pp512), so a larger "speed" is a broken timer or a forged line.
MAX_TOKENS_PER_SECOND = 1e7


def speed_problem(value) -> str | None:
    """Why a tokens/s value is not a measured speed (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not a number"
    if not math.isfinite(value):
        return f"{value} is not finite"
    if value <= 0:
        return f"{value:g} t/s is not positive"
    if value > MAX_TOKENS_PER_SECOND:
        return f"{value:g} t/s is beyond any physical rate (> {MAX_TOKENS_PER_SECOND:g})"
    return None


def _count(obj: dict, key: str, default=None) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BenchParseError(f"{key} = {value!r} is not a count")
    return value


def test_name(n_prompt: int, n_gen: int, n_depth: int = 0) -> str:
    """llama-bench's own naming (its markdown printer): pp512, tg128, pp512+tg128, plus ' @ d<depth>'."""
    if n_prompt and n_gen:
        name = f"pp{n_prompt}+tg{n_gen}"
    elif n_prompt:
        name = f"pp{n_prompt}"
    else:
        name = f"tg{n_gen}"
    return name + (f" @ d{n_depth}" if n_depth else "")


def parse_jsonl(stdout: str) -> list[BenchLine]:
    """Every test line; non-JSON lines (none expected on stdout) are ignored, a broken JSON line or a
    line whose numbers are not measured speeds is an error."""
    lines = []
    for i, raw in enumerate(stdout.splitlines(), 1):
        raw = raw.strip()
        if not raw.startswith("{"):
            continue
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise BenchParseError(f"line {i}: not JSON: {exc}") from None
        try:
            if not isinstance(obj, dict):
                raise BenchParseError("not a JSON object")
            n_prompt, n_gen, n_depth = _count(obj, "n_prompt"), _count(obj, "n_gen"), _count(obj, "n_depth", 0)
            if not (n_prompt or n_gen):
                raise BenchParseError("n_prompt and n_gen are both 0")
            samples = obj.get("samples_ts", [])
            if not isinstance(samples, list) or not samples:
                raise BenchParseError(f"samples_ts = {samples!r} is not a list of speeds")
            for name, value in [("avg_ts", obj["avg_ts"]), *(("samples_ts", x) for x in samples)]:
                if problem := speed_problem(value):
                    raise BenchParseError(f"{name}: {problem}")
            stddev = obj.get("stddev_ts", 0.0)
            if isinstance(stddev, bool) or not isinstance(stddev, (int, float)) or not (0 <= stddev < math.inf):
                raise BenchParseError(f"stddev_ts = {stddev!r} is not a standard deviation")
            mean = sum(samples) / len(samples)
            if abs(obj["avg_ts"] - mean) > 0.01 * mean:
                raise BenchParseError(f"avg_ts {obj['avg_ts']:g} is not the mean of samples_ts ({mean:g})")
            params = {k: obj[k] for k in PARAM_FIELDS if k in obj}
            lines.append(BenchLine(
                test=test_name(n_prompt, n_gen, n_depth), params=params,
                avg_ts=float(obj["avg_ts"]), stddev_ts=float(stddev),
                samples_ts=tuple(float(x) for x in samples),
                build_commit=obj.get("build_commit"), build_number=obj.get("build_number"),
                model_type=obj.get("model_type"), model_size=obj.get("model_size"),
                backends=obj.get("backends"), gpu_info=obj.get("gpu_info"),
            ))
        except BenchParseError as exc:
            raise BenchParseError(f"line {i}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchParseError(f"line {i}: missing or bad field: {exc}") from None
    return lines


TEST_FLAGS = {"-p": "pp", "--n-prompt": "pp", "-n": "tg", "--n-gen": "tg", "-pg": "pg", "--prompt-gen": "pg"}
# llama-bench runs every combination of these lists with every test (get_cmd_params_instances).
GRID_FLAGS = {"-b": "n_batch", "--batch-size": "n_batch", "-ub": "n_ubatch", "--ubatch-size": "n_ubatch",
              "-t": "n_threads", "--threads": "n_threads", "-ngl": "n_gpu_layers", "--n-gpu-layers": "n_gpu_layers",
              "-d": "n_depth", "--n-depth": "n_depth"}
INT_LIST_RE = re.compile(r"\d+(?:,\d+)*")


# llama-bench's own defaults (cmd_params_defaults), each used when its option is not given: `-p 512` alone
# still runs tg128 (`-n 0` turns it off)
DEFAULT_TESTS = {"pp": {(512, 0)}, "tg": {(0, 128)}}


def requested_grid(bench_args: list[str]) -> tuple[set[tuple[int, int]] | None, dict[str, list[int]]]:
    """What a llama-bench command line asks for: the (n_prompt, n_gen) tests, llama-bench's default pp512 and
    tg128 included where -p / -n is not given (None: none can be told), and the values of each grid parameter,
    from plain lists only (`-p 512,2048`, `-pg 512,128`, `-ub 256,512`); a kind given as a range
    (`-p 1-512*2`) or in another form is not read (its tests are not checked)."""
    tests: dict[str, set[tuple[int, int]] | None] = {}
    grid: dict[str, list[int]] = {}
    for flag, value in zip(bench_args, bench_args[1:]):
        kind = TEST_FLAGS.get(flag)
        if kind == "pg" and re.fullmatch(r"\d+,\d+", value):
            prompt, gen = (int(v) for v in value.split(","))
            pair = {(prompt, gen)}
        elif kind and kind != "pg" and INT_LIST_RE.fullmatch(value):
            pair = {(v, 0) if kind == "pp" else (0, v) for v in (int(v) for v in value.split(",")) if v}
        elif kind:
            tests[kind] = None   # unreadable: this kind's tests cannot be told
            continue
        elif flag in GRID_FLAGS and INT_LIST_RE.fullmatch(value):
            values = grid.setdefault(GRID_FLAGS[flag], [])
            values += [int(v) for v in value.split(",") if int(v) not in values]
            continue
        else:
            continue
        if kind not in tests or tests[kind] is not None:
            tests[kind] = (tests.get(kind) or set()) | pair
    for kind, default in DEFAULT_TESTS.items():
        tests.setdefault(kind, default)
    known = [t for t in tests.values() if t is not None]
    return (set().union(*known) if known else None), grid


def run_problem(lines: list[BenchLine], *, repetitions: int, bench_args: list[str], gpu: bool | None = None) -> str | None:
    """Why one llama-bench run's lines are not the measurement asked for (None when they are):
    a sample count other than -r, a test printed twice, a requested combination with no test, a GPU
    run that saw no GPU or a CPU run that saw one."""
    if not lines:
        return "llama-bench printed no test line"
    for line in lines:
        if len(line.samples_ts) != repetitions:
            return f"{line.test}: {len(line.samples_ts)} samples for -r {repetitions}"
    keys = [line.key for line in lines]
    if len(set(keys)) != len(keys):
        return f"{next(line.test for line in lines if keys.count(line.key) > 1)}: the same test printed twice"
    tests, grid = requested_grid(bench_args)
    wanted: set[tuple[Any, Any]] = tests or {(line.params.get("n_prompt"), line.params.get("n_gen")) for line in lines}
    fields = sorted(grid)
    got = {(line.params.get("n_prompt"), line.params.get("n_gen"), *(line.params.get(f) for f in fields))
           for line in lines}
    missing = [combo for combo in itertools.product(sorted(wanted), *(grid[f] for f in fields))
               if (*combo[0], *combo[1:]) not in got]
    if missing:
        shown = "; ".join(test_name(*combo[0]) + "".join(f" {f}={v}" for f, v in zip(fields, combo[1:]))
                          for combo in missing[:3])
        return f"no result for {shown}" + (f" and {len(missing) - 3} more" if len(missing) > 3 else "") \
            + " although the command line asks for it"
    if gpu is not None:
        seen = [line.gpu_info for line in lines if line.gpu_info]
        if gpu and len(seen) != len(lines):
            return "llama-bench saw no GPU (gpu_info empty): the run was on the CPU"
        if not gpu and seen:
            return f"a CPU run saw GPU {seen[0]}"
    return None
