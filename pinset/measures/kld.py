"""KL divergence of base and head device paths against the CPU reference of the same GGUF.

Methodology (the seed's): the reference is the model run on the CPU backend (CUDA_VISIBLE_DEVICES=
and -ngl 0) with --kl-divergence-base, which saves its log-probabilities; then base's and head's device
paths run --kl-divergence against that file with the same context size and chunks. A pin that changes
a device kernel should leave head "as close to the CPU result as base".

The reference is cached per (model identity, text, ctx, chunks, reference build commit) in
store.dir("kld-ref"): it is the slow, device-independent part. The result model and the verdict rule live in
kld_model.py; the markdown in kld_render.py.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pinset import runner
from pinset.checks.nvidia_smi import gpu_order_env
from pinset.errors import RuntimeFailure
from pinset.measures.kld_model import (
    FURTHER,
    KldModelFile,
    KldReference,
    KldResult,
    KldRun,
    KldStats,
    KldText,
    KldVerdict,
    verdict_from_klds,
)
from pinset.measures.perplexity import (
    CUT_WHY,
    PerplexityOutput,
    base_problem,
    chunk_counter,
    cut_short,
    kld_problem,
    parse_perplexity,
)
from pinset.measures.sides import Side, with_build_identity
from pinset.progress import SPINNER, Progress
from pinset.store import file_sha256

CPU_ENV = {"CUDA_VISIBLE_DEVICES": ""}
# runs of one step while its output was cut short at exit (perplexity.cut_short): the computation is the same
# each time, only what llama.cpp's log thread wrote before the process ended differs
ATTEMPTS = 3
# llama.cpp prints its `using device CUDA0 (NVIDIA H200)` line only at log verbosity 4 (common/log.h:
# llama's INFO messages are TRACE to the tool); without it a run cannot show which device it used.
DEVICE_LOG = ["-lv", "4"]


def model_identity(path: Path) -> str:
    """Size + mtime + name: hashing a multi-GB GGUF every run would cost more than the KLD itself."""
    st = path.stat()
    return f"{path.resolve()}:{st.st_size}:{int(st.st_mtime)}"


@dataclass(frozen=True)
class Reference:
    logits: Path
    output: PerplexityOutput
    cached: bool
    key: str
    build: str
    commit: str


@dataclass(frozen=True)
class DeviceRun:
    label: str
    side: Side
    backend: str
    output: PerplexityOutput
    returncode: int | None
    problem: str | None
    seconds: float
    runs: int = 1        # llama-perplexity runs made (run_until_whole)

    @property
    def ok(self) -> bool:
        return self.problem is None


def run_until_whole(run_once, *, reference: bool, gpu: bool = False,
                    on_retry=None) -> tuple[runner.Completed, PerplexityOutput, int]:
    """run_once() (a llama-perplexity run) made again, up to ATTEMPTS times, while its output was cut short at
    exit; the last run, its parsed output and the number of runs made (a run cut every time stays what it is: a
    run without a result). reference: a run whose result is the final estimate (--kl-divergence-base, plain
    perplexity); gpu: the run claims a GPU (perplexity.cut_short). on_retry(attempt, why): before each new run."""
    attempt = 1
    while True:
        done = run_once()
        out = parse_perplexity(done.stdout, done.stderr)
        if attempt == ATTEMPTS or not cut_short(out, done.returncode, reference=reference, gpu=gpu):
            return done, out, attempt
        attempt += 1
        if on_retry:
            on_retry(attempt, f"the output ended before its result (exit 0): {CUT_WHY}")


def reference(side: Side, model: Path, text: Path, ctx: int, chunks: int, store, *, threads: int | None = None,
              extra: Sequence[str] = (), log_dir: Path | None = None, on_retry=None) -> Reference:
    key_parts = [model_identity(model), file_sha256(text), str(ctx), str(chunks), side.commit,
                 str(side.bin_dir) if side.pinset is None else "", " ".join(extra)]   # a folder: any local build
    key = hashlib.sha256("\0".join(key_parts).encode(errors="surrogateescape")).hexdigest()[:16]
    folder = store.dir("kld-ref", key)
    logits, meta = folder / "logits.bin", folder / "reference.json"
    if (out := _cached_reference(logits, meta)) is not None:
        return Reference(logits, out, True, key, side.build, side.commit)
    tmp = folder / "logits.bin.part"
    argv = [side.exe("llama-perplexity"), "-m", model, "-f", text, "-c", str(ctx), "--chunks", str(chunks),
            "-ngl", "0", "--kl-divergence-base", tmp, *DEVICE_LOG, *extra]
    if threads:
        argv += ["-t", str(threads)]
    log = (log_dir / "kld-reference.log") if log_dir else folder / "reference.log"

    def run_once() -> runner.Completed:
        tmp.unlink(missing_ok=True)
        # llama-perplexity writes its `[1]…,[2]…` chunk values on one line, ended only after the last chunk:
        # the elapsed time is what can be shown while it runs.
        with Progress(f"KLD reference on CPU ({chunks} chunks of {ctx})", kind=SPINNER):
            return runner.run(argv, env=CPU_ENV, timeout=7200, log=log)

    done, out, _ = run_until_whole(run_once, reference=True,
                                   on_retry=on_retry and (lambda n, why: on_retry(None, n, why)))
    problem = base_problem(out, done.returncode)
    if problem is None and not tmp.is_file():
        problem = "no logits file written"
    if problem:
        tmp.unlink(missing_ok=True)
        raise RuntimeFailure(f"CPU reference run failed: {problem} (log: {log})")
    os.replace(tmp, logits)
    meta.write_text(json.dumps({"key_parts": key_parts, "argv": list(done.argv), "stdout": done.stdout,
                                "stderr": done.stderr}, indent=1) + "\n")
    return Reference(logits, out, False, key, side.build, side.commit)


def _cached_reference(logits: Path, meta: Path) -> PerplexityOutput | None:
    """The cached reference run's output, or None when the cache holds none or a damaged one (a cut or
    edited reference.json, an empty logits file, output that no longer passes): then it is made again."""
    try:
        data = json.loads(meta.read_text())
        out = parse_perplexity(data["stdout"], data["stderr"])
        if logits.stat().st_size == 0 or base_problem(out, 0) is not None:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return out


def device_run(side: Side, model: Path, ref: Reference, ctx: int, chunks: int, *, cpu: bool,
               gpu_layers: int = 99, threads: int | None = None, extra: Sequence[str] = (),
               log_dir: Path | None = None, on_retry=None) -> DeviceRun:
    ngl = "0" if cpu else str(gpu_layers)
    argv: list[str | Path] = [side.exe("llama-perplexity"), "-m", model, "-c", str(ctx), "--chunks", str(chunks),
                              "-ngl", ngl, "--kl-divergence-base", ref.logits, "--kl-divergence", *DEVICE_LOG, *extra]
    if threads:
        argv += ["-t", str(threads)]

    def run_once() -> runner.Completed:
        with Progress(f"KLD {side.label} on {'CPU' if cpu else 'GPU'}", unit="chunks", total=chunks) as shown:
            return runner.run_streaming(argv, env=CPU_ENV if cpu else gpu_order_env(), timeout=7200,
                                        merge_stderr=False, on_line=chunk_counter(shown),
                                        log=(log_dir / f"kld-{side.label}.log") if log_dir else None)

    done, out, runs = run_until_whole(run_once, reference=False, gpu=not cpu,
                                      on_retry=on_retry and (lambda n, why: on_retry(side, n, why)))
    backend = "CPU" if cpu else (out.devices[0].split()[0] if out.devices else "unknown")
    return DeviceRun(side.label, side, backend, out, done.returncode, kld_problem(out, done.returncode, gpu=not cpu),
                     done.seconds, runs)


def unlike_runs(base: DeviceRun, head: DeviceRun) -> str | None:
    """Why base's and head's runs did not run alike (None when they did): another device, or another share of
    the layers offloaded (a head that left layers on the CPU is closer to the CPU reference for that alone)."""
    shown = lambda run: ", ".join(run.output.devices) or "the CPU"  # noqa: E731
    if base.output.devices != head.output.devices:
        return f"base ran on {shown(base)}, head on {shown(head)}"
    if base.output.offloaded != head.output.offloaded:
        layers = lambda run: "/".join(map(str, run.output.offloaded)) if run.output.offloaded else "an unknown number of"  # noqa: E731
        return f"base offloaded {layers(base)} layers to the GPU, head {layers(head)}"
    return None


def verdict(base: DeviceRun, head: DeviceRun) -> KldVerdict:
    """Head's mean KLD vs base's (verdict_from_klds), when both runs ran, and alike."""
    if not (base.ok and head.ok):
        return KldVerdict.no_verdict("a KLD run failed")
    if unlike := unlike_runs(base, head):
        return KldVerdict.no_verdict(unlike)
    assert base.output.kld is not None and head.output.kld is not None   # both ok: both measured
    b, h = base.output.kld.kld_mean, head.output.kld.kld_mean
    return verdict_from_klds(b.value, b.err, h.value, h.err)


def run_result(run: DeviceRun) -> KldRun:
    k = run.output.kld
    ppl = k.ppl_q if k else run.output.final_ppl
    return KldRun(
        run.label, run.side.build, run.side.commit, run.backend, run.ok, run.problem,
        ppl or None,
        (KldStats(k.kld_mean.value, k.kld_mean.err, k.kld_median, k.kld_percentiles.get("99.0"),
                  k.kld_percentiles.get("99.9"), k.kld_percentiles.get("max")) if k else None),
        k.same_top_p_pct if k else None, k.rms_dp_pct if k else None,
        k.ln_ppl_ratio if k and k.ln_ppl_ratio else None, run.seconds, list(run.output.devices), run.runs)


def kld_document(model: Path, text: Path, ctx: int, chunks: int, ref: Reference, runs: list[DeviceRun],
                 host: dict | None = None) -> dict:
    """The kld JSON of kld_result."""
    return kld_result(model, text, ctx, chunks, ref, runs, host).to_json()


def kld_result(model: Path, text: Path, ctx: int, chunks: int, ref: Reference, runs: list[DeviceRun],
               host: dict | None = None) -> KldResult:
    base = next(r for r in runs if r.label == "base")
    head = next(r for r in runs if r.label == "head")
    v = verdict(base, head)
    ok = base.ok and head.ok and v.sigma is not None and v.text != FURTHER
    return KldResult(
        ok, KldModelFile(str(model), model.name, model.stat().st_size), KldText(str(text), file_sha256(text)),
        ctx, chunks,
        KldReference("CPU", ref.build, ref.commit, ref.cached, ref.key,
                     ref.output.final_ppl or None),
        [run_result(r) for r in runs], v, host, head.side.pinset)


@dataclass(frozen=True)
class KldSettings:
    """What one kld measures and where: the model, the text and how much of it, the device path. The verb makes it
    from its options (commands/kld.py); run_kld reads it."""

    model: Path
    text: Path                       # the text llama-perplexity reads
    ctx: int = 512                   # context size
    chunks: int = 16                 # chunks of ctx tokens
    cpu: bool = False                # device path = CPU too (-ngl 0, CUDA hidden): machines without a GPU
    gpu_layers: int = 99             # layers on the device
    threads: int | None = None       # llama-perplexity -t
    log_dir: Path | None = None      # where every command line and output is kept
    host: dict | None = None         # checks.machine.host_identity() with the cell's gpu_class


def run_kld(base: Side, head: Side, settings: KldSettings, store, *, on_reference=None, on_run=None,
            on_retry=None) -> KldResult:
    """The whole kld: the CPU reference (cached in `store`), base's and head's device runs against it, and the kld
    result. Explicit folders without --*-commit record the commit their llama-perplexity reports (--version): the
    build identity bench records from llama-bench, so kld and bench of the same folders merge in the report.
    on_reference(side) / on_run(side): progress, before each step; on_retry(side or None for the reference,
    attempt, why): before a step is run again (its output was cut short at exit)."""
    s = settings
    base, head = (with_build_identity(side, "llama-perplexity") for side in (base, head))
    if on_reference:
        on_reference(base)
    ref = reference(base, s.model, s.text, s.ctx, s.chunks, store, threads=s.threads, log_dir=s.log_dir,
                    on_retry=on_retry)
    runs = []
    for side in (base, head):
        if on_run:
            on_run(side, ref)
        runs.append(device_run(side, s.model, ref, s.ctx, s.chunks, cpu=s.cpu, gpu_layers=s.gpu_layers,
                               threads=s.threads, log_dir=s.log_dir, on_retry=on_retry))
    return kld_result(s.model, s.text, s.ctx, s.chunks, ref, runs, host=s.host)
