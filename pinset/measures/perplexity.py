"""Parse llama-perplexity output: plain perplexity, --kl-divergence-base and --kl-divergence runs.

Where things go (llama.cpp 0c1e570, tools/perplexity/perplexity.cpp): LOG() writes to stdout,
LOG_INF/LOG_WRN/LOG_ERR to stderr. So the per-chunk "[1]12.3,[2]..." line and the whole
"====== ... statistics ======" KLD report are on stdout, while "Final estimate: PPL = ..." and
every error are on stderr. The program returns 0 even when the KLD step gave up (bad base file,
fewer than 100 tokens, ...), so a missing block is how a failure shows: `KldRun.problem` says so.

The common log writes from a thread of its own that the program does not wait for at exit (common/log.cpp
leaks the logger on purpose, upstream issue 22142): the last lines can be lost, exit status 0. Usually that is
only the closing timings (the captured stderr files end at "ETA "); on a loaded machine it can be the
statistics too (kld-cut-at-exit, caught in CI). `cut_short` tells such a run from a real refusal.

Odd output never passes: a value that is not a finite number in its range (KLD < 0, PPL <= 0,
a percentage outside [0, 100], nan, inf), a statistic printed twice, or a run that does not show
the device it ran on (llama.cpp's `using device CUDA0 (...)` line, printed at `-lv 4`) is a problem.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

NUM = r"([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?)))"
# Nothing but an optional percent sign may follow a value, and its line must be complete (a newline):
# output cut inside the last number ("± 2.0" of "± 2.089") would otherwise read as a shorter number.
# (Whitespace around an optional mark is written `ws*(?:mark ws*)?`, never `ws* mark? ws*`: the two runs would
# split a long run of blanks every possible way, quadratic in its length.)
END = r"[ \t]*(?:%[ \t]*)?(?=\r?\n)"
PM = r"\s*±\s*"

FINAL_PPL_RE = re.compile(rf"Final estimate: PPL = {NUM} \+/- {NUM}{END}")
CHUNK_PPL_RE = re.compile(rf"\[(\d+)\]{NUM},")
BUILD_RE = re.compile(r"^build: (\d+) \(([0-9a-f]+)\)", re.M)
COMPUTING_RE = re.compile(r"(?:computing|calculating perplexity) over (\d+) chunks, n_ctx=(\d+)")
DEVICE_RE = re.compile(r"using device (\S+) \(([^)]*)\)")
OFFLOADED_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
# stdout carries only numbers (chunk values, tables, statistics): a nan or inf anywhere there means the
# computation broke, whichever figure it is in (also those pinset does not read, e.g. Cor(...))
NON_FINITE_RE = re.compile(r"(?<![\w.])[-+]?(?:nan|inf(?:inity)?)(?!\w)", re.I)
# Errors: LOG_ERR lines carry level "E" after the timestamp ("0.00.623.546 E kl_divergence: ...");
# without log prefixes they are recognised by their wording.
ERROR_LEVEL_RE = re.compile(r"^(?:\d+\.\d+\.\d+\.\d+ )?E (.+)$", re.M)
# what a CUDA build prints when pinset hides the GPUs on purpose (CUDA_VISIBLE_DEVICES= for the CPU reference and
# --cpu runs): an error line of ggml's, but no sign that the run failed; for a run that claims a GPU it is one
HIDDEN_GPU_RE = re.compile(r"ggml_cuda_init: failed to initialize CUDA")
ERROR_WORDS_RE = re.compile(r"^.*(?:error:|failed|does not look like|you need at least|inconsistent vocabulary|"
                            r"Increase it with -c|unable to load).*$", re.M)

KLD_HEADER = "====== KL divergence statistics ======"
KLD_CHUNK_RE = re.compile(r"^\s*(?P<chunk>\d+)\s+\d")  # "   3    2218312.7433 ± ..." in the --kl-divergence table
# a whole row of that table: chunk number and five "value ± value" columns (the last two in %), ended by a newline
# (a row cut inside its last number has no newline yet: not a row)
KLD_ROW_RE = re.compile(rf"^[ \t]*\d+(?:[ \t]+{NUM}[ \t]*±[ \t]*{NUM}(?:[ \t]*%)?){{5}}[ \t]*(?=\r?\n)", re.M)
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
    devices: list[str] = field(default_factory=list)   # "CUDA0 (NVIDIA H200)"; empty: CPU only (or not printed)
    errors: list[str] = field(default_factory=list)
    offloaded: tuple[int, int] | None = None              # "offloaded 5/5 layers to GPU"
    anomalies: list[str] = field(default_factory=list)    # what llama-perplexity never prints (a value twice...)
    kld_rows: int = 0                                     # rows of the --kl-divergence chunk table on stdout


def _f(text: str) -> float:
    return float(text)


def _value_err(block: str, label: str, anomalies: list[str] | None = None) -> ValueErr | None:
    # a label's own trailing \s* would be a second run of blanks next to the one below
    found = re.findall(rf"^{label.removesuffix(chr(92) + 's*')}\s*(?::\s*)?{NUM}{PM}{NUM}{END}", block, re.M)
    if len(found) > 1:   # which one is the run's?
        if anomalies is not None:
            anomalies.append(f"{label.replace(chr(92), '').split('(')[0].strip()} printed {len(found)} times")
        return None
    return ValueErr(_f(found[0][0]), _f(found[0][1])) if found else None


def _section(text: str, header: str) -> str | None:
    start = text.find(header)
    if start < 0:
        return None
    rest = text[start + len(header):]
    nxt = rest.find("======")
    return rest if nxt < 0 else rest[:nxt]


_PCT_KEYS = {"Maximum": "max", "Minimum": "min", "Median": "median"}


def _percentiles(block: str, what: str, anomalies: list[str] | None = None) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in re.finditer(rf"^[^\S\n]*(Maximum|Minimum|Median|\d+\.\d+%)\s+{what}:\s*{NUM}{END}", block, re.M):
        key = _PCT_KEYS.get(m.group(1), m.group(1).rstrip("%"))
        if key in out:   # printed twice: which one is the run's?
            if anomalies is not None:
                anomalies.append(f"{m.group(1)} {what} printed twice")
            return {}
        out[key] = _f(m.group(2))
    return out


def parse_kld_block(text: str, anomalies: list[str] | None = None) -> KldStats | None:
    """The statistics of a --kl-divergence run, or None when the KL divergence block is absent,
    incomplete or ambiguous (a block or a value printed twice: `anomalies` says which)."""
    for header in (PPL_HEADER, KLD_HEADER, TOKEN_HEADER):
        if text.count(header) > 1:
            if anomalies is not None:
                anomalies.append(f"{header.strip('= ')} printed {text.count(header)} times")
            return None
    ppl_block = _section(text, PPL_HEADER)
    kld_block = _section(text, KLD_HEADER)
    tok_block = _section(text, TOKEN_HEADER)
    if ppl_block is None or kld_block is None or tok_block is None:
        return None
    kld_mean = _value_err(kld_block, r"Mean\s+KLD", anomalies)
    rms = _value_err(tok_block, r"RMS Δp\s*", anomalies)
    same = _value_err(tok_block, r"Same top p", anomalies)
    ppl_q = _value_err(ppl_block, r"Mean PPL\(Q\)\s*", anomalies)
    ppl_base = _value_err(ppl_block, r"Mean PPL\(base\)\s*", anomalies)
    kld_pct = _percentiles(kld_block, "KLD", anomalies)
    if kld_mean is None or rms is None or same is None or ppl_q is None or ppl_base is None \
            or "99.9" not in kld_pct or "median" not in kld_pct:
        return None
    return KldStats(
        ppl_q=ppl_q, ppl_base=ppl_base,
        ln_ppl_ratio=_value_err(ppl_block, r"Mean ln\(PPL\(Q\)/PPL\(base\)\)\s*", anomalies),
        kld_mean=kld_mean, kld_percentiles=kld_pct,
        dp_mean_pct=_value_err(tok_block, r"Mean\s+Δp", anomalies),
        dp_percentiles_pct=_percentiles(tok_block, "Δp", anomalies),
        rms_dp_pct=rms, same_top_p_pct=same,
    )


def chunk_counter(progress):
    """An on_line callback for a streamed --kl-divergence run: the chunk number of each table row."""
    def on_line(line: str) -> None:
        m = KLD_CHUNK_RE.match(line)
        if m:
            progress.update(done=int(m.group("chunk")))

    return on_line


def parse_perplexity(stdout: str, stderr: str) -> PerplexityOutput:
    """Parse one run. Both streams are searched for each item, so a llama.cpp that moves a line
    from one stream to the other still parses; the fixtures pin where each line is today."""
    both = stdout + "\n" + stderr
    anomalies: list[str] = []
    non_finite = NON_FINITE_RE.findall(stdout)
    if non_finite:
        anomalies.append(f"{len(non_finite)} non-finite value(s) ({non_finite[0]}) on stdout")
    finals = FINAL_PPL_RE.findall(both)
    if len(finals) > 1:
        anomalies.append(f"Final estimate printed {len(finals)} times")
    final = finals[0] if len(finals) == 1 else None
    offloaded = OFFLOADED_RE.findall(both)
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
    kld = parse_kld_block(stdout, anomalies)
    if kld is None and not anomalies:
        kld = parse_kld_block(both, anomalies)
    return PerplexityOutput(
        final_ppl=ValueErr(_f(final[0]), _f(final[1])) if final else None,
        chunk_ppls=chunks,
        kld=kld,
        build_number=build.group(1) if build else None,
        build_commit=build.group(2) if build else None,
        n_chunks=int(comp.group(1)) if comp else None,
        n_ctx=int(comp.group(2)) if comp else None,
        devices=devices,
        errors=errors,
        offloaded=(int(offloaded[-1][0]), int(offloaded[-1][1])) if offloaded else None,
        anomalies=anomalies,
        kld_rows=len(KLD_ROW_RE.findall(stdout)),
    )


def _exit_problem(out: PerplexityOutput, returncode: int | None) -> str | None:
    if returncode != 0:
        return f"llama-perplexity exited {returncode}" + (f": {out.errors[-1]}" if out.errors else "")
    if out.anomalies:
        return "unreadable llama-perplexity output: " + "; ".join(out.anomalies)
    return None


# Negative KLD beyond this is not rounding: the reference's log-probabilities are stored as 16-bit
# steps, so a run identical to the reference can print a mean a hair below zero, never -1e-4.
KLD_FLOOR = -1e-4


def _bad(name: str, value: float, low: float | None = None, high: float | None = None, *,
         low_open: bool = False) -> str | None:
    """Why a printed value cannot be right: not finite, or outside [low, high] ((low, high] if low_open)."""
    if not math.isfinite(value):
        return f"{name} is {value}"
    if low is not None and (value <= low if low_open else value < low):
        return f"{name} is {value:g} (must be {'>' if low_open else '>='} {low:g})"
    if high is not None and value > high:
        return f"{name} is {value:g} (must be <= {high:g})"
    return None


def _stats_problems(k: KldStats) -> list[str]:
    checks = [
        _bad("mean KLD", k.kld_mean.value, KLD_FLOOR), _bad("mean KLD ±", k.kld_mean.err, 0),
        _bad("PPL(Q)", k.ppl_q.value, 0, low_open=True), _bad("PPL(Q) ±", k.ppl_q.err, 0),
        _bad("PPL(base)", k.ppl_base.value, 0, low_open=True), _bad("PPL(base) ±", k.ppl_base.err, 0),
        _bad("same top p", k.same_top_p_pct.value, 0, 100), _bad("same top p ±", k.same_top_p_pct.err, 0, 100),
        _bad("RMS Δp", k.rms_dp_pct.value, 0, 100), _bad("RMS Δp ±", k.rms_dp_pct.err, 0),
    ]
    # single tokens can go below zero (a CPU run against its own reference printed a minimum of -0.000027):
    # the floor holds for the median and above only
    checks += [_bad(f"{p} KLD", v) if p in ("min", "0.1", "1.0", "5.0", "10.0") else _bad(f"{p} KLD", v, KLD_FLOOR)
               for p, v in k.kld_percentiles.items()]
    checks += [_bad(f"{p} Δp", v, -100, 100) for p, v in k.dp_percentiles_pct.items()]
    if k.ln_ppl_ratio is not None:
        checks += [_bad("ln(PPL(Q)/PPL(base))", k.ln_ppl_ratio.value), _bad("ln(PPL(Q)/PPL(base)) ±", k.ln_ppl_ratio.err, 0)]
    if k.dp_mean_pct is not None:
        checks += [_bad("mean Δp", k.dp_mean_pct.value, -100, 100)]
    pct = k.kld_percentiles
    if pct["median"] > pct["99.9"] or ("max" in pct and pct["99.9"] > pct["max"]):
        checks.append(f"KLD percentiles out of order (median {pct['median']:g}, 99.9 % {pct['99.9']:g})")
    return [c for c in checks if c]


def device_problem(out: PerplexityOutput, *, gpu: bool) -> str | None:
    """Whether the output shows the run used the device it claims: a GPU run needs llama.cpp's
    `using device X (...)` line (printed at -lv 4) and no "offloaded 0/N layers"; a CPU run none."""
    if gpu:
        if not out.devices:
            return "no `using device ...` line: the output does not show the run used a GPU"
        if out.offloaded is not None and out.offloaded[0] == 0:
            return f"offloaded {out.offloaded[0]}/{out.offloaded[1]} layers to GPU: the model ran on the CPU"
        return None
    if out.devices:
        return f"a CPU run used device {', '.join(out.devices)}"
    return None


def kld_problem(out: PerplexityOutput, returncode: int | None, *, gpu: bool = False) -> str | None:
    """Why a --kl-divergence run did not give a result (None when it did). gpu: the run claims a GPU
    (it must show the device line); a CPU run (the default) must show none."""
    if problem := _exit_problem(out, returncode):
        return problem
    if out.kld is None:
        if cut_short(out, returncode, gpu=gpu):
            why = f"the output ended early ({_rows_seen(out)}, no statistics): {CUT_WHY}"
        elif errors := _errors(out, gpu=gpu):
            why = errors[-1]
        else:
            why = "no error printed (fewer than 100 evaluated tokens)"
        return f"no KL divergence block in the output although the program exited 0: {why}"
    if problems := _stats_problems(out.kld):
        return "impossible statistics: " + "; ".join(problems)
    return device_problem(out, gpu=gpu)


# evaluated tokens per chunk of a --kl-divergence run: the second half of the context, less the last token
def _tokens(n_chunks: int, n_ctx: int) -> int:
    return n_chunks * (n_ctx - 1 - n_ctx // 2)


CUT_WHY = "llama.cpp's log thread loses the last lines when the program exits first"


def cut_short(out: PerplexityOutput, returncode: int | None, *, reference: bool = False, gpu: bool = False) -> bool:
    """Whether a run that exited 0 stopped printing before its result (see the module docstring): nothing was
    measured that can be read, so the run is made again. Not cut: a printed error, odd output, or a whole
    chunk table of fewer than 100 tokens (llama.cpp's own refusal to do statistics, also exit 0).
    reference: a run whose result is the final estimate (--kl-divergence-base, or plain perplexity).
    gpu: the run claims a GPU; else CUDA's "failed to initialize" (the GPUs hidden on purpose) is no error."""
    if returncode != 0 or _errors(out, gpu=gpu) or out.anomalies:
        return False
    if reference:
        return out.final_ppl is None
    if out.kld is not None:
        return False
    whole_table = out.n_chunks is not None and out.kld_rows == out.n_chunks
    return not (whole_table and out.n_chunks is not None and out.n_ctx is not None
                and _tokens(out.n_chunks, out.n_ctx) < 100)


def _errors(out: PerplexityOutput, *, gpu: bool) -> list[str]:
    """The errors that say why a run failed: a CPU run's (CUDA hidden on purpose) without CUDA's "failed to
    initialize", which every CUDA build prints then."""
    return out.errors if gpu else [e for e in out.errors if not HIDDEN_GPU_RE.search(e)]


def _rows_seen(out: PerplexityOutput) -> str:
    of = f" of {out.n_chunks}" if out.n_chunks is not None else ""
    return f"{out.kld_rows}{of} chunk rows"


def base_problem(out: PerplexityOutput, returncode: int | None) -> str | None:
    """Why a --kl-divergence-base (reference, CPU) run did not give a result."""
    if problem := _exit_problem(out, returncode):
        return problem
    if out.final_ppl is None:
        if cut_short(out, returncode, reference=True):
            why = f"no error printed: the output ended early ({CUT_WHY})"
        else:
            why = (_errors(out, gpu=False) or ["no error printed"])[-1]
        return f"no final perplexity estimate in the output: {why}"
    problem = _bad("PPL", out.final_ppl.value, 0, low_open=True) or _bad("PPL ±", out.final_ppl.err, 0) \
        or next((p for i, v in enumerate(out.chunk_ppls, 1) if (p := _bad(f"chunk {i} PPL", v, 0, low_open=True))), None)
    if problem:
        return f"impossible final perplexity: {problem}"
    return device_problem(out, gpu=False)
