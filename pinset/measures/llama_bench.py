"""Parse `llama-bench -o jsonl`: one JSON object per test on stdout (logs go to stderr).

A test is identified by the parameters that change what is measured (prompt/gen sizes, batch sizes,
offload, flash attention, cache types, threads...), so base and head runs of the same invocation pair
up row by row. Each line keeps llama-bench's per-repetition samples; measures/bench.py takes their median.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

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


class BenchParseError(ValueError):
    pass


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
    """Every test line; non-JSON lines (none expected on stdout) are ignored, a broken JSON line is an error."""
    lines = []
    for i, raw in enumerate(stdout.splitlines(), 1):
        raw = raw.strip()
        if not raw.startswith("{"):
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BenchParseError(f"line {i}: not JSON: {exc}") from None
        try:
            n_prompt, n_gen = int(obj["n_prompt"]), int(obj["n_gen"])
            n_depth = int(obj.get("n_depth", 0) or 0)
            params = {k: obj[k] for k in PARAM_FIELDS if k in obj}
            lines.append(BenchLine(
                test=test_name(n_prompt, n_gen, n_depth), params=params,
                avg_ts=float(obj["avg_ts"]), stddev_ts=float(obj.get("stddev_ts", 0.0)),
                samples_ts=tuple(float(x) for x in obj.get("samples_ts", ())),
                build_commit=obj.get("build_commit"), build_number=obj.get("build_number"),
                model_type=obj.get("model_type"), model_size=obj.get("model_size"),
                backends=obj.get("backends"), gpu_info=obj.get("gpu_info"),
            ))
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchParseError(f"line {i}: missing or bad field: {exc}") from None
    return lines
