"""The kld result model (kind "kld"): written by `pinset kld`, read by `pinset report`; and the verdict rule,
one function (`verdict_from_klds`) that the producer and the report's re-derivation both call."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pinset.cells import BuildCommits, Cells, PinStates, device_key, device_text
from pinset.checks.machine import read_host
from pinset.measures.perplexity import ValueErr
from pinset.results import SCHEMAS, Doc

SIGMAS = 2.0  # head is "further" when its mean KLD exceeds base's by more than 2 combined std errors

VERDICTS = ("further from the CPU result than base", "closer to the CPU result than base",
            "as close to the CPU result as base")
FURTHER = VERDICTS[0]


@dataclass(frozen=True)
class KldVerdict:
    """Head's mean KLD against base's: the verdict text and its numbers (None without a verdict)."""

    text: str
    head_minus_base_kld: float | None
    sigma: float | None                # the standard error of the difference
    sigmas: float | None = None        # how many of them the difference is
    sigmas_written: bool = True        # the producer's "no verdict" objects have no sigmas key

    @property
    def measured(self) -> bool:
        return self.head_minus_base_kld is not None

    def to_json(self) -> dict:
        return {"text": self.text, "head_minus_base_kld": self.head_minus_base_kld, "sigma": self.sigma,
                **({"sigmas": self.sigmas} if self.sigmas_written else {})}

    @classmethod
    def no_verdict(cls, why: str) -> KldVerdict:
        return cls(f"no verdict: {why}", None, None, sigmas_written=False)


@dataclass(frozen=True)
class KldModelFile:
    """The model a kld ran: {"path", "name", "size_bytes"}."""

    path: str
    name: str
    size_bytes: int

    def to_json(self) -> dict:
        return {"path": self.path, "name": self.name, "size_bytes": self.size_bytes}


@dataclass(frozen=True)
class KldText:
    """The text a kld scored: {"path", "sha256"}."""

    path: str
    sha256: str

    def to_json(self) -> dict:
        return {"path": self.path, "sha256": self.sha256}


@dataclass(frozen=True)
class KldReference:
    """The CPU reference run the device runs are scored against (cached logits under `key`)."""

    backend: str
    build: str
    commit: str
    cached: bool
    key: str | None
    ppl: ValueErr | None

    def to_json(self) -> dict:
        return {"backend": self.backend, "build": self.build, "commit": self.commit, "cached": self.cached,
                "key": self.key, "ppl": _json(self.ppl)}


def verdict_from_klds(base_mean: float, base_err: float, head_mean: float, head_err: float) -> KldVerdict:
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
    return KldVerdict(text, diff, sigma, (diff / sigma) if sigma > 0 else None)


def _value_err(d: Doc, key: str) -> ValueErr | None:
    """{"value", "err"} of a statistic; null (or NaN/inf in either number) when it was not measured."""
    v = d.obj(key, null=True, default=None)
    if v is None:
        return None
    value, err = v.num("value", null=True), v.num("err", null=True)
    return None if value is None or err is None else ValueErr(value, err)


def _json(part) -> dict | None:
    return part.to_json() if part is not None else None


KLD_STATS = ("mean", "err", "median", "p99", "p99_9", "max")


@dataclass(frozen=True)
class KldStats:
    """A run's KL divergence against the CPU reference: the mean with its error, and where printed the median
    and upper percentiles (None where llama-perplexity did not print them)."""

    mean: float
    err: float
    median: float | None = None
    p99: float | None = None
    p99_9: float | None = None
    max: float | None = None

    @property
    def mean_err(self) -> ValueErr:
        return ValueErr(self.mean, self.err)

    def to_json(self) -> dict:
        return {"mean": self.mean, "err": self.err, "median": self.median, "p99": self.p99, "p99_9": self.p99_9,
                "max": self.max}


@dataclass
class KldRun:
    """One llama-perplexity --kl-divergence run. Statistics are None where nothing was measured (a failed run)."""

    label: str
    build: str
    commit: str
    backend: str                 # "CPU" for a CPU-against-CPU run, else the device llama-perplexity used
    ok: bool
    detail: str | None = None
    ppl: ValueErr | None = None
    kld: KldStats | None = None
    same_top_p: ValueErr | None = None   # %
    rms_dp: ValueErr | None = None       # %
    ln_ppl_ratio: ValueErr | None = None
    seconds: float = 0.0
    devices: list[str] = field(default_factory=list)
    runs: int = 1                # llama-perplexity runs made: more than 1 when the output was cut at exit

    def to_json(self) -> dict:
        out = {"label": self.label, "build": self.build, "commit": self.commit, "backend": self.backend,
               "ppl": _json(self.ppl), "kld": _json(self.kld), "same_top_p": _json(self.same_top_p),
               "rms_dp": _json(self.rms_dp), "ln_ppl_ratio": _json(self.ln_ppl_ratio), "units": {"same_top_p": "%", "rms_dp": "%"},
               "ok": self.ok, "detail": self.detail, "seconds": round(self.seconds, 1), "devices": list(self.devices)}
        if self.runs != 1:   # written only when the step was run again: files of one run each keep their bytes
            out["runs"] = self.runs
        return out

    @classmethod
    def from_json(cls, d: Doc) -> KldRun:
        k = d.obj("kld", null=True)
        kld = None
        if k is not None:
            stats = {name: k.num(name, null=True, default=None) for name in KLD_STATS}
            mean, err = stats.pop("mean"), stats.pop("err")
            if mean is not None and err is not None:   # no mean with its error: not a measurement
                kld = KldStats(mean, err, **stats)
        ok = d.get("ok", bool)
        runs = d.get("runs", int, default=1)
        if runs < 1:
            d.fail("runs", f"{runs}: a run is made at least once")
        return cls(d.get("label", str), d.get("build", str), d.get("commit", str), d.get("backend", str),
                   ok and kld is not None, d.get("detail", str, None) or (None if kld is not None or not ok
                                                                          else "no mean KLD in the result"),
                   _value_err(d, "ppl"), kld, _value_err(d, "same_top_p"), _value_err(d, "rms_dp"),
                   _value_err(d, "ln_ppl_ratio"), d.num("seconds", null=True, default=0.0) or 0.0,
                   d.strs("devices", default=[]), runs)


@dataclass
class KldResult:
    ok: bool
    model: KldModelFile
    text: KldText
    ctx: int
    chunks: int
    reference: KldReference
    runs: list[KldRun]
    verdict: KldVerdict          # numbers None without a verdict
    host: dict | None = None     # read_host(): host, visible GPU UUIDs, CI runner, GPU class; None in older files
    pinset: str | None = None    # the pin set's digest (built from pins.yaml); None: explicit folders, older files

    @property
    def device(self) -> str:
        """Where the runs under test ran: "CPU" when every one ran on the CPU (CPU against CPU)."""
        backends = sorted({r.backend for r in self.runs})
        return ", ".join(backends) if backends else "none"

    @property
    def pinset_digest(self) -> str | None:
        return self.pinset

    @property
    def device_key(self) -> tuple:
        """(host, visible GPU UUIDs) where it ran; () in older files."""
        return device_key(self.host)

    @property
    def gpu_class(self) -> str | None:
        """The matrix cell's GPU class it was made as (--gpu-class): one GPU may serve two classes (two builds
        of one tree), whose numbers are two results, not one contradicting itself."""
        return (self.host or {}).get("gpu_class")

    def cells(self) -> Cells:
        """Per study (model, text, context, device, GPU class) each run's numbers and the verdict (pinset.cells)."""
        study = (self.model.name, self.text.sha256[:12], f"ctx {self.ctx}", f"{self.chunks} chunks",
                 *((device_text(self.device_key),) if self.device_key else ()),
                 *((f"as {self.gpu_class}",) if self.gpu_class else ()))
        for r in self.runs:
            yield (("kld", *study, r.label, r.build, r.backend),
                   {"ppl": _json(r.ppl), "kld": _json(r.kld), "same_top_p": _json(r.same_top_p),
                    "rms_dp": _json(r.rms_dp), "ok": r.ok})
        yield ("kld", *study, "verdict"), self.verdict.text

    def build_commits(self) -> BuildCommits:
        yield self.reference.build, self.reference.commit
        for r in self.runs:
            yield r.build, r.commit

    def pin_states(self) -> PinStates:
        return iter(())

    @property
    def further(self) -> bool:
        """The verdict says head is further from the CPU result than base (a blocker)."""
        return self.verdict.text.startswith("further")

    def run(self, label: str) -> KldRun | None:
        return next((r for r in self.runs if r.label == label), None)

    def rederived_verdict(self) -> KldVerdict | None:
        """The verdict the rule gives on this file's own per-run KLDs (verdict_from_klds); None when base's or
        head's run has no mean KLD with its error (no verdict to re-derive)."""
        base, head = self.run("base"), self.run("head")
        if not (base and head and base.ok and head.ok and base.kld and head.kld):
            return None
        return verdict_from_klds(base.kld.mean, base.kld.err, head.kld.mean, head.kld.err)

    def verdict_contradiction(self) -> str | None:
        """Why the recorded verdict is not what the per-run KLDs give (an edited file: "as close" over runs whose
        KLDs say "further"); None when it is, or when there is no verdict to re-derive."""
        again = self.rederived_verdict()
        if again is None or self.verdict.text.startswith("no verdict"):
            return None
        assert again.head_minus_base_kld is not None and again.sigma is not None   # verdict_from_klds measures
        if again.text != self.verdict.text:
            return (f"recorded \"{self.verdict.text}\", but the runs' mean KLDs give \"{again.text}\" "
                    f"(head − base {again.head_minus_base_kld:.4g} ± {again.sigma:.2g})")
        diff = self.verdict.head_minus_base_kld
        if diff is None or not math.isclose(diff, again.head_minus_base_kld, rel_tol=1e-6, abs_tol=1e-12):
            return f"recorded head − base {diff} but the runs' mean KLDs give {again.head_minus_base_kld:.6g}"
        return None

    def to_json(self) -> dict:
        return {"schema": SCHEMAS["kld"], "kind": "kld", "ok": self.ok, "model": self.model.to_json(),
                "text": self.text.to_json(), "ctx": self.ctx, "chunks": self.chunks, "reference": self.reference.to_json(),
                "runs": [r.to_json() for r in self.runs], "verdict": self.verdict.to_json(),
                **({"host": dict(self.host)} if self.host else {}), **({"pinset": self.pinset} if self.pinset else {})}

    @classmethod
    def from_json(cls, d: Doc) -> KldResult:
        m, t, ref, v = d.obj("model"), d.obj("text"), d.obj("reference"), d.obj("verdict")
        runs = [KldRun.from_json(r) for r in d.objs("runs")]
        diff, sigma = v.num("head_minus_base_kld", null=True), v.num("sigma", null=True)
        text = v.get("text", str)
        if diff is None and not text.startswith("no verdict"):
            text = "no verdict: the head − base difference was not measured"
        verdict = KldVerdict(text, diff, sigma, v.num("sigmas", null=True, default=None))
        labels = {r.label for r in runs}
        ok = d.get("ok", bool) and all(r.ok for r in runs) and diff is not None and {"base", "head"} <= labels
        return cls(ok, KldModelFile(m.get("path", str), m.get("name", str), m.get("size_bytes", int)),
                   KldText(t.get("path", str), t.get("sha256", str)), d.get("ctx", int), d.get("chunks", int),
                   KldReference(ref.get("backend", str), ref.get("build", str), ref.get("commit", str),
                                ref.get("cached", bool), ref.get("key", str, None, default=None), _value_err(ref, "ppl")),
                   runs, verdict, read_host(d), d.get("pinset", str, None, default=None))
