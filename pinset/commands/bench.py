"""`pinset bench`: interleaved llama-bench rounds, base vs head, with paired statistics per test."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.table import Table

from pinset.checks.machine import host_identity
from pinset.commands.common import check_inputs, count, only_with, seconds
from pinset.commands.paths import INPUT_FILE, OUTPUT_FILE, OUTPUT_FOLDER, add_path
from pinset.commands.sides import add_side_args, check_gguf, resolve_sides
from pinset.errors import PinsetError
from pinset.measures.bench_analysis import MAX_ROUNDS, MAX_TIME_S, noise_from, reanalysed, rounds_frame, write_csv
from pinset.measures.bench_model import FIRST_LOOK, BenchResult
from pinset.measures.bench_render import bench_markdown, headers, is_aa, p_text, row_cells, subject
from pinset.measures.bench_run import BenchSettings, run_bench
from pinset.output import console, err_console, write_json, write_text
from pinset.progress import Progress

TARGETS = ["llama-bench"]
COLOURS = {"faster": "green", "no change": "cyan", "slower": "red", "too noisy": "yellow", "insufficient data": "yellow"}
# llama-bench options pinset sets itself.
OWNED = {"-m", "--model", "-o", "--output", "-r", "--repetitions", "-oe", "--output-err"}


def add_parser(sub):
    p = sub.add_parser(
        "bench", help="interleaved llama-bench, base vs head, paired statistics",
        description="Runs llama-bench for base and head alternately (BH, HB, ...); every option after `--` "
                    "goes to llama-bench, e.g. `pinset bench ... -m model.gguf -- -p 512,2048 -n 128 -ub 512,2048 -ngl 99`.")
    add_side_args(p)
    add_path(p, "-m", "--model", role=INPUT_FILE, type=Path, help="GGUF model (required unless --reanalyse)")
    add_path(p, "--vs-model", role=INPUT_FILE, type=Path, metavar="REFERENCE",
                   help="compare two models on the head build instead of two builds on one model: REFERENCE runs "
                        "as the base side, -m as the head side (e.g. IQ1_M vs IQ1_S of the same weights)")
    p.add_argument("--rounds", type=count(2), default=None,
                   help="a fixed count of rounds, the first one a discarded warm-up (turns adaptive rounds off)")
    p.add_argument("--max-time", type=seconds, default=MAX_TIME_S, metavar="SECONDS",
                   help="adaptive: add rounds until every row is decisive or the next round would end past this "
                        f"many seconds (default {MAX_TIME_S:g}: the round cap of a 48-layer MoE on an H200)")
    p.add_argument("--max-rounds", type=count(FIRST_LOOK + 1), default=MAX_ROUNDS,
                   help="adaptive: at most this many rounds, warm-up included (default 40); the statistics "
                        "spread their error rate over every round the bench may stop after")
    add_path(p, "--noise-from", role=INPUT_FILE, type=Path, metavar="AA_JSON",
                   help="an A/A bench (--aa) of this machine and these tests: its per-round noise sets the "
                        "\"no change\" margin")
    add_path(p, "--csv", role=OUTPUT_FILE, type=Path,
             help="write the tidy per-round table (round, order, side, test, samples, t/s)")
    p.add_argument("-r", "--repetitions", type=count(1), default=3, help="llama-bench -r per run (default 3)")
    p.add_argument("--cpu", action="store_true", help="hide GPUs (CUDA_VISIBLE_DEVICES=): for tests without a GPU")
    p.add_argument("--aa", action="store_true",
                   help="A/A check: run the base build against itself (every row should say \"no change\")")
    p.add_argument("--keep-busy-rounds", action="store_true",
                   help="keep rounds during which another process used the GPU (excluded by default)")
    add_path(p, "--json", role=OUTPUT_FILE, type=Path, help="write the bench JSON here")
    add_path(p, "--markdown", role=OUTPUT_FILE, type=Path, help="write a markdown table here")
    add_path(p, "--plot", role=OUTPUT_FILE, type=Path, help="write a PNG of per-round t/s here")
    add_path(p, "--log-dir", role=OUTPUT_FOLDER, type=Path, help="keep every llama-bench command line and output here")
    add_path(p, "--reanalyse", role=INPUT_FILE, type=Path, metavar="BENCH_JSON",
                   help="run nothing: recompute the rows of a recorded bench JSON from its round_log with this "
                        "pinset's method, and write --json/--markdown/--plot")
    p.add_argument("llama_bench_args", nargs=argparse.REMAINDER, help="-- then llama-bench options")
    return p


def run(args) -> int:
    if args.reanalyse is not None:
        return _reanalyse(args)
    if args.model is None:
        raise PinsetError("-m/--model is required (or --reanalyse BENCH_JSON)")
    bench_args = list(args.llama_bench_args)
    if bench_args and bench_args[0] == "--":
        bench_args = bench_args[1:]
    clash = sorted(OWNED.intersection(bench_args))
    if clash:
        raise PinsetError(f"{', '.join(clash)}: set by pinset (use -m/--model and -r/--repetitions before --)")
    check_inputs({"--model": args.model, "--vs-model": args.vs_model, "--noise-from": args.noise_from})
    only_with("adaptive rounds (no --rounds)", args.rounds is None,
              {"--max-time": args.max_time != MAX_TIME_S, "--max-rounds": args.max_rounds != MAX_ROUNDS})
    check_gguf({"--model": args.model, "--vs-model": args.vs_model})
    if args.vs_model is not None and args.aa:
        raise PinsetError("--aa and --vs-model exclude each other (an A/A check runs one model)")
    if args.vs_model is not None and os.path.samefile(args.vs_model, args.model):
        raise PinsetError(f"--vs-model {args.vs_model}: the same file as -m {args.model} (no comparison of models; "
                          "an A/A check is --aa)")
    noise = noise_from(args.noise_from, bench_args, cpu=args.cpu, model=args.model,
                       repetitions=args.repetitions) if args.noise_from else None
    base, head, _store = resolve_sides(args, TARGETS, cpu=args.cpu, head_only=args.vs_model is not None,
                                       replaced=[args.json, args.markdown, args.csv, args.plot])
    models = {"base": args.vs_model or args.model, "head": args.model}
    settings = BenchSettings(models, tuple(bench_args), repetitions=args.repetitions, rounds=args.rounds,
                             max_rounds=args.max_rounds, max_time_s=args.max_time, cpu=args.cpu, aa=args.aa,
                             keep_busy_rounds=args.keep_busy_rounds, noise=noise, log_dir=args.log_dir,
                             host={**host_identity(), "gpu_class": args.gpu_class})

    def progress(rnd):
        parts = []
        for label in ("base", "head"):
            run = rnd.runs[label]
            name = models[label].name if args.vs_model else label
            parts.append(f"{name} " + (", ".join(f"{l.test} {l.tps:,.0f}" for l in run.lines) if run.ok
                                        else f"[red]failed[/] ({run.detail})"))
        tag = " (warm-up)" if rnd.warmup else ""
        busy = " [yellow]other GPU process[/]" if rnd.other_gpu_processes else ""
        err_console.print(f"round {rnd.index} {rnd.order}{tag}{busy}: " + "; ".join(parts))

    def look(seen):
        budget = f"{seen.used_s:.0f}/{seen.max_time_s:.0f} s" if seen.adaptive else f"{seen.used_s:.0f} s"
        err_console.print(f"bench: {seen.rounds} of {seen.planned} rounds, {budget}, "
                          f"undecided: {', '.join(seen.undecided) or 'none'}", highlight=False)
        shown.update(done=seen.rounds, note=f"undecided: {', '.join(seen.undecided) or 'none'}")

    # A live line on a terminal; without one the plain line per round above says it.
    with Progress("bench", unit="rounds", total=settings.planned, enabled=err_console.is_terminal) as shown:
        result = run_bench(base, head, settings, on_round=progress, on_look=look)
    return _write(result, args)


def _reanalyse(args) -> int:
    from pinset.report.load import load_result

    if args.model or args.vs_model or args.llama_bench_args:
        raise PinsetError("--reanalyse runs nothing: drop -m/--vs-model and the llama-bench options")
    recorded = load_result(args.reanalyse)
    if not isinstance(recorded.model, BenchResult):
        raise PinsetError(f"{args.reanalyse}: kind {recorded.kind!r}, --reanalyse takes a bench result")
    # the recorded model, its rows recomputed: written and shown like a fresh bench
    return _write(reanalysed(recorded.model, keep_busy_rounds=args.keep_busy_rounds), args)


def _write(result: BenchResult, args) -> int:
    """Table on the console, then the requested JSON, CSV, PNG and markdown; exit 0 when the bench is ok, else 1."""
    console.print(bench_table(result))
    if args.json:
        write_json(args.json, result.to_json())
    if args.csv:
        write_csv(rounds_frame(result.round_log, keep_busy_rounds=args.keep_busy_rounds), args.csv)
    plot_name = None
    if args.plot:
        from pinset.measures.plot import plot_bench

        plot_bench(result, args.plot)
        plot_name = args.plot.name if args.markdown and args.plot.parent.resolve() == args.markdown.parent.resolve() \
            else str(args.plot)
    if args.markdown:
        write_text(args.markdown, bench_markdown(result, plot_name))
    return 0 if result.ok else 1


def bench_table(result: BenchResult) -> Table:
    t = Table(title=f"pinset bench: {subject(result)} on {result.device} ({result.rounds} rounds, first = warm-up)")
    more = result.decision.more_rounds if result.decision else None
    notes = [f"too noisy: the scatter so far suggests about {more} more rounds (--max-time / --max-rounds)"] if more else []
    if is_aa(result):
        notes.append("A/A check: the same programs on both sides (the machine's noise, not head's speed)")
    if note := p_text(result):
        notes.append(note)
    if notes:
        t.caption = "\n".join(notes)
    for h in headers(result):
        t.add_column(h)
    for row in result.rows:
        cells = row_cells(row)
        cells[-1] = f"[{COLOURS.get(row.verdict, 'white')}]{cells[-1]}[/]"
        t.add_row(*cells)
    return t
