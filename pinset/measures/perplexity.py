"""Parse llama-perplexity output: plain perplexity, --kl-divergence-base and --kl-divergence runs.

Where things go (llama.cpp 0c1e570, tools/perplexity/perplexity.cpp): LOG() writes to stdout,
LOG_INF/LOG_WRN/LOG_ERR to stderr. So the per-chunk "[1]12.3,[2]..." line and the whole
"====== ... statistics ======" KLD report are on stdout, while "Final estimate: PPL = ..." and
every error are on stderr. The program returns 0 even when the KLD step gave up (bad base file,
fewer than 100 tokens, ...), so a missing block is how a failure shows: `KldRun.problem` says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NUM = r"([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|-?inf))"
PM = r"\s*±\s*"

FINAL_PPL_RE = re.compile(rf"Final estimate: PPL = {NUM} \+/- {NUM}")
CHUNK_PPL_RE = re.compile(rf"\[(\d+)\]{NUM},")
BUILD_RE = re.compile(r"^build: (\d+) \(([0-9a-f]+)\)", re.M)
COMPUTING_RE = re.compile(r"(?:computing|calculating perplexity) over (\d+) chunks, n_ctx=(\d+)")
DEVICE_RE = re.compile(r"using device (\S+) \(([^)]*)\)")
# Errors: LOG_ERR lines carry level "E" after the timestamp ("0.00.623.546 E kl_divergence: ...");
# without log prefixes they are recognised by their wording.
ERROR_LEVEL_RE = re.compile(r"^(?:\d+\.\d+\.\d+\.\d+ )?E (.+)$", re.M)
ERROR_WORDS_RE = re.compile(r"^.*(?:error:|failed|does not look like|you need at least|inconsistent vocabulary|"
                            r"Increase it with -c|unable to load).*$", re.M)

KLD_HEADER = "====== KL divergence statistics ======"
PPL_HEADER = "====== Perplexity statistics ======"
TOKEN_HEADER = "====== Token probability statistics ======"


@dataclass(frozen=True)
class ValueErr:
    value: float
    err: float

    def to_json(self) -> dict:
        return {"value": self.value, "err": self.err}


@dataclass(frozen=True)
class KldStats:
    """The three statistics blocks of a --kl-divergence run (percent values as printed: 99.1 means 99.1 %)."""

    ppl_q: ValueErr
    ppl_base: ValueErr
    ln_ppl_ratio: ValueErr | None
    kld_mean: ValueErr
    kld_percentiles: dict[str, float]    # "max", "99.9", "99.0", ..., "median", ..., "min"
    dp_mean_pct: ValueErr | None
    dp_percentiles_pct: dict[str, float]
    rms_dp_pct: ValueErr
    same_top_p_pct: ValueErr

    @property
    def kld_median(self) -> float:
        return self.kld_percentiles["median"]


@dataclass(frozen=True)
class PerplexityOutput:
    """Everything we read from one llama-perplexity run (stdout and stderr kept apart by the caller)."""

    final_ppl: ValueErr | None
    chunk_ppls: list[float]
    kld: KldStats | None
    build_number: str | None
    build_commit: str | None
    n_chunks: int | None
    n_ctx: int | None
    devices: list[str] = field(default_factory=list)   # "CUDA0 (NVIDIA H200)"; empty: CPU only
    errors: list[str] = field(default_factory=list)


def _f(text: str) -> float:
    return float(text)


def _value_err(block: str, label: str) -> ValueErr | None:
    m = re.search(rf"^{label}\s*:?\s*{NUM}{PM}{NUM}", block, re.M)
    return ValueErr(_f(m.group(1)), _f(m.group(2))) if m else None


def _section(text: str, header: str) -> str | None:
    start = text.find(header)
    if start < 0:
        return None
    rest = text[start + len(header):]
    nxt = rest.find("======")
    return rest if nxt < 0 else rest[:nxt]


_PCT_KEYS = {"Maximum": "max", "Minimum": "min", "Median": "median"}


def _percentiles(block: str, what: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in re.finditer(rf"^\s*(Maximum|Minimum|Median|\d+\.\d+%)\s+{what}:\s*{NUM}%?\s*$", block, re.M):
        key = _PCT_KEYS.get(m.group(1), m.group(1).rstrip("%"))
        out[key] = _f(m.group(2))
    return out


def parse_kld_block(text: str) -> KldStats | None:
    """The statistics of a --kl-divergence run, or None when the KL divergence block is absent."""
    ppl_block = _section(text, PPL_HEADER)
    kld_block = _section(text, KLD_HEADER)
    tok_block = _section(text, TOKEN_HEADER)
    if ppl_block is None or kld_block is None or tok_block is None:
        return None
    kld_mean = _value_err(kld_block, r"Mean\s+KLD")
    rms = _value_err(tok_block, r"RMS Δp\s*")
    same = _value_err(tok_block, r"Same top p")
    ppl_q = _value_err(ppl_block, r"Mean PPL\(Q\)\s*")
    ppl_base = _value_err(ppl_block, r"Mean PPL\(base\)\s*")
    kld_pct = _percentiles(kld_block, "KLD")
    if None in (kld_mean, rms, same, ppl_q, ppl_base) or "99.9" not in kld_pct or "median" not in kld_pct:
        return None
    return KldStats(
        ppl_q=ppl_q, ppl_base=ppl_base,
        ln_ppl_ratio=_value_err(ppl_block, r"Mean ln\(PPL\(Q\)/PPL\(base\)\)\s*"),
        kld_mean=kld_mean, kld_percentiles=kld_pct,
        dp_mean_pct=_value_err(tok_block, r"Mean\s+Δp"),
        dp_percentiles_pct=_percentiles(tok_block, "Δp"),
        rms_dp_pct=rms, same_top_p_pct=same,
    )


def parse_perplexity(stdout: str, stderr: str) -> PerplexityOutput:
    """Parse one run. Both streams are searched for each item, so a llama.cpp that moves a line
    from one stream to the other still parses; the fixtures pin where each line is today."""
    both = stdout + "\n" + stderr
    final = FINAL_PPL_RE.search(both)
    chunks = [float(m.group(2)) for m in CHUNK_PPL_RE.finditer(stdout)]
    build = BUILD_RE.search(both)
    comp = COMPUTING_RE.search(both)
    devices = []
    for m in DEVICE_RE.finditer(both):
        d = f"{m.group(1)} ({m.group(2)})"
        if d not in devices:
            devices.append(d)
    errors = [m.strip() for m in ERROR_LEVEL_RE.findall(stderr)]
    for m in ERROR_WORDS_RE.findall(stderr):
        if not any(e in m for e in errors):
            errors.append(m.strip())
    return PerplexityOutput(
        final_ppl=ValueErr(_f(final.group(1)), _f(final.group(2))) if final else None,
        chunk_ppls=chunks,
        kld=parse_kld_block(stdout) or parse_kld_block(both),
        build_number=build.group(1) if build else None,
        build_commit=build.group(2) if build else None,
        n_chunks=int(comp.group(1)) if comp else None,
        n_ctx=int(comp.group(2)) if comp else None,
        devices=devices,
        errors=errors,
    )


def _exit_problem(out: PerplexityOutput, returncode: int | None) -> str | None:
    if returncode != 0:
        return f"llama-perplexity exited {returncode}" + (f": {out.errors[-1]}" if out.errors else "")
    return None


def kld_problem(out: PerplexityOutput, returncode: int | None) -> str | None:
    """Why a --kl-divergence run did not give a result (None when it did)."""
    if problem := _exit_problem(out, returncode):
        return problem
    if out.kld is None:
        why = out.errors[-1] if out.errors else "no error printed (fewer than 100 evaluated tokens?)"
        return f"no KL divergence block in the output although the program exited 0: {why}"
    return None


def base_problem(out: PerplexityOutput, returncode: int | None) -> str | None:
    """Why a --kl-divergence-base (reference) run did not give a result."""
    if problem := _exit_problem(out, returncode):
        return problem
    if out.final_ppl is None:
        why = out.errors[-1] if out.errors else "no error printed"
        return f"no final perplexity estimate in the output: {why}"
    return None
