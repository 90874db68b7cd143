"""KL divergence of base and head device paths against the CPU reference of the same GGUF.

Methodology (the seed's): the reference is the model run on the CPU backend (CUDA_VISIBLE_DEVICES=
and -ngl 0) with --kl-divergence-base, which saves its log-probabilities; then base's and head's device
paths run --kl-divergence against that file with the same context size and chunks. A pin that changes
a device kernel should leave head "as close to the CPU result as base".

The reference is cached per (model identity, text, ctx, chunks, reference build commit) in
store.dir("kld-ref"): it is the slow, device-independent part.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from pinset import runner
from pinset.checks.machine import read_host
from pinset.checks.nvidia_smi import gpu_order_env
from pinset.errors import RuntimeFailure
from pinset.measures.perplexity import (PerplexityOutput, base_problem, chunk_counter, kld_problem,
                                       parse_perplexity)
from pinset.measures.sides import Side, with_build_identity
from pinset.progress import SPINNER, Progress
from pinset.results import SCHEMAS, Doc
from pinset.store import file_sha256

CPU_ENV = {"CUDA_VISIBLE_DEVICES": ""}
# llama.cpp prints its `using device CUDA0 (NVIDIA H200)` line only at log verbosity 4 (common/log.h:
# llama's INFO messages are TRACE to the tool); without it a run cannot show which device it used.
DEVICE_LOG = ["-lv", "4"]
SIGMAS = 2.0  # head is "further" when its mean KLD exceeds base's by more than 2 combined std errors


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

    @property
    def ok(self) -> bool:
        return self.problem is None


def reference(side: Side, model: Path, text: Path, ctx: int, chunks: int, store, *, threads: int | None = None,
              extra: list[str] = (), log_dir: Path | None = None) -> Reference:
    key_parts = [model_identity(model), file_sha256(text), str(ctx), str(chunks), side.commit,
                 str(side.bin_dir) if side.pinset is None else "", " ".join(extra)]   # a folder: any local build
    key = hashlib.sha256("\0".join(key_parts).encode()).hexdigest()[:16]
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
    # llama-perplexity writes its `[1]…,[2]…` chunk values on one line, ended only after the last chunk:
    # the elapsed time is what can be shown while it runs.
    with Progress(f"KLD reference on CPU ({chunks} chunks of {ctx})", kind=SPINNER):
        done = runner.run(argv, env=CPU_ENV, timeout=7200, log=log)
    out = parse_perplexity(done.stdout, done.stderr)
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
               gpu_layers: int = 99, threads: int | None = None, extra: list[str] = (),
               log_dir: Path | None = None) -> DeviceRun:
    ngl = "0" if cpu else str(gpu_layers)
    argv = [side.exe("llama-perplexity"), "-m", model, "-c", str(ctx), "--chunks", str(chunks), "-ngl", ngl,
            "--kl-divergence-base", ref.logits, "--kl-divergence", *DEVICE_LOG, *extra]
    if threads:
        argv += ["-t", str(threads)]
    with Progress(f"KLD {side.label} on {'CPU' if cpu else 'GPU'}", unit="chunks", total=chunks) as shown:
        done = runner.run_streaming(argv, env=CPU_ENV if cpu else gpu_order_env(), timeout=7200, merge_stderr=False,
                                    on_line=chunk_counter(shown),
                                    log=(log_dir / f"kld-{side.label}.log") if log_dir else None)
    out = parse_perplexity(done.stdout, done.stderr)
    backend = "CPU" if cpu else (out.devices[0].split()[0] if out.devices else "unknown")
    return DeviceRun(side.label, side, backend, out, done.returncode, kld_problem(out, done.returncode, gpu=not cpu),
                     done.seconds)


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


VERDICTS = ("further from the CPU result than base", "closer to the CPU result than base",
            "as close to the CPU result as base")
FURTHER = VERDICTS[0]


def verdict_from_klds(base_mean: float, base_err: float, head_mean: float, head_err: float) -> dict:
    """The rule: head's mean KLD vs base's, with their ± uncertainties combined in quadrature; "further"/"closer"
    beyond SIGMAS of them. The producer's verdict and the one the report re-derives from a file's per-run KLDs
    (KldResult.rederived_verdict) both come from here."""
    diff = head_mean - base_mean
    sigma = math.hypot(head_err, base_err)
    if diff > SIGMAS * sigma:
        text = FURTHER
    elif diff < -SIGMAS * sigma:
        text = "closer to the CPU result than base"
    else:
        text = "as close to the CPU result as base"
    return {"text": text, "head_minus_base_kld": diff, "sigma": sigma,
            "sigmas": (diff / sigma) if sigma > 0 else None}


def verdict(base: DeviceRun, head: DeviceRun) -> dict:
    """Head's mean KLD vs base's (verdict_from_klds), when both runs ran, and alike."""
    if not (base.ok and head.ok):
        return {"text": "no verdict: a KLD run failed", "head_minus_base_kld": None, "sigma": None}
    if unlike := unlike_runs(base, head):
        return {"text": f"no verdict: {unlike}", "head_minus_base_kld": None, "sigma": None}
    b, h = base.output.kld.kld_mean, head.output.kld.kld_mean
    return verdict_from_klds(b.value, b.err, h.value, h.err)


# --- the result model (kind "kld"): written by `pinset kld`, read by `pinset report` ---------------------
def _value_err(d: Doc, key: str) -> dict | None:
    """{"value", "err"} of a statistic; null (or NaN/inf in either number) when it was not measured."""
    v = d.obj(key, null=True, default=None)
    if v is None:
        return None
    value, err = v.num("value", null=True), v.num("err", null=True)
    return None if value is None or err is None else {"value": value, "err": err}


KLD_STATS = ("mean", "err", "median", "p99", "p99_9", "max")


@dataclass
class KldRun:
    """One llama-perplexity --kl-divergence run. Statistics are None where nothing was measured (a failed run)."""

    label: str
    build: str
    commit: str
    backend: str                 # "CPU" for a CPU-against-CPU run, else the device llama-perplexity used
    ok: bool
    detail: str | None = None
    ppl: dict | None = None      # {"value", "err"}
    kld: dict | None = None      # KLD_STATS; a member is None where llama-perplexity did not print it
    same_top_p: dict | None = None
    rms_dp: dict | None = None
    ln_ppl_ratio: dict | None = None
    seconds: float = 0.0
    devices: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"label": self.label, "build": self.build, "commit": self.commit, "backend": self.backend,
                "ppl": self.ppl, "kld": self.kld, "same_top_p": self.same_top_p, "rms_dp": self.rms_dp,
                "ln_ppl_ratio": self.ln_ppl_ratio, "units": {"same_top_p": "%", "rms_dp": "%"},
                "ok": self.ok, "detail": self.detail, "seconds": round(self.seconds, 1), "devices": list(self.devices)}

    @classmethod
    def from_json(cls, d: Doc) -> KldRun:
        k = d.obj("kld", null=True)
        kld = None
        if k is not None:
            kld = {name: k.num(name, null=True, default=None) for name in KLD_STATS}
            if kld["mean"] is None or kld["err"] is None:
                kld = None  # no mean with its error: not a measurement
        ok = d.get("ok", bool)
        return cls(d.get("label", str), d.get("build", str), d.get("commit", str), d.get("backend", str),
                   ok and kld is not None, d.get("detail", str, None) or (None if kld is not None or not ok
                                                                          else "no mean KLD in the result"),
                   _value_err(d, "ppl"), kld, _value_err(d, "same_top_p"), _value_err(d, "rms_dp"),
                   _value_err(d, "ln_ppl_ratio"), d.num("seconds", null=True, default=0.0) or 0.0,
                   d.strs("devices", default=[]))


@dataclass
class KldResult:
    ok: bool
    model: dict                  # {"path", "name", "size_bytes"}
    text: dict                   # {"path", "sha256"}
    ctx: int
    chunks: int
    reference: dict              # {"backend": "CPU", "build", "commit", "cached", "key", "ppl"}
    runs: list[KldRun]
    verdict: dict                # {"text", "head_minus_base_kld", "sigma", "sigmas"}; numbers None without a verdict
    host: dict | None = None     # read_host(): host, visible GPU UUIDs, CI runner, GPU class; None in older files
    pinset: str | None = None    # the pin set's digest (built from pins.yaml); None: explicit folders, older files

    @property
    def device(self) -> str:
        """Where the runs under test ran: "CPU" when every one ran on the CPU (CPU against CPU)."""
        backends = sorted({r.backend for r in self.runs})
        return ", ".join(backends) if backends else "none"

    def run(self, label: str) -> KldRun | None:
        return next((r for r in self.runs if r.label == label), None)

    def rederived_verdict(self) -> dict | None:
        """The verdict the rule gives on this file's own per-run KLDs (verdict_from_klds); None when base's or
        head's run has no mean KLD with its error (no verdict to re-derive)."""
        base, head = self.run("base"), self.run("head")
        if not (base and head and base.ok and head.ok and base.kld and head.kld):
            return None
        return verdict_from_klds(base.kld["mean"], base.kld["err"], head.kld["mean"], head.kld["err"])

    def verdict_contradiction(self) -> str | None:
        """Why the recorded verdict is not what the per-run KLDs give (an edited file: "as close" over runs whose
        KLDs say "further"); None when it is, or when there is no verdict to re-derive."""
        again = self.rederived_verdict()
        if again is None or self.verdict.get("text", "").startswith("no verdict"):
            return None
        if again["text"] != self.verdict["text"]:
            return (f"recorded \"{self.verdict['text']}\", but the runs' mean KLDs give \"{again['text']}\" "
                    f"(head − base {again['head_minus_base_kld']:.4g} ± {again['sigma']:.2g})")
        diff = self.verdict.get("head_minus_base_kld")
        if diff is None or not math.isclose(diff, again["head_minus_base_kld"], rel_tol=1e-6, abs_tol=1e-12):
            return f"recorded head − base {diff} but the runs' mean KLDs give {again['head_minus_base_kld']:.6g}"
        return None

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["kld"], "kind": "kld", "ok": self.ok, "model": dict(self.model),
                "text": dict(self.text), "ctx": self.ctx, "chunks": self.chunks, "reference": dict(self.reference),
                "runs": [r.to_json() for r in self.runs], "verdict": dict(self.verdict),
                **({"host": dict(self.host)} if self.host else {}), **({"pinset": self.pinset} if self.pinset else {})}

    @classmethod
    def from_json(cls, d: Doc) -> KldResult:
        m, t, ref, v = d.obj("model"), d.obj("text"), d.obj("reference"), d.obj("verdict")
        runs = [KldRun.from_json(r) for r in d.objs("runs")]
        diff, sigma = v.num("head_minus_base_kld", null=True), v.num("sigma", null=True)
        text = v.get("text", str)
        if diff is None and not text.startswith("no verdict"):
            text = "no verdict: the head − base difference was not measured"
        verdict = {"text": text, "head_minus_base_kld": diff, "sigma": sigma,
                   "sigmas": v.num("sigmas", null=True, default=None)}
        labels = {r.label for r in runs}
        ok = d.get("ok", bool) and all(r.ok for r in runs) and diff is not None and {"base", "head"} <= labels
        return cls(ok, {"path": m.get("path", str), "name": m.get("name", str), "size_bytes": m.get("size_bytes", int)},
                   {"path": t.get("path", str), "sha256": t.get("sha256", str)}, d.get("ctx", int), d.get("chunks", int),
                   {"backend": ref.get("backend", str), "build": ref.get("build", str), "commit": ref.get("commit", str),
                    "cached": ref.get("cached", bool), "key": ref.get("key", str, None, default=None),
                    "ppl": _value_err(ref, "ppl")},
                   runs, verdict, read_host(d), d.get("pinset", str, None, default=None))


def run_result(run: DeviceRun) -> KldRun:
    k = run.output.kld
    ppl = k.ppl_q if k else run.output.final_ppl
    return KldRun(
        run.label, run.side.build, run.side.commit, run.backend, run.ok, run.problem,
        ppl.to_json() if ppl else None,
        ({"mean": k.kld_mean.value, "err": k.kld_mean.err, "median": k.kld_median,
          "p99": k.kld_percentiles.get("99.0"), "p99_9": k.kld_percentiles.get("99.9"),
          "max": k.kld_percentiles.get("max")} if k else None),
        k.same_top_p_pct.to_json() if k else None, k.rms_dp_pct.to_json() if k else None,
        k.ln_ppl_ratio.to_json() if k and k.ln_ppl_ratio else None, run.seconds, list(run.output.devices))


def kld_document(model: Path, text: Path, ctx: int, chunks: int, ref: Reference, runs: list[DeviceRun],
                 host: dict | None = None) -> dict:
    base = next(r for r in runs if r.label == "base")
    head = next(r for r in runs if r.label == "head")
    v = verdict(base, head)
    ok = base.ok and head.ok and v["sigma"] is not None and v["text"] != FURTHER
    return KldResult(
        ok, {"path": str(model), "name": model.name, "size_bytes": model.stat().st_size},
        {"path": str(text), "sha256": file_sha256(text)}, ctx, chunks,
        {"backend": "CPU", "build": ref.build, "commit": ref.commit, "cached": ref.cached,
         "key": ref.key, "ppl": ref.output.final_ppl.to_json() if ref.output.final_ppl else None},
        [run_result(r) for r in runs], v, host, head.side.pinset).to_json()


def run_kld(base: Side, head: Side, model: Path, text: Path, *, ctx: int, chunks: int, store, cpu: bool,
            gpu_layers: int = 99, threads: int | None = None, log_dir: Path | None = None, host: dict | None = None,
            on_reference=None, on_run=None) -> dict:
    """The whole kld: the CPU reference (cached), base's and head's device runs against it, and the kld document.
    Explicit folders without --*-commit record the commit their llama-perplexity reports (--version): the build
    identity bench records from llama-bench, so kld and bench of the same folders merge in the report.
    on_reference(side) / on_run(side): progress, before each step."""
    base, head = (with_build_identity(side, "llama-perplexity") for side in (base, head))
    if on_reference:
        on_reference(base)
    ref = reference(base, model, text, ctx, chunks, store, threads=threads, log_dir=log_dir)
    runs = []
    for side in (base, head):
        if on_run:
            on_run(side, ref)
        runs.append(device_run(side, model, ref, ctx, chunks, cpu=cpu, gpu_layers=gpu_layers, threads=threads,
                               log_dir=log_dir))
    return kld_document(model, text, ctx, chunks, ref, runs, host=host)
