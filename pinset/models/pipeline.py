"""F16 synthetic model -> importance matrix (llama-imatrix) -> quantized model (llama-quantize).

The quantization is done by the build's own tools, so the quantized bytes are exactly what that
llama.cpp would produce. IQ1_S/IQ1_M/IQ2_XXS/IQ2_XS refuse to quantize without an importance matrix;
llama-imatrix on a few chunks of any text makes one in seconds.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pinset import runner
from pinset.build.programs import LlamaBin
from pinset.errors import PinsetError, RuntimeFailure
from pinset.models.synth import Shape, SynthResult, find_vocab, write_synthetic_gguf

# Types llama-quantize will not make without --imatrix.
NEEDS_IMATRIX = {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S"}
DEFAULT_TEXT = Path(__file__).resolve().parent.parent / "data" / "prose.txt"


@dataclass(frozen=True)
class QuantizedModel:
    path: Path
    quant: str
    f16: SynthResult | None
    imatrix: Path | None
    size_bytes: int
    seconds: dict

    def to_json(self) -> dict:
        return {"path": str(self.path), "quant": self.quant, "size_bytes": self.size_bytes,
                "imatrix": str(self.imatrix) if self.imatrix else None,
                "f16": self.f16.to_json() if self.f16 else None, "seconds": self.seconds}


def _require_ok(done: runner.Completed, what: str, log: Path | None) -> None:
    if not done.ok:
        where = f" (log: {log})" if log else ""
        raise RuntimeFailure(f"{what} failed: {done.describe()}{where}")


def make_imatrix(tools: LlamaBin, model: Path, text: Path, out: Path, *, ctx: int = 512, chunks: int = 8,
                 gpu_layers: int = 0, threads: int | None = None, log: Path | None = None,
                 env: dict | None = None) -> runner.Completed:
    argv = [tools.exe("llama-imatrix"), "-m", model, "-f", text, "-o", out, "-c", str(ctx),
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


def synthesize(shape: Shape, quant: str, out_dir: Path, tools: LlamaBin, *, name: str | None = None,
               text: Path = DEFAULT_TEXT, seed: int = 0, gpu_layers: int = 0, imatrix_chunks: int = 8,
               imatrix_ctx: int = 512, threads: int | None = None, trees=(), keep_f16: bool = True,
               force: bool = False) -> QuantizedModel:
    """Write <name>-F16.gguf, <name>.imatrix.gguf and <name>-<QUANT>.gguf (+ <name>-<QUANT>.json) in out_dir.

    An existing output with the same recipe (shape, seed, quant, vocab) is reused unless force.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    quant = quant.upper()
    name = name or f"synth-{shape.arch}"
    f16_path = out_dir / f"{name}-F16.gguf"
    q_path = out_dir / f"{name}-{quant}.gguf"
    meta_path = out_dir / f"{name}-{quant}.json"
    log = out_dir / f"{name}-{quant}.log"
    vocab_path = find_vocab(shape.vocab, list(trees) + [tools.bin_dir])
    recipe = {"shape": shape.__dict__, "seed": seed, "quant": quant, "vocab": str(vocab_path)}
    if not force and q_path.is_file() and meta_path.is_file():
        old = json.loads(meta_path.read_text())
        if old.get("recipe") == recipe:
            return QuantizedModel(q_path, quant, None, Path(old["imatrix"]) if old.get("imatrix") else None,
                                  q_path.stat().st_size, {"cached": True})
    if log.exists():
        log.unlink()
    import time
    seconds = {}
    t0 = time.monotonic()
    f16 = write_synthetic_gguf(shape, f16_path, vocab_path=vocab_path, seed=seed, name=name,
                               trees=list(trees) + [tools.bin_dir], threads=threads)
    seconds["write_f16"] = round(time.monotonic() - t0, 1)
    imatrix = None
    if quant == "F16":
        q_path = f16_path
    else:
        if quant in NEEDS_IMATRIX:
            imatrix = out_dir / f"{name}.imatrix.gguf"
            t0 = time.monotonic()
            make_imatrix(tools, f16_path, Path(text), imatrix, ctx=imatrix_ctx, chunks=imatrix_chunks,
                         gpu_layers=gpu_layers, threads=threads, log=log)
            seconds["imatrix"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        quantize(tools, f16_path, q_path, quant, imatrix=imatrix, threads=threads, log=log)
        seconds["quantize"] = round(time.monotonic() - t0, 1)
        if not keep_f16:
            f16_path.unlink()
    result = QuantizedModel(q_path, quant, f16, imatrix, q_path.stat().st_size, seconds)
    meta_path.write_text(json.dumps({"recipe": recipe, **result.to_json()}, indent=2) + "\n")
    return result
