"""`pinset bench`: interleaved llama-bench rounds, base vs head, with paired statistics per test."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from pinset.checks.machine import host_identity
from pinset.errors import PinsetError
from pinset.measures.bench import (bench_document, bench_markdown, headers, reanalysed, row_cells, run_rounds,
                                   run_tps, subject)
from pinset.commands.sides import add_side_args, resolve_sides
from pinset.output import console, err_console, write_json, write_text

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
    p.add_argument("-m", "--model", type=Path, help="GGUF model (required unless --reanalyse)")
    p.add_argument("--vs-model", type=Path, metavar="REFERENCE",
                   help="compare two models on the head build instead of two builds on one model: REFERENCE runs "
                        "as the base side, -m as the head side (e.g. IQ1_M vs IQ1_S of the same weights)")
    p.add_argument("--rounds", type=int, default=6, help="rounds, the first one a discarded warm-up (default 6)")
    p.add_argument("-r", "--repetitions", type=int, default=3, help="llama-bench -r per run (default 3)")
    p.add_argument("--cpu", action="store_true", help="hide GPUs (CUDA_VISIBLE_DEVICES=): for tests without a GPU")
    p.add_argument("--aa", action="store_true",
                   help="A/A check: run the base build against itself (every row should say \"no change\")")
    p.add_argument("--keep-busy-rounds", action="store_true",
                   help="keep rounds during which another process used the GPU (excluded by default)")
    p.add_argument("--json", type=Path, help="write the bench JSON here")
    p.add_argument("--markdown", type=Path, help="write a markdown table here")
    p.add_argument("--plot", type=Path, help="write a PNG of per-round t/s here")
    p.add_argument("--log-dir", type=Path, help="keep every llama-bench command line and output here")
    p.add_argument("--reanalyse", type=Path, metavar="BENCH_JSON",
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
    if args.rounds < 2:
        raise PinsetError("--rounds must be >= 2 (the first is a warm-up)")
    if args.repetitions < 1:
        raise PinsetError("--repetitions must be >= 1")
    for flag, path in (("--model", args.model), ("--vs-model", args.vs_model)):
        if path is not None and not path.is_file():
            raise PinsetError(f"{flag} {path}: no such file")
    if args.vs_model is not None and args.aa:
        raise PinsetError("--aa and --vs-model exclude each other (an A/A check runs one model)")
    base, head, _store = resolve_sides(args, TARGETS, cpu=args.cpu, head_only=args.vs_model is not None)
    if args.aa:
        from dataclasses import replace

        head = replace(base, label="head")
    models = {"base": args.vs_model or args.model, "head": args.model}

    def progress(rnd):
        parts = []
        for label in ("base", "head"):
            run = rnd.runs[label]
            name = models[label].name if args.vs_model else label
            parts.append(f"{name} " + (", ".join(f"{l.test} {run_tps(vars(l)):,.0f}" for l in run.lines) if run.ok
                                        else f"[red]failed[/] ({run.detail})"))
        tag = " (warm-up)" if rnd.warmup else ""
        busy = " [yellow]other GPU process[/]" if rnd.other_gpu_processes else ""
        err_console.print(f"round {rnd.index} {rnd.order}{tag}{busy}: " + "; ".join(parts))

    rounds = run_rounds(base, head, models, bench_args, rounds=args.rounds, repetitions=args.repetitions,
                        cpu=args.cpu, log_dir=args.log_dir, on_round=progress)
    doc = bench_document(models, bench_args, rounds, args.repetitions, base, head,
                         keep_busy_rounds=args.keep_busy_rounds,
                         host={**host_identity(), "gpu_class": args.gpu_class})
    doc["aa_check"] = bool(args.aa)  # head is the base build itself
    return _write(doc, args)


def _reanalyse(args) -> int:
    from pinset.report.load import load_result

    if args.model or args.vs_model or args.llama_bench_args:
        raise PinsetError("--reanalyse runs nothing: drop -m/--vs-model and the llama-bench options")
    recorded = load_result(args.reanalyse)
    if recorded.kind != "bench":
        raise PinsetError(f"{args.reanalyse}: kind {recorded.kind!r}, --reanalyse takes a bench result")
    if args.json and args.json.resolve() == args.reanalyse.resolve():
        raise PinsetError(f"--json {args.json}: would overwrite the recorded file; write the result elsewhere")
    return _write(reanalysed(recorded.data, keep_busy_rounds=args.keep_busy_rounds), args)


def _write(doc: dict, args) -> int:
    """Table on the console, then the requested JSON, PNG and markdown; exit 0 when the bench is ok, else 1."""
    console.print(bench_table(doc))
    if args.json:
        write_json(args.json, doc)
    plot_name = None
    if args.plot:
        from pinset.measures.plot import plot_bench

        plot_bench(doc, args.plot)
        plot_name = args.plot.name if args.markdown and args.plot.parent.resolve() == args.markdown.parent.resolve() \
            else str(args.plot)
    if args.markdown:
        write_text(args.markdown, bench_markdown(doc, plot_name))
    return 0 if doc["ok"] else 1


def bench_table(doc) -> Table:
    gpu = doc["gpu"]["name"] if doc["gpu"] else "CPU"
    t = Table(title=f"pinset bench: {subject(doc)} on {gpu} ({doc['rounds']} rounds, first = warm-up)")
    for h in headers(doc):
        t.add_column(h)
    for row in doc["rows"]:
        cells = row_cells(row)
        cells[-1] = f"[{COLOURS.get(row['verdict'], 'white')}]{cells[-1]}[/]"
        t.add_row(*cells)
    return t
