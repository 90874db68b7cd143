"""pinset re-derives every verdict a result states from the numbers in the same file, with the rule the
producer uses (the producer's own function, called, not copied): a hand-edited or half-written file whose
label says more than its numbers ("as close" over per-run KLDs that say "further", a "faster" row whose speeds
give another ratio, a verdict on fewer kept rounds than the rule needs) is refused with one line naming the
file and the key, never read as evidence. The report (report.load) and a producer re-reading a file (bench
--noise-from) both check through here, below the report.
"""

from __future__ import annotations

from pinset.errors import PinsetError
from pinset.measures.bench_model import INSUFFICIENT_DATA, BenchResult
from pinset.measures.kld_model import KldResult
from pinset.measures.rule import MIN_ROUNDS

# --- kld -------------------------------------------------------------------------------------
# How bad a KLD verdict is for head: a stated verdict better than its runs give is refused; a worse one (a
# "further" over runs that say "as close") already blocks by its label and is read as it is.
_KLD_RANK = {"closer to the CPU result than base": 0, "as close to the CPU result as base": 1,
             "further from the CPU result than base": 2}


def kld_contradiction(result: KldResult) -> str | None:
    """Why the recorded verdict claims more than the base and head runs give by pinset kld's own rule
    (KldResult.rederived_verdict: measures.kld_model.verdict_from_klds); None when it does not (or when there is
    no verdict to check: a run failed, runs missing)."""
    stated = result.verdict
    derived = result.rederived_verdict()
    if derived is None or stated.text.startswith("no verdict"):
        return None
    if _KLD_RANK.get(derived.text, 0) > _KLD_RANK.get(stated.text, 0):   # the label claims more
        base, head = result.run("base"), result.run("head")
        assert base is not None and head is not None and base.kld and head.kld   # rederived_verdict needs them
        return (f"verdict {stated.text!r} but its runs' mean KLDs (base {base.kld.mean:.6g} ± {base.kld.err:.2g},"
                f" head {head.kld.mean:.6g} ± {head.kld.err:.2g}) say {derived.text!r}")
    return None  # the stated difference and sigma are shown as recorded (the shaped report fixtures round them)


# --- bench -----------------------------------------------------------------------------------
def bench_contradictions(result: BenchResult) -> list[tuple[int, str]]:
    """(row index, why) for each row whose numbers contradict its speeds by pinset bench's rule: base and head of
    unequal length, fewer kept rounds than the rule needs for a verdict, and (schema 2, whose rule this pinset
    runs) a verdict, ratio or CI other than the producer's own rule gives on the row's kept speeds
    (BenchRow.contradiction: measures.bench_analysis.row_from_speeds)."""
    out = []
    decision = result.decision_record
    for i, row in enumerate(result.rows):
        n_base, n_head = len(row.base_tps), len(row.head_tps)
        if n_base != n_head:
            out.append((i, f"{n_base} base speeds but {n_head} head speeds (one of each per kept round)"))
            continue
        if row.verdict == INSUFFICIENT_DATA:
            continue
        if n_base < MIN_ROUNDS:
            out.append((i, f"verdict {row.verdict!r} on {n_base} kept rounds (the rule needs at least {MIN_ROUNDS})"))
            continue
        if result.schema < 2:
            continue  # schema 1's A/A-band rule is not this pinset's: only the counts above are checked
        if why := row.contradiction(decision):
            out.append((i, why))
    return out


def check_derived(path, model) -> None:
    """Refuse (exit 2, one line naming the file and key) a kld or bench result whose verdicts do not follow
    from its own numbers."""
    if isinstance(model, KldResult) and (why := kld_contradiction(model)):
        raise PinsetError(f"{path}: kld.verdict: {why} (edited or damaged result; re-run pinset kld)")
    if isinstance(model, BenchResult):
        try:
            found = bench_contradictions(model)
        except PinsetError as exc:   # the light install: the bench's statistics are the measure extra's
            raise PinsetError(f"{path}: {exc}") from None
        for i, why in found:
            raise PinsetError(f"{path}: bench.rows[{i}]: {why} (edited or damaged result; re-run pinset bench)")
