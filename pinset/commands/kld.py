"""`pinset kld`: head's and base's device paths vs the CPU result of the same model (KL divergence)."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from pinset.checks.machine import host_identity
from pinset.markdown_table import table
from pinset.measures.kld import device_run, kld_document, reference
from pinset.commands.sides import add_side_args, check_gguf, resolve_sides
from pinset.models.pipeline import DEFAULT_TEXT
from pinset.commands.common import check_inputs, count, only_with
from pinset.output import check_outputs, console, write_json, write_text

TARGETS = ["llama-perplexity"]


def add_parser(sub):
    p = sub.add_parser("kld", help="KL divergence of base and head device paths against the CPU reference")
    add_side_args(p)
    p.add_argument("-m", "--model", type=Path, required=True, help="GGUF model (e.g. from `pinset model synth`)")
    p.add_argument("-f", "--text", type=Path, default=DEFAULT_TEXT,
                   help="text file for perplexity (default: pinset's generated prose, pinset/data/prose.txt)")
    p.add_argument("--ctx", type=count(16), default=512, help="context size (default 512)")
    p.add_argument("--chunks", type=count(1), default=16, help="chunks of --ctx tokens (default 16)")
    p.add_argument("--cpu", action="store_true",
                   help="device path = CPU too (-ngl 0, CUDA hidden): for tests and machines without a GPU")
    p.add_argument("-ngl", "--gpu-layers", type=count(0), default=99, help="layers on the device (default 99)")
    p.add_argument("-t", "--threads", type=count(1), help="threads for llama-perplexity")
    p.add_argument("--json", type=Path, help="write the kld JSON here")
    p.add_argument("--markdown", type=Path, help="write a markdown table here")
    p.add_argument("--log-dir", type=Path, help="keep the llama-perplexity command lines and output here")
    return p


def run(args) -> int:
    check_outputs({"--json": args.json, "--markdown": args.markdown}, {"--log-dir": args.log_dir},
                  inputs=[p for p in (args.model, args.text, args.config) if p])
    check_inputs({"--model": args.model, "--text": args.text})
    only_with("the device (not --cpu, which runs -ngl 0)", not args.cpu,
              {"-ngl/--gpu-layers": args.gpu_layers not in (0, 99)})   # 0: what --cpu runs, said again
    check_gguf({"--model": args.model})
    base, head, store = resolve_sides(args, TARGETS, cpu=args.cpu, replaced=[args.json, args.markdown])
    console.print(f"reference: CPU, {base.label} build, ctx {args.ctx}, {args.chunks} chunks")
    ref = reference(base, args.model, args.text, args.ctx, args.chunks, store, threads=args.threads,
                    log_dir=args.log_dir)
    if ref.cached:
        console.print(f"  [dim]cached reference {ref.key}[/]")
    runs = []
    for side in (base, head):
        console.print(f"{side.label}: --kl-divergence on {'CPU' if args.cpu else 'the device'}")
        runs.append(device_run(side, args.model, ref, args.ctx, args.chunks, cpu=args.cpu,
                               gpu_layers=args.gpu_layers, threads=args.threads, log_dir=args.log_dir))
    doc = kld_document(args.model, args.text, args.ctx, args.chunks, ref, runs,
                       host={**host_identity(), "gpu_class": args.gpu_class})
    console.print(kld_table(doc))
    for r in doc["runs"]:
        if not r["ok"]:
            console.print(f"  [red]{r['label']}[/]: {r['detail']}")
    v = doc["verdict"]
    colour = "green" if doc["ok"] else "red"
    device = ", ".join(sorted({r["backend"] for r in doc["runs"]}))
    console.print(f"[{colour}]head is {v['text']}[/] (device: {device})" if v["sigma"] is not None
                  else f"[red]{v['text']}[/] (device: {device})")
    if args.json:
        write_json(args.json, doc)
    if args.markdown:
        write_text(args.markdown, kld_markdown(doc))
    return 0 if doc["ok"] else 1


def _fmt(x, spec=".5g"):
    return "—" if x is None else format(x, spec)


def _rows(doc):
    for r in doc["runs"]:
        k = r["kld"] or {}
        yield [r["label"], r["backend"], r["commit"][:12],
               f"{_fmt(r['ppl'] and r['ppl']['value'], '.4f')} ± {_fmt(r['ppl'] and r['ppl']['err'], '.4f')}",
               f"{_fmt(k.get('mean'))} ± {_fmt(k.get('err'))}", _fmt(k.get("median")), _fmt(k.get("p99_9")),
               f"{_fmt(r['same_top_p'] and r['same_top_p']['value'], '.3f')} %",
               f"{_fmt(r['rms_dp'] and r['rms_dp']['value'], '.3f')} %", "ok" if r["ok"] else "FAILED"]


HEADERS = ["run", "backend", "commit", "PPL", "mean KLD", "median KLD", "99.9 % KLD", "same top p", "RMS Δp", "status"]


def kld_table(doc) -> Table:
    t = Table(title=f"pinset kld: {doc['model']['name']} (ctx {doc['ctx']}, {doc['chunks']} chunks, vs CPU)")
    for h in HEADERS:
        t.add_column(h)
    for row in _rows(doc):
        t.add_row(*row)
    return t


def kld_markdown(doc) -> str:
    v = doc["verdict"]
    lines = [f"### KL divergence vs CPU: {doc['model']['name']}", "",
             f"Reference: CPU backend, {doc['reference']['build']} ({doc['reference']['commit'][:12]}); "
             f"ctx {doc['ctx']}, {doc['chunks']} chunks of `{Path(doc['text']['path']).name}`.", "",
             *table(HEADERS, _rows(doc))]
    lines.append("")
    if v["sigma"] is not None:
        lines.append(f"**Verdict:** head is {v['text']} (head − base mean KLD = {v['head_minus_base_kld']:.3g}"
                     f" ± {v['sigma']:.2g}; device: {', '.join(sorted({r['backend'] for r in doc['runs']}))}).")
    else:
        lines.append(f"**Verdict:** {v['text']}.")
    return "\n".join(lines) + "\n"
