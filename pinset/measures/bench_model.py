"""The bench result model (kind "bench"): written by `pinset bench`, read by `pinset report`.

Rows are `BenchRow` objects from the moment the analysis computes them; the reasons a round is left out of a
row are `Exclusion`s (a string, so the JSON and every reader of `excluded` see the recorded text, with its kind
attached), made by the analysis and read back from a file in one place (`Exclusion.from_text`); the rounds are
the typed round log (bench_log). The rule that turns a row's kept speeds into its verdict (`row_from_speeds`)
is here too, beside the row it makes: the analysis calls it to make rows, and a row read from a file calls it to
check itself (`BenchRow.contradiction`), so the producer and the report use one rule and neither imports the other.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import Enum

from pinset.cells import BuildCommits, Cells, PinStates, canonical, device_key, device_text
from pinset.checks.machine import read_host
from pinset.extras import need_measure
from pinset.measures.bench_log import RoundRecord, read_round_log
from pinset.measures.rule import Plan
from pinset.result_parts import GpuRecord
from pinset.results import SCHEMAS, Doc

VERDICTS = ("faster", "slower", "no change", "too noisy", "insufficient data")
FASTER, SLOWER, NO_CHANGE, TOO_NOISY, INSUFFICIENT_DATA = VERDICTS
DECISIVE = ("faster", "slower", "no change")   # verdicts a sequential bench may stop on
FIRST_LOOK = 5   # kept rounds before an adaptive bench may stop
BUSY = "another process used the GPU"   # the one exclusion for noise; warm-up and failed runs are not noise


class ExclusionKind(str, Enum):
    WARMUP = "warm-up"   # round 0: recorded, never used
    FAILED = "failed"    # a run of the round has no result for the test
    NOISE = "noise"      # the round's speed is not trusted (another process used the GPU)


class Exclusion(str):
    """Why a round gives no value for a row's test: the text the JSON records ("round 3: warm-up"), with its
    kind and round attached."""

    kind: ExclusionKind
    round: int | None

    def __new__(cls, text: str, kind: ExclusionKind, round: int | None = None) -> Exclusion:
        self = super().__new__(cls, text)
        self.kind, self.round = kind, round
        return self

    def __getnewargs__(self) -> tuple:   # copy.deepcopy and pickle rebuild it whole
        return (str(self), self.kind, self.round)

    @classmethod
    def warmup(cls, round: int) -> Exclusion:
        return cls(f"round {round}: warm-up", ExclusionKind.WARMUP, round)

    @classmethod
    def busy(cls, round: int) -> Exclusion:
        return cls(f"round {round}: {BUSY}", ExclusionKind.NOISE, round)

    @classmethod
    def failed(cls, round: int, label: str, why: str | None) -> Exclusion:
        return cls(f"round {round}: {label} has no result" + (f" ({why})" if why else ""), ExclusionKind.FAILED, round)

    @classmethod
    def from_text(cls, text: str) -> Exclusion:
        """A recorded `excluded` entry (a file's, any schema): its kind from the forms the makers above write;
        anything else (older files' wordings) is noise: a round whose speed is not trusted."""
        if isinstance(text, Exclusion):
            return text
        head, sep, rest = text.partition(": ")
        number = head.removeprefix("round ")
        rnd = int(number) if sep and head.startswith("round ") and number.isdigit() else None
        if text.endswith(": warm-up"):
            return cls(text, ExclusionKind.WARMUP, rnd)
        if rnd is not None and any(rest.startswith(f"{label} has no result") for label in ("base", "head")):
            return cls(text, ExclusionKind.FAILED, rnd)
        return cls(text, ExclusionKind.NOISE, rnd)


def exclusion_kind(text: str) -> str:
    """What an `excluded` entry of a row is: "warm-up", "failed" (a run without a result) or "noise" (the
    round's speed is not trusted, e.g. another process used the GPU)."""
    return Exclusion.from_text(text).kind.value


@dataclass
class BenchRow:
    """One test's base/head comparison. Numbers are None where they could not be computed ("insufficient
    data": fewer than 3 kept rounds, or every run failed)."""

    test: str
    params: dict
    base_tps: list[float]         # per kept round: each run's speed (median of its samples)
    head_tps: list[float]
    ratio: float | None
    ci95: list[float] | None
    p_value: float | None
    aa_spread: float | None       # a fraction: 0.01 = 1 %; schema 2: the "no change" margin (= threshold)
    verdict: str
    excluded: list[Exclusion]     # why rounds were left out, each with its kind
    rounds: list[int] | None = None
    ci_method: str | None = None
    threshold: float | None = None
    noise_sd: float | None = None        # schema 2: per-round sd of ln(head/base) behind the margin
    decided_after: int | None = None     # schema 2: kept rounds at the first decisive look
    more_rounds: int | None = None       # schema 2: "too noisy": further rounds the scatter suggests
    p_test: str | None = None            # the test p_value is of: "t" (mean ln ratio = 0, decided "faster"/"slower"
                                         # or "too noisy"), "tost" (inside the band: "no change"); None in older
                                         # files, whose p_value is the informational Wilcoxon signed-rank p

    @property
    def kept(self) -> int:
        return len(self.base_tps)

    def rederived(self, decision: dict | None) -> BenchRow:
        """This row recomputed from its own kept speeds by the rule that made it (row_from_speeds), under the
        bench's recorded budget and A/A noise (`decision`: plan_of, noise_of): what the report compares a file's
        row with."""
        n = min(len(self.base_tps), len(self.head_tps))
        noise = noise_of(decision) or {}
        return row_from_speeds(self.test, self.params, self.rounds, self.base_tps[:n], self.head_tps[:n],
                               self.excluded, plan=plan_of(decision),
                               noise_sd=noise.get(json.dumps(self.params, sort_keys=True)))

    def contradiction(self, decision: dict | None) -> str | None:
        """Why this (schema 2) row's recorded verdict or numbers are not what its own speeds give under the rule
        (an edited file, a row with fewer kept rounds than the rule needs called decided); None when they agree.
        Speeds that cannot be a measurement (unequal counts, not positive) contradict any verdict."""
        if len(self.base_tps) != len(self.head_tps):
            return f"{len(self.base_tps)} base speeds but {len(self.head_tps)} head speeds (one of each per kept round)"
        try:
            again = self.rederived(decision)
        except ValueError as exc:   # stats.log_ratios: a speed <= 0
            return f"its speeds are not a measurement ({exc})"
        if again.verdict != self.verdict:
            kept = f"{self.kept} kept round{'s' if self.kept != 1 else ''}"
            return f"recorded \"{self.verdict}\", but its {kept} give \"{again.verdict}\""
        for name in ("ratio", "ci95"):
            mine, theirs = getattr(again, name), getattr(self, name)
            pairs = list(zip(_values(mine), _values(theirs)))
            if (mine is None) != (theirs is None) or not all(math.isclose(a, b, rel_tol=1e-6) for a, b in pairs):
                return f"recorded {name} {theirs} but its kept speeds give {mine}"
        return None

    def to_json(self) -> dict:
        return {"test": self.test, "params": dict(self.params), "rounds": self.rounds, "base_tps": list(self.base_tps),
                "head_tps": list(self.head_tps), "ratio": self.ratio, "ci95": self.ci95, "ci_method": self.ci_method,
                "p_value": self.p_value, **({"p_test": self.p_test} if self.p_test else {}),
                "aa_spread": self.aa_spread, "threshold": self.threshold,
                "noise_sd": self.noise_sd, "decided_after": self.decided_after, "more_rounds": self.more_rounds,
                "verdict": self.verdict, "excluded": list(self.excluded)}

    @classmethod
    def from_json(cls, d: Doc, schema: int = SCHEMAS["bench"]) -> BenchRow:
        ci = d.get("ci95", list, None)
        if ci is not None:
            if len(ci) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ci):
                d.fail("ci95", f"expected [low, high], got {json.dumps(ci)[:40]}")
            ci = list(ci) if all(math.isfinite(x) for x in ci) else None   # NaN/inf: not measured
        ratio = d.num("ratio", null=True)
        verdict = d.choice("verdict", VERDICTS)
        if (ratio is None or ci is None) and verdict != "insufficient data":
            verdict = "insufficient data"   # a verdict without its numbers (NaN, null) claims nothing
        if schema >= 2 and ci is not None and ratio is not None and (why := _verdict_contradiction(
                verdict, ci, d.num("threshold", null=True, default=None))):
            d.fail("verdict", why)
        rounds = d.get("rounds", list, None, default=None)
        return cls(d.get("test", str), d.get("params", dict), d.nums("base_tps") or [], d.nums("head_tps") or [], ratio, ci,
                   d.num("p_value", null=True), d.num("aa_spread", null=True), verdict,
                   [Exclusion.from_text(text) for text in d.strs("excluded")],
                   rounds, d.get("ci_method", str, None, default=None), d.num("threshold", null=True, default=None),
                   d.num("noise_sd", null=True, default=None), d.get("decided_after", int, None, default=None),
                   d.get("more_rounds", int, None, default=None),
                   d.choice("p_test", ("t", "tost"), default=None) if d.has("p_test") else None)


def row_from_speeds(test: str, params: dict, rounds: list[int] | None, base_tps: list[float], head_tps: list[float],
                    excluded: list[Exclusion], *, plan: Plan = Plan(), noise_sd: float | None = None) -> BenchRow:
    """One row from its kept rounds' speeds by the rule (stats.compare): the producer's (bench_analysis), and the
    one a recorded row is re-derived with (BenchRow.rederived). The statistics need the measure extra (numpy,
    scipy): a light install that reads a bench result says so (exit 2) rather than trust its recorded verdict."""
    st = None
    if base_tps:
        need_measure("a bench result's verdict, checked against its speeds,")
        from pinset.measures.stats import compare
        st = compare(base_tps, head_tps, plan, noise_sd=noise_sd)
    eff = st.effect if st else None
    band = math.exp(st.margin) - 1.0 if st and eff else None
    return BenchRow(test, params, base_tps, head_tps, eff.ratio if eff else None, list(eff.ci_ratio) if eff else None,
                    st.p_value if st and eff else None, band, st.verdict if st else "insufficient data", excluded, rounds,
                    "t-seq" if eff else None, band, st.noise_sd if st else None, st.decided_after if st else None,
                    st.more_rounds if st else None, st.p_test if st and eff else None)


def _values(value) -> list:
    """A recorded number or pair as a list (None: empty)."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def plan_of(decision: dict | None) -> Plan:
    """The plan a bench ran under, from its budget (not from the recorded looks and alpha, which an edited file
    could set to narrow every interval): adaptive with a round cap, else one look."""
    signs = bool(decision) and (decision or {}).get("order") == "random"   # orders drawn (newer benches)
    if not decision or not decision.get("adaptive") or not decision.get("max_rounds"):
        return Plan(signs=signs)
    return Plan.adaptive(int(decision["max_rounds"]) - 1, FIRST_LOOK, signs=signs)


def noise_of(decision: dict | None) -> dict[str, float] | None:
    """{params json: per-round sd of ln(head/base)} from the decision's A/A noise, as the analysis takes it."""
    entries = (decision or {}).get("noise")
    return {json.dumps(e["params"], sort_keys=True): float(e["sd"]) for e in entries} if entries else None


@dataclass(frozen=True)
class BenchModelFile:
    """The model a bench ran (the head side's, for a model comparison): {"path", "name"}."""

    path: str
    name: str

    def to_json(self) -> dict:
        return {"path": self.path, "name": self.name}


@dataclass(frozen=True)
class BenchDecision:
    """Schema 2's `decision` (bench_analysis.decision_record): how the verdicts were reached, as its readers
    (the renderers, the verb) see it. The JSON object itself stays in BenchResult.extra, key for key, and is what
    the re-analysis (bench_analysis.plan_of, noise_of) reads; a key an older file lacks reads as None."""

    rule: str | None
    alpha: float | None
    looks: int | None
    alpha_per_look: float | None
    margin_min: float | None
    noise_k: float | None
    noise_from: str | None
    adaptive: bool
    max_rounds: int | None
    max_time_s: float | None
    elapsed_s: float | None
    budget_ran_out: bool
    more_rounds: int | None

    @classmethod
    def of(cls, record: dict) -> BenchDecision:
        get = record.get
        return cls(get("rule"), get("alpha"), get("looks"), get("alpha_per_look"), get("margin_min"), get("noise_k"),
                   get("noise_from"), bool(get("adaptive")), get("max_rounds"), get("max_time_s"), get("elapsed_s"),
                   bool(get("budget_ran_out")), get("more_rounds"))


SIDE_KEYS = ("build", "commit", "model")


@dataclass(frozen=True)
class BenchSide:
    """base or head of a bench: the build (a pins.yaml build or a folder), its commit, the model file's name.
    A side read from a file writes its keys as read, in order; keys it does not name are kept (`rest`)."""

    build: str
    commit: str
    model: str | None = None            # the model file's name; older files do not say
    rest: dict = field(default_factory=dict, compare=False)
    keys: tuple[str, ...] = SIDE_KEYS

    def to_json(self) -> dict:
        named = {"build": self.build, "commit": self.commit, "model": self.model}
        return {k: named[k] if k in named else self.rest[k] for k in self.keys}

    @classmethod
    def from_json(cls, d: Doc) -> BenchSide:
        build, commit = d.get("build", str), d.get("commit", str)
        return cls(build, commit, d.raw.get("model"), {k: v for k, v in d.raw.items() if k not in SIDE_KEYS},
                   tuple(d.raw))


@dataclass
class BenchResult:
    ok: bool
    compare: str                  # "builds" (base vs head build, one model) | "models" (two models, one build)
    model: BenchModelFile
    llama_bench_args: list[str]
    rounds: int
    repetitions: int
    warmup_rounds: int
    base: BenchSide
    head: BenchSide
    gpu: GpuRecord | None         # name and driver; None: run with the GPU hidden (device: CPU)
    round_log: list[RoundRecord]  # every round, warm-up included (bench_log)
    rows: list[BenchRow]
    extra: dict = field(default_factory=dict)   # method, aa_check, reanalysed_from, host, decision, aa_noise
    schema: int = SCHEMAS["bench"]               # a file read keeps its own (schema 1: the A/A-band rule's fields)

    @property
    def device(self) -> str:
        return self.gpu.name if self.gpu else "CPU"

    @property
    def aa_check(self) -> bool:
        """base and head were the same programs (--aa, or identical files): a check of the machine's noise,
        never a measurement of head's speed."""
        return bool(self.extra.get("aa_check"))

    @property
    def pinset_digest(self) -> str | None:
        return self.extra.get("pinset")

    @property
    def device_key(self) -> tuple:
        """(host, visible GPU UUIDs) where it ran; () in older files."""
        return device_key(self.extra.get("host"))

    @property
    def gpu_class(self) -> str | None:
        """The matrix cell's GPU class it was made as (--gpu-class)."""
        return (self.extra.get("host") or {}).get("gpu_class")

    def cells(self) -> Cells:
        """Per model, GPU, base/head pair, test and parameters the speeds and verdict (pinset.cells)."""
        gpu = ((self.gpu.name if self.gpu else "no GPU")
               + (f" on {device_text(self.device_key)}" if self.device_key else "")
               + (f" as {self.gpu_class}" if self.gpu_class else ""))
        # an A/A check (head is base itself) is a cell of its own: beside the head-vs-base bench of the same builds
        # (a pinned tree named by its base build: the same names), never in disagreement with it
        pair = f"{self.base.build} -> {self.head.build}" + (" (A/A check)" if self.aa_check else "")
        for r in self.rows:
            yield (("bench", self.model.name, gpu, pair, r.test, canonical(r.params)),
                   {"base_tps": list(r.base_tps), "head_tps": list(r.head_tps), "ratio": r.ratio, "verdict": r.verdict})

    def build_commits(self) -> BuildCommits:
        for side in (self.base, self.head):
            yield side.build, side.commit

    def pin_states(self) -> PinStates:
        return iter(())

    def contradictions(self) -> list[str]:
        """"<test>: why" for every row whose verdict or numbers its own kept speeds do not give under the rule
        that made it (schema 2 rows; schema 1 rows were made by the older A/A-band rule and are taken as recorded)."""
        if self.schema < 2:
            return []
        decision = self.decision_record
        return [f"{row.test}: {why}" for row in self.rows if (why := row.contradiction(decision))]

    @property
    def round_orders(self) -> list[str]:
        """Each round's order of the sides ("base,head" ...), warm-up included, as recorded."""
        return [r.order for r in self.round_log]

    @property
    def gpu_clocks_mhz(self) -> list[int]:
        """The distinct GPU clocks the rounds recorded, lowest first (none with the GPU hidden or unreadable)."""
        return sorted({r.gpu_clock_mhz for r in self.round_log if r.gpu_clock_mhz is not None})

    def failed_runs(self) -> list[str]:
        """"round N base: why" for every llama-bench run that failed or recorded no usable speed (warm-up
        included): what the bench counts as failed (bench_analysis.bench_ok), so the report never reads such a
        run as a measurement."""
        return [why for r in self.round_log for why in r.failed_runs()]

    def to_json(self) -> dict:
        return {"schema": self.schema, "kind": "bench", "ok": self.ok, "compare": self.compare,
                "model": self.model.to_json(), "llama_bench_args": list(self.llama_bench_args), "rounds": self.rounds,
                "repetitions": self.repetitions, "warmup_rounds": self.warmup_rounds, "base": self.base.to_json(),
                "head": self.head.to_json(), "gpu": self.gpu.to_json() if self.gpu else None,
                "round_log": [r.to_json() for r in self.round_log],
                "rows": [r.to_json() for r in self.rows], **self.extra}

    @classmethod
    def from_json(cls, d: Doc) -> BenchResult:
        m, sides = d.obj("model"), {label: d.obj(label) for label in ("base", "head")}
        gpu = d.obj("gpu", null=True)
        round_log = read_round_log(d)
        _check_decision(d.obj("decision", default=None))
        for e in d.objs("aa_noise", default=[]):
            _check_noise_entry(e)
        rows = [BenchRow.from_json(r, d.get("schema", int)) for r in d.objs("rows")]
        read_host(d)  # checked here; kept in `extra` like every key the model does not name
        d.get("pinset", str, None, default=None)  # the pin set's digest, like host kept in `extra`
        known = {"schema", "kind", "ok", "compare", "model", "llama_bench_args", "rounds", "repetitions",
                 "warmup_rounds", "base", "head", "gpu", "round_log", "rows"}
        base, head = (BenchSide.from_json(s) for s in (sides["base"], sides["head"]))
        return cls(d.get("ok", bool) and bool(rows), d.choice("compare", ("builds", "models"), default="builds"),
                   BenchModelFile(m.get("path", str), m.get("name", str)), d.strs("llama_bench_args"),
                   d.get("rounds", int), d.get("repetitions", int), d.get("warmup_rounds", int), base, head,
                   GpuRecord.name_driver(gpu) if gpu else None,
                   round_log, rows, {k: v for k, v in d.raw.items() if k not in known},
                   d.get("schema", int))

    @property
    def compares_models(self) -> bool:
        """Two models on one build (`--vs-model`), base the reference model; else two builds on one model."""
        return self.compare == "models"

    @property
    def method(self) -> str | None:
        """How a run's speed and the rows were computed (bench_analysis.METHOD); None in the oldest files."""
        return self.extra.get("method")

    @property
    def decision(self) -> BenchDecision | None:
        """Schema 2: how the verdicts were reached (bench_analysis.decision_record); None in schema 1."""
        record = self.decision_record
        return BenchDecision.of(record) if record else None

    @property
    def decision_record(self) -> dict | None:
        """The `decision` JSON object as recorded: what the re-analysis (bench_analysis.plan_of, noise_of) reads."""
        return self.extra.get("decision")

    @property
    def reanalysed_from(self) -> dict | None:
        """`pinset bench --reanalyse`: the recorded method and schema the rows were recomputed from."""
        return self.extra.get("reanalysed_from")


def _check_noise_entry(e: Doc) -> None:
    """One A/A noise entry: the per-round sd of ln(head/base) of one test, a finite number in [0, 1] (a larger sd,
    a speed ratio scattering by more than e per round, measures nothing and would make any band "no change")."""
    e.get("params", dict)
    sd = e.num("sd")
    if not 0 <= sd <= 1:
        e.fail("sd", f"{sd!r} is not a per-round sd of ln(head/base) (0 to 1)")


def _check_decision(dec: Doc | None) -> None:
    """The keys of `decision` that the re-analysis reads (plan_of, noise_of), typed."""
    if dec is None:
        return
    for key in ("looks", "first_look"):
        if dec.has(key) and dec.get(key, int) < 1:
            dec.fail(key, "must be at least 1")
    if dec.has("alpha") and not 0 < dec.num("alpha") < 1:
        dec.fail("alpha", "must lie between 0 and 1")
    dec.get("adaptive", bool, default=False)
    max_rounds = dec.get("max_rounds", int, None, default=None)
    if max_rounds is not None and max_rounds < FIRST_LOOK + 1:
        dec.fail("max_rounds", f"must be at least {FIRST_LOOK + 1}")
    if dec.get("noise", list, None, default=None):
        for e in dec.objs("noise"):
            _check_noise_entry(e)


def _verdict_contradiction(verdict: str, ci: list[float], band: float | None) -> str | None:
    """Why a schema-2 row's verdict does not follow from its own CI and no-change band (stats.verdict_for), e.g. an
    edited "faster" over a CI that includes 1; None when it does."""
    lo, hi = ci
    tol = 1e-9
    if verdict == "faster" and not lo > 1 - tol:
        return f"\"faster\" but the CI {lo:.4g} … {hi:.4g} does not lie above 1"
    if verdict == "slower" and not hi < 1 + tol:
        return f"\"slower\" but the CI {lo:.4g} … {hi:.4g} does not lie below 1"
    if verdict == "no change":
        if band is None:
            return "\"no change\" without its no-change band (threshold)"
        inside = math.log(lo) > -math.log1p(band) - tol and math.log(hi) < math.log1p(band) + tol if lo > 0 else False
        if not inside:
            return f"\"no change\" but the CI {lo:.4g} … {hi:.4g} is not inside ±{band:.2%}"
    return None
