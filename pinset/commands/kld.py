"""`pinset kld`: head's and base's device paths vs the CPU result of the same model (KL divergence)."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from pinset.checks.machine import host_identity
from pinset.commands.common import check_inputs, count, only_with
from pinset.commands.paths import INPUT_FILE, OUTPUT_FILE, OUTPUT_FOLDER, add_path
from pinset.commands.sides import add_side_args, check_gguf, resolve_sides
from pinset.measures.kld import ATTEMPTS, KldSettings, run_kld
from pinset.measures.kld_model import KldResult
from pinset.measures.kld_render import HEADERS, kld_markdown, kld_rows
from pinset.models.pipeline import DEFAULT_TEXT
from pinset.output import console, write_json, write_text

TARGETS = ["llama-perplexity"]


def add_parser(sub):
    p = sub.add_parser("kld", help="KL divergence of base and head device paths against the CPU reference")
    add_side_args(p)
    add_path(p, "-m", "--model", role=INPUT_FILE, type=Path, required=True, help="GGUF model (e.g. from `pinset model synth`)")
    add_path(p, "-f", "--text", role=INPUT_FILE, type=Path, default=DEFAULT_TEXT,
                   help="text file for perplexity (default: pinset's generated prose, pinset/data/prose.txt)")
    p.add_argument("--ctx", type=count(16), default=512, help="context size (default 512)")
    p.add_argument("--chunks", type=count(1), default=16, help="chunks of --ctx tokens (default 16)")
    p.add_argument("--cpu", action="store_true",
                   help="device path = CPU too (-ngl 0, CUDA hidden): for tests and machines without a GPU")
    p.add_argument("-ngl", "--gpu-layers", type=count(0), default=99, help="layers on the device (default 99)")
    p.add_argument("-t", "--threads", type=count(1), help="threads for llama-perplexity")
    add_path(p, "--json", role=OUTPUT_FILE, type=Path, help="write the kld JSON here")
    add_path(p, "--markdown", role=OUTPUT_FILE, type=Path, help="write a markdown table here")
    add_path(p, "--log-dir", role=OUTPUT_FOLDER, type=Path, help="keep the llama-perplexity command lines and output here")
    return p


def run(args) -> int:
    check_inputs({"--model": args.model, "--text": args.text})
    only_with("the device (not --cpu, which runs -ngl 0)", not args.cpu,
              {"-ngl/--gpu-layers": args.gpu_layers not in (0, 99)})   # 0: what --cpu runs, said again
    check_gguf({"--model": args.model})
    base, head, store = resolve_sides(args, TARGETS, cpu=args.cpu, replaced=[args.json, args.markdown])
    said: set[str] = set()

    def on_reference(side):
        console.print(f"reference: CPU, {side.label} build, ctx {args.ctx}, {args.chunks} chunks")

    def on_run(side, ref):
        if ref.cached and not said:
            console.print(f"  [dim]cached reference {ref.key}[/]")
        said.add(side.label)
        console.print(f"{side.label}: --kl-divergence on {'CPU' if args.cpu else 'the device'}")

    def on_retry(side, attempt, why):
        console.print(f"  [yellow]{side.label if side else 'reference'}[/]: {why}: run {attempt} of {ATTEMPTS}")

    settings = KldSettings(args.model, args.text, ctx=args.ctx, chunks=args.chunks, cpu=args.cpu,
                           gpu_layers=args.gpu_layers, threads=args.threads, log_dir=args.log_dir,
                           host={**host_identity(), "gpu_class": args.gpu_class})
    result = run_kld(base, head, settings, store, on_reference=on_reference, on_run=on_run, on_retry=on_retry)
    console.print(kld_table(result))
    for r in result.runs:
        if not r.ok:
            console.print(f"  [red]{r.label}[/]: {r.detail}")
    v = result.verdict
    colour = "green" if result.ok else "red"
    device = ", ".join(sorted({r.backend for r in result.runs}))
    console.print(f"[{colour}]head is {v.text}[/] (device: {device})" if v.sigma is not None
                  else f"[red]{v.text}[/] (device: {device})")
    if args.json:
        write_json(args.json, result.to_json())
    if args.markdown:
        write_text(args.markdown, kld_markdown(result))
    return 0 if result.ok else 1


def kld_table(result: KldResult) -> Table:
    t = Table(title=f"pinset kld: {result.model.name} (ctx {result.ctx}, {result.chunks} chunks, vs CPU)")
    for h in HEADERS:
        t.add_column(h)
    for row in kld_rows(result):
        t.add_row(*row)
    return t
