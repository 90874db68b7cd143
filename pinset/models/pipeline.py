"""A synthetic model in a quantization, by one of two methods.

"quantize": F16 synthetic model -> importance matrix (llama-imatrix) -> quantized model (llama-quantize).
The quantization is done by the build's own tools, so the quantized bytes are exactly what that
llama.cpp would produce. IQ1_S/IQ1_M/IQ2_XXS/IQ2_XS refuse to quantize without an importance matrix;
llama-imatrix on a few chunks of any text makes one in seconds. Right for small models (CI).

"direct": random valid blocks written straight in the target type (synth.py, blocks.py): no F16
intermediate and no build needed, for full-size models whose F16 file would be tens of GB.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from pinset import runner
from pinset.build.programs import LlamaBin
from pinset.errors import PinsetError, RuntimeFailure
from pinset.models.synth import DIRECT_QUANTS, Shape, SynthResult, find_vocab, write_synthetic_gguf

# Types llama-quantize will not make without --imatrix.
NEEDS_IMATRIX = {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S"}
DEFAULT_TEXT = Path(__file__).resolve().parent.parent / "data" / "prose.txt"
METHODS = ("auto", "direct", "quantize")
# "auto" writes directly when the F16 intermediate's layers alone would exceed this (the 48-layer
# a3b: ~60 GB; the 4-layer a3b-4l: ~5 GB, still quantized by the build's tools as before).
AUTO_DIRECT_F16_BYTES = 16 << 30


def choose_method(method: str, quant: str, shape: Shape) -> str:
    """"direct" or "quantize" for the requested method (see METHODS and AUTO_DIRECT_F16_BYTES)."""
    quant = quant.upper()
    if method not in METHODS:
        raise PinsetError(f"--method {method!r}: not one of {', '.join(METHODS)}")
    if method == "direct" and quant not in DIRECT_QUANTS:
        raise PinsetError(f"--quant {quant}: not written directly (direct types: {', '.join(DIRECT_QUANTS)}); "
                          "use --method quantize")
    if method != "auto":
        return method
    big = 2 * shape.layer_params() > AUTO_DIRECT_F16_BYTES
    return "direct" if big and quant in DIRECT_QUANTS else "quantize"


@dataclass(frozen=True)
class QuantizedModel:
    path: Path
    quant: str
    f16: SynthResult | None       # method "quantize": the F16 model llama-quantize read
    imatrix: Path | None
    size_bytes: int
    seconds: dict
    method: str = "quantize"
    direct: SynthResult | None = None  # method "direct": the model as written (recipe, tensor types)

    def to_json(self) -> dict:
        return {"path": str(self.path), "quant": self.quant, "method": self.method, "size_bytes": self.size_bytes,
                "imatrix": str(self.imatrix) if self.imatrix else None,
                "f16": self.f16.to_json() if self.f16 else None,
                "direct": self.direct.to_json() if self.direct else None, "seconds": self.seconds}


def _require_ok(done: runner.Completed, what: str, log: Path | None) -> None:
    if not done.ok:
        where = f" (log: {log})" if log else ""
        raise RuntimeFailure(f"{what} failed: {done.describe()}{where}")


def make_imatrix(tools: LlamaBin, model: Path, text: Path, out: Path, *, ctx: int = 512, chunks: int = 8,
                 gpu_layers: int = 0, threads: int | None = None, log: Path | None = None,
                 env: dict | None = None) -> runner.Completed:
    argv: list[str | Path] = [tools.exe("llama-imatrix"), "-m", model, "-f", text, "-o", out, "-c", str(ctx),
            "--chunks", str(chunks), "-ngl", str(gpu_layers), "--no-ppl"]
    if threads:
        argv += ["-t", str(threads)]
    done = runner.run(argv, timeout=1800, log=log, env=env)
    _require_ok(done, "llama-imatrix", log)
    if not out.is_file():
        raise RuntimeFailure(f"llama-imatrix exited 0 but wrote no {out}" + (f" (log: {log})" if log else ""))
    return done


def quantize(tools: LlamaBin, model: Path, out: Path, quant: str, *, imatrix: Path | None = None,
             threads: int | None = None, log: Path | None = None) -> runner.Completed:
    if quant.upper() in NEEDS_IMATRIX and imatrix is None:
        raise PinsetError(f"{quant} needs an importance matrix")
    argv: list = [tools.exe("llama-quantize")]
    if imatrix is not None:
        argv += ["--imatrix", imatrix]
    tmp = out.with_name(out.name + ".part")
    argv += [model, tmp, quant]
    if threads:
        argv.append(str(threads))
    done = runner.run(argv, timeout=3600, log=log)
    _require_ok(done, "llama-quantize", log)
    os.replace(tmp, out)
    return done


@dataclass(frozen=True)
class SynthSettings:
    """What `pinset model synth` makes and how: the recipe (shape, quant, seed, method; an existing output of the
    same recipe is reused) and how llama-imatrix and llama-quantize run. The verb makes it from its options
    (commands/model.py); synthesize reads it."""

    shape: Shape
    quant: str                       # llama-quantize type (IQ1_M, Q4_K_M, F16...)
    name: str | None = None          # file name stem (default synth-<arch>)
    method: str = "auto"             # METHODS
    other_quant: str = "Q8_0"        # direct: type of token_embd, output and attention
    seed: int = 0                    # random seed of the weights
    text: Path = DEFAULT_TEXT        # llama-imatrix's text
    gpu_layers: int = 0              # llama-imatrix -ngl
    imatrix_chunks: int = 8
    imatrix_ctx: int = 512
    threads: int | None = None       # generation, imatrix and quantize
    keep_f16: bool = True            # keep the F16 file llama-quantize read
    force: bool = False              # make it again even if the same recipe exists


def synthesize(settings: SynthSettings, out_dir: Path, tools: LlamaBin | None, *, trees=()) -> QuantizedModel:
    """Write <name>-<QUANT>.gguf (+ <name>-<QUANT>.json) in out_dir; method "quantize" also leaves
    <name>-F16.gguf and <name>.imatrix.gguf there. tools (llama-imatrix, llama-quantize) are needed only
    by "quantize"; trees: llama.cpp source trees to find the vocab in (besides the tools' own).

    An existing output with the same recipe (shape, seed, quant, vocab, method) is reused unless settings.force.
    """
    s = settings
    shape, seed, other_quant, threads = s.shape, s.seed, s.other_quant, s.threads
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    quant = s.quant.upper()
    method = choose_method(s.method, quant, shape)
    if method == "quantize" and tools is None:
        raise PinsetError(f"{quant} by llama-quantize needs a build: give --bin DIR or -c pins.yaml "
                          f"(or --method direct for {', '.join(DIRECT_QUANTS)})")
    name = s.name or f"synth-{shape.arch}"
    f16_path = out_dir / f"{name}-F16.gguf"
    q_path = out_dir / f"{name}-{quant}.gguf"
    meta_path = out_dir / f"{name}-{quant}.json"
    log = out_dir / f"{name}-{quant}.log"
    trees = list(trees) + ([tools.bin_dir] if tools else [])
    vocab_path = find_vocab(shape.vocab, trees)
    recipe = {"shape": shape.__dict__, "seed": seed, "quant": quant, "vocab": str(vocab_path), "method": method}
    if method == "direct":
        recipe["other_quant"] = other_quant.upper()
    if not s.force and q_path.is_file() and meta_path.is_file():
        old = json.loads(meta_path.read_text())
        if {"method": "quantize", **old.get("recipe", {})} == recipe:  # files before "method" were quantized
            return QuantizedModel(q_path, quant, None, Path(old["imatrix"]) if old.get("imatrix") else None,
                                  q_path.stat().st_size, {"cached": True}, method)
    if log.exists():
        log.unlink()
    seconds = {}
    t0 = time.monotonic()
    if method == "direct":
        written = write_synthetic_gguf(shape, q_path, vocab_path=vocab_path, seed=seed, name=name, trees=trees,
                                       threads=threads, quant=quant, other_quant=other_quant)
        seconds["write_direct"] = round(time.monotonic() - t0, 1)
        result = QuantizedModel(q_path, quant, None, None, written.size_bytes, seconds, method, written)
        meta_path.write_text(json.dumps({"recipe": recipe, **result.to_json()}, indent=2) + "\n")
        return result
    f16 = write_synthetic_gguf(shape, f16_path, vocab_path=vocab_path, seed=seed, name=name,
                               trees=trees, threads=threads)
    seconds["write_f16"] = round(time.monotonic() - t0, 1)
    imatrix = None
    if quant == "F16":
        q_path = f16_path
    else:
        assert tools is not None   # refused above: quantizing needs the tools
        if quant in NEEDS_IMATRIX:
            imatrix = out_dir / f"{name}.imatrix.gguf"
            t0 = time.monotonic()
            make_imatrix(tools, f16_path, Path(s.text), imatrix, ctx=s.imatrix_ctx, chunks=s.imatrix_chunks,
                         gpu_layers=s.gpu_layers, threads=threads, log=log)
            seconds["imatrix"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        quantize(tools, f16_path, q_path, quant, imatrix=imatrix, threads=threads, log=log)
        seconds["quantize"] = round(time.monotonic() - t0, 1)
        if not s.keep_f16:
            f16_path.unlink()
    result = QuantizedModel(q_path, quant, f16, imatrix, q_path.stat().st_size, seconds, method)
    meta_path.write_text(json.dumps({"recipe": recipe, **result.to_json()}, indent=2) + "\n")
    return result
