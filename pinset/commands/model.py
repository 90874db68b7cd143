"""`pinset model synth`: a random-weight GGUF of a real architecture's shape, quantized by a build's own tools
or written directly in the target type (full-size models)."""

from __future__ import annotations

import glob
import json
import shutil
from pathlib import Path

from pinset.build.programs import LlamaBin
from pinset.commands.common import add_cache_arg, check_inputs, count, cuda_architectures, pins_read_unless
from pinset.commands.paths import INPUT_FILE, INPUT_FOLDER, OUTPUT_FILE, OUTPUT_FOLDER, add_path
from pinset.errors import PinsetError
from pinset.models.pipeline import (
    AUTO_DIRECT_F16_BYTES,
    DEFAULT_TEXT,
    METHODS,
    SynthSettings,
    choose_method,
    synthesize,
)
from pinset.models.synth import ARCHS, DIRECT_QUANTS, OTHER_QUANTS, PRESETS, preset
from pinset.output import console, write_json
from pinset.results import SCHEMAS

OVERRIDES = [("layers", "n_layer"), ("embd", "n_embd"), ("heads", "n_head"), ("heads-kv", "n_head_kv"),
             ("head-dim", "head_dim"), ("ff", "n_ff"), ("experts", "n_expert"), ("experts-used", "n_expert_used"),
             ("expert-ff", "expert_ff")]


def add_parser(sub):
    p = sub.add_parser("model")
    verbs = p.add_subparsers(dest="model_verb", metavar="VERB")
    verbs.required = True
    s = verbs.add_parser(
        "synth", help="write a random-weight GGUF: quantized by the build's tools, or directly (full size)",
        description="sizes:\n" + "\n".join(f"  {a} {z}: {sh.describe()}" for (a, z), sh in PRESETS.items()) + f"""

methods:
  quantize  F16 model -> llama-imatrix -> llama-quantize of a build (--bin or -c): the exact bytes that
            llama.cpp makes; any llama-quantize type; for small models (CI)
  direct    random valid blocks written straight in the target type ({', '.join(DIRECT_QUANTS)}), no F16
            file, no imatrix, no build: a 48-layer a3b IQ1_M (~8 GB) in a minute or two. Recipe: the FFN
            weights (ffn_gate/up/down_exps, or a dense model's ffn_gate/up/down) in --quant; token_embd,
            output and attention in --other-quant (Q8_0); norms and the router ffn_gate_inp in F32.
            Weights dequantize to the same standard deviations as the F16 model's.
  auto      direct when the F16 layers would exceed {AUTO_DIRECT_F16_BYTES >> 30} GiB and --quant is a direct
            type (e.g. --size a3b), else quantize (default)""")
    s.add_argument("--arch", choices=ARCHS, required=True, help="architecture whose tensor names and shapes are used")
    s.add_argument("--size", required=True, help="a named size (see above)")
    s.add_argument("--quant", default="IQ1_M", help="llama-quantize type (IQ1_M, IQ1_S, Q4_K_M, F16...; default IQ1_M)")
    s.add_argument("--method", choices=METHODS, default="auto", help="how the quantized model is made (see above)")
    s.add_argument("--direct", dest="method", action="store_const", const="direct", help="same as --method direct")
    s.add_argument("--other-quant", choices=OTHER_QUANTS,
                   help="direct only: type of token_embd, output and attention (default Q8_0)")
    add_path(s, "--bin", role=INPUT_FOLDER, type=Path, help="folder with llama-imatrix and llama-quantize (build/bin); "
                                                            "default: the base build of -c/--build; not needed by direct")
    add_path(s, "-c", "--config", role=INPUT_FILE, derived=pins_read_unless("bin", "llama_tree"), default=None,
             help="pin set file: use (and build) its bare build's tools")
    s.add_argument("--build", help="which build of pins.yaml (default: the first)")
    add_cache_arg(s, help="cache folder")
    s.add_argument("--cuda", action="store_true", help="with -c: build with CUDA (for -ngl > 0 imatrix)")
    s.add_argument("--cuda-architectures", type=cuda_architectures, help="with -c --cuda: CMAKE_CUDA_ARCHITECTURES")
    s.add_argument("-j", "--jobs", type=count(1), help="with -c: build jobs")
    add_path(s, "-o", "--out", role=OUTPUT_FOLDER, type=Path, required=True, help="output folder")
    s.add_argument("--name", help="file name stem (default synth-<arch>-<size>)")
    add_path(s, "--vocab", role=INPUT_FILE,
             help="tokenizer: models/ggml-vocab-<NAME>.gguf of the llama.cpp tree, or a GGUF path")
    add_path(s, "--llama-tree", role=INPUT_FOLDER, type=Path,
             help="llama.cpp source tree (for models/ vocab files and gguf-py); "
                  "default: $PINSET_LLAMA_TREE or the tree above --bin")
    s.add_argument("--tie-embeddings", action="store_const", const=True, default=None,
                   help="share token_embd as the output matrix")
    for flag, field in OVERRIDES:
        s.add_argument(f"--{flag}", type=count(0 if flag.startswith("expert") else 1), dest=field,
                       help=f"override {field}")
    s.add_argument("--seed", type=count(0), default=0, help="random seed of the weights (default 0)")
    add_path(s, "-f", "--text", role=INPUT_FILE, type=Path, default=DEFAULT_TEXT,
             help="text for llama-imatrix (default: pinset prose)")
    s.add_argument("--imatrix-chunks", type=count(1), default=8, help="llama-imatrix chunks (default 8)")
    s.add_argument("-ngl", "--gpu-layers", type=count(0), default=0, help="layers on the GPU for llama-imatrix (default 0)")
    s.add_argument("-t", "--threads", type=count(1), help="threads for generation, imatrix and quantize")
    s.add_argument("--force", action="store_true", help="rebuild even if the same recipe exists")
    s.add_argument("--drop-f16", action="store_true", help="delete the F16 file after quantizing")
    add_path(s, "--json", role=OUTPUT_FILE, type=Path, help="write a description of the model here")
    return p


def _check_room(out: Path, existing: Path, shape, method: str, name: str) -> None:
    """A shape the disk under --out cannot hold (`--layers 100000000`) is bad input, not hours of writing
    that end in a full disk. The bound is low on purpose: 1.5 bits a layer weight (IQ1_S), 16 for F16.
    The models of this name already in --out count as room (a same recipe is reused, another replaces them):
    the nightly's repeated synth of a large model on a nearly full disk is no bad input."""
    need = shape.layer_params() * (16 if method == "quantize" else 1.5) / 8
    ours = [p for p in out.glob(f"{glob.escape(name)}-*.gguf") if p.is_file()] if out.is_dir() else []
    free = shutil.disk_usage(existing).free + sum(p.stat().st_size for p in ours)
    if need > free:
        raise PinsetError(f"--out {out}: {shape.describe()} needs at least {need / 1e9:,.1f} GB, "
                          f"{free / 1e9:,.1f} GB free there")


def run(args) -> int:
    if args.model_verb != "synth":
        raise PinsetError(f"unknown model verb {args.model_verb}")
    check_inputs({"--text": args.text})
    overrides = {field: getattr(args, field) for _, field in OVERRIDES}
    if args.vocab:
        overrides["vocab"] = args.vocab
    if args.tie_embeddings is not None:
        overrides["tie_embeddings"] = True
    shape = preset(args.arch, args.size, **overrides)
    method = choose_method(args.method, args.quant, shape)
    if args.other_quant and method != "direct":
        raise PinsetError("--other-quant: only for --method direct (this model is made by llama-quantize, "
                          "which picks those types itself)")
    trees = [args.llama_tree] if args.llama_tree else []
    tools = None
    if args.bin is not None:
        if not args.bin.is_dir():
            raise PinsetError(f"--bin {args.bin}: not a folder")
        tools = LlamaBin(args.bin.resolve())
    elif args.config:
        from pinset.commands.sides import built_base

        # direct needs only the base tree (vocab files, gguf-py): llama-quantize is the smallest cached build
        needed = ["llama-imatrix", "llama-quantize"] if method == "quantize" else ["llama-quantize"]
        side = built_base(args, needed, cuda=args.cuda, gpu_hint="drop --cuda")
        tools = LlamaBin(side.bin_dir.resolve())
        trees.append(side.source_dir)
    elif method == "quantize":
        raise PinsetError("give --bin DIR (llama.cpp build/bin) or -c pins.yaml [--build B]")
    existing = args.out  # the nearest folder that is there already: what a failure leaves as it was
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    name = args.name or f"synth-{args.arch}-{args.size}"
    _check_room(args.out, existing, shape, method, name)
    console.print(f"synth {shape.describe()} -> {args.quant} ({method})")
    try:
        settings = SynthSettings(shape, args.quant, name=name, method=method, other_quant=args.other_quant or "Q8_0",
                                 seed=args.seed, text=args.text, gpu_layers=args.gpu_layers,
                                 imatrix_chunks=args.imatrix_chunks, threads=args.threads, keep_f16=not args.drop_f16,
                                 force=args.force)
        result = synthesize(settings, args.out, tools, trees=trees)
    except PinsetError:  # bad input found on the way (vocab, block sizes): nothing changed, no empty --out
        made = args.out
        while made != existing and made.is_dir() and not any(made.iterdir()):
            made.rmdir()
            made = made.parent
        raise
    doc = {"schema": SCHEMAS["model"], "kind": "model", **result.to_json()}
    cached = " (cached: same recipe)" if result.seconds.get("cached") else ""
    console.print(f"[green]{result.path}[/] {result.size_bytes / 2**20:,.1f} MiB{cached} "
                  f"{json.dumps(result.seconds)}")
    if args.json:
        write_json(args.json, doc)
    return 0
