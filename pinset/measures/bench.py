"""Interleaved llama-bench rounds for base and head, and their analysis into bench rows: the names callers
import, from the modules that do one job each:

- bench_run: running rounds (BH, HB, ...; round 0 a warm-up) and the stage function `run_bench`;
- bench_analysis: recorded rounds -> one tidy pandas table -> `BenchRow`s by the rule of stats.py; the bench
  document, re-analysis, the A/A rules (by content; --noise-from);
- bench_render: markdown and the cells every table shares;
- bench_model: the result model (`BenchResult`, `BenchRow`, typed `Exclusion`s), read by `pinset report`.

A run's speed is the median of llama-bench's per-repetition samples, not its avg_ts: on CUDA the
first repetition of a test still captures the CUDA graphs and is usually the slowest, often by ~20 %
(H200, pp runs of a MoE model, 30 of 32: tests/fixtures/llama-bench/h200-moe-iq1s-recorded.json), and a
mean over `-r 3` carries that warm-up into every round.

The two sides are normally two builds on one model (base vs head). With `models`, the comparison
is two models on one build (e.g. IQ1_M vs IQ1_S of the same weights on the head build): the same
rounds and statistics, with "base" the reference model.
"""

from __future__ import annotations

from pinset.measures.bench_analysis import (  # noqa: F401
                                            FRAME_COLUMNS,
                                            MAX_ROUNDS,
                                            MAX_TIME_S,
                                            METHOD,
                                            _ok,
                                            aa_noise,
                                            analyse,
                                            analyse_rows,
                                            bench_document,
                                            bench_result,
                                            decision_record,
                                            decisive,
                                            is_aa_check,
                                            more_rounds,
                                            noise_from,
                                            noise_of,
                                            plan_of,
                                            reanalysed,
                                            rederive_row,
                                            rounds_frame,
                                            row_contradiction,
                                            row_from_speeds,
                                            rows_from_frame,
                                            write_csv,
)
from pinset.measures.bench_model import (  # noqa: F401
                                            BUSY,
                                            DECISIVE,
                                            FIRST_LOOK,
                                            VERDICTS,
                                            BenchResult,
                                            BenchRow,
                                            Exclusion,
                                            ExclusionKind,
                                            exclusion_kind,
                                            recorded_speed_problem,
                                            run_tps,
)
from pinset.measures.bench_render import (  # noqa: F401
                                            HEADERS,
                                            band_name,
                                            bench_markdown,
                                            headers,
                                            row_cells,
                                            row_speeds,
                                            speed_stat,
                                            subject,
                                            verdict_text,
)
from pinset.measures.bench_run import CPU_ENV, Look, Round, SideRun, failing, run_bench, run_rounds, run_side  # noqa: F401
