"""`pinset bench`: interleaved llama-bench rounds, base vs head, with paired statistics per test."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.table import Table

from pinset.checks.machine import host_identity
from pinset.errors import PinsetError
import time

from pinset.measures.bench import (FIRST_LOOK, MAX_ROUNDS, MAX_TIME_S, aa_noise, analyse, bench_document, bench_markdown, decision_record, decisive,
                                   headers, reanalysed, row_cells, run_rounds, run_tps, subject)
from pinset.measures.stats import Plan
from pinset.commands.sides import add_side_args, check_gguf, resolve_sides
from pinset.commands.common import check_inputs, count, only_with, seconds
from pinset.output import check_outputs, console, err_console, write_json, write_text
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
    p.add_argument("-m", "--model", type=Path, help="GGUF model (required unless --reanalyse)")
    p.add_argument("--vs-model", type=Path, metavar="REFERENCE",
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
    p.add_argument("--noise-from", type=Path, metavar="AA_JSON",
                   help="an A/A bench (--aa) of this machine and these tests: its per-round noise sets the "
                        "\"no change\" margin")
    p.add_argument("--csv", type=Path, help="write the tidy per-round table (round, order, side, test, samples, t/s)")
    p.add_argument("-r", "--repetitions", type=count(1), default=3, help="llama-bench -r per run (default 3)")
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
    check_outputs({"--json": args.json, "--markdown": args.markdown, "--plot": args.plot}, {"--log-dir": args.log_dir},
                  inputs=[p for p in (args.model, args.vs_model, args.reanalyse, args.config) if p])
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

    adaptive = args.rounds is None
    plan = Plan.adaptive(args.max_rounds - 1, FIRST_LOOK) if adaptive else Plan()
    decision = decision_record(plan, noise=noise and noise["noise"], noise_from=noise and str(args.noise_from),
                               max_rounds=args.max_rounds if adaptive else None,
                               max_time_s=args.max_time if adaptive else None)
    start = time.monotonic()
    state = {"ran_out": False}

    def done(so_far) -> bool:
        """Adaptive stop: every row decisive, or the budget spent; one plain progress line per round."""
        rows = analyse([r.to_json() for r in so_far], keep_busy_rounds=args.keep_busy_rounds, plan=plan,
                       noise=noise and noise["by_params"])
        used = time.monotonic() - start
        open_rows = [r["test"] for r in rows if r["verdict"] not in ("faster", "slower", "no change")]
        budget = f"{used:.0f}/{args.max_time:.0f} s" if adaptive else f"{used:.0f} s"
        err_console.print(f"bench: {len(so_far)} of {args.max_rounds if adaptive else args.rounds} rounds, {budget}, "
                          f"undecided: {', '.join(open_rows) or 'none'}", highlight=False)
        shown.update(done=len(so_far), note=f"undecided: {', '.join(open_rows) or 'none'}")
        if not adaptive:
            return False
        if decisive(rows) or failing(so_far):
            return True
        last = sum(run.seconds for run in so_far[-1].runs.values())
        state["ran_out"] = used + last > args.max_time or len(so_far) >= args.max_rounds   # the next would overrun
        return state["ran_out"]

    planned = args.max_rounds if adaptive else args.rounds
    # A live line on a terminal; without one the plain line per round above says it.
    with Progress("bench", unit="rounds", total=planned, enabled=err_console.is_terminal) as shown:
        rounds = run_rounds(base, head, models, bench_args, rounds=planned, repetitions=args.repetitions,
                            cpu=args.cpu, log_dir=args.log_dir, on_round=progress, done=done)
    decision.update(elapsed_s=round(time.monotonic() - start, 1), budget_ran_out=state["ran_out"])
    doc = bench_document(models, bench_args, rounds, args.repetitions, base, head,
                         keep_busy_rounds=args.keep_busy_rounds, decision=decision,
                         host={**host_identity(), "gpu_class": args.gpu_class})
    # head is the base build itself: --aa, or the same programs given for both sides (never evidence for the pins)
    aa = bool(args.aa) or (args.vs_model is None and base.bin_dir.resolve() == head.bin_dir.resolve())
    doc["aa_check"] = aa
    if aa:
        doc["aa_noise"] = aa_noise(doc["rows"])
    return _write(doc, args)


def failing(so_far) -> bool:
    """A run failed in each of the last two rounds, or both runs of the last one: more rounds would only
    repeat the failure, so an adaptive bench stops (not ok, and not for want of time)."""
    failed = [any(not run.ok for run in rnd.runs.values()) for rnd in so_far]
    return failed[-2:] == [True, True] or not any(run.ok for run in so_far[-1].runs.values())


def noise_from(path: Path, bench_args: list[str], *, cpu: bool, model: Path, repetitions: int) -> dict:
    """The A/A noise of `path` for this bench: refused (exit 2) unless it is an A/A bench of this host and GPU,
    on this model, with the same llama-bench options (so the same tests) and -r (a run's speed is the median
    of -r samples: more samples scatter less). The noise is computed from the file's own rounds; its
    `aa_noise` summary must agree with them."""
    import json
    import socket

    from pinset.measures import gpu as gpu_mod
    from pinset.report.load import load_result

    aa = load_result(path)
    data = aa.data
    if aa.kind != "bench" or not data.get("aa_check"):
        raise PinsetError(f"--noise-from {path}: not an A/A bench (pinset bench --aa)")
    there_host = (data.get("host") or {}).get("hostname")
    if there_host != socket.gethostname():
        raise PinsetError(f"--noise-from {path}: measured on host {there_host!r}, this is {socket.gethostname()!r}")
    snap = None if cpu else gpu_mod.snapshot()
    here = snap.name if snap else None
    there = (data.get("gpu") or {}).get("name")
    if there != here:
        raise PinsetError(f"--noise-from {path}: measured on {there or 'CPU'}, this machine has {here or 'no GPU'}")
    if list(data.get("llama_bench_args") or []) != list(bench_args):
        raise PinsetError(f"--noise-from {path}: llama-bench options {' '.join(data.get('llama_bench_args') or [])!r} "
                          f"differ from {' '.join(bench_args)!r} (other tests)")
    there_model = (data.get("model") or {}).get("name")
    if there_model != model.name:
        raise PinsetError(f"--noise-from {path}: measured on the model {there_model}, this bench runs {model.name}")
    if data.get("repetitions") != repetitions:
        raise PinsetError(f"--noise-from {path}: measured with -r {data.get('repetitions')}, this bench runs "
                          f"-r {repetitions}")
    entries = aa_noise(analyse(data["round_log"]))
    if data.get("aa_noise") is not None and not _same_noise(data["aa_noise"], entries):
        raise PinsetError(f"--noise-from {path}: its aa_noise does not match the sd of its own rounds (edited?)")
    if not entries:
        raise PinsetError(f"--noise-from {path}: no test with a measured noise (fewer than 3 kept rounds)")
    return {"noise": entries, "by_params": {json.dumps(e["params"], sort_keys=True): float(e["sd"]) for e in entries}}


def _same_noise(recorded: list[dict], computed: list[dict]) -> bool:
    import json
    import math

    key = lambda e: json.dumps(e["params"], sort_keys=True)  # noqa: E731
    mine = {key(e): e["sd"] for e in computed}
    return {key(e) for e in recorded} == set(mine) and all(
        math.isclose(e["sd"], mine[key(e)], rel_tol=1e-6, abs_tol=1e-12) for e in recorded)


def _reanalyse(args) -> int:
    from pinset.report.load import load_result

    if args.model or args.vs_model or args.llama_bench_args:
        raise PinsetError("--reanalyse runs nothing: drop -m/--vs-model and the llama-bench options")
    recorded = load_result(args.reanalyse)
    if recorded.kind != "bench":
        raise PinsetError(f"{args.reanalyse}: kind {recorded.kind!r}, --reanalyse takes a bench result")
    return _write(reanalysed(recorded.data, keep_busy_rounds=args.keep_busy_rounds), args)


def _write(doc: dict, args) -> int:
    """Table on the console, then the requested JSON, PNG and markdown; exit 0 when the bench is ok, else 1."""
    console.print(bench_table(doc))
    if args.json:
        write_json(args.json, doc)
    if args.csv:
        from pinset.measures.bench import rounds_frame, write_csv

        write_csv(rounds_frame(doc["round_log"], keep_busy_rounds=args.keep_busy_rounds), args.csv)
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
    more = (doc.get("decision") or {}).get("more_rounds")
    if more:
        t.caption = f"too noisy: the scatter so far suggests about {more} more rounds (--max-time / --max-rounds)"
    for h in headers(doc):
        t.add_column(h)
    for row in doc["rows"]:
        cells = row_cells(row)
        cells[-1] = f"[{COLOURS.get(row['verdict'], 'white')}]{cells[-1]}[/]"
        t.add_row(*cells)
    return t
