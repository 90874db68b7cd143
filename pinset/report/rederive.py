"""`missing_pins`: the report's re-derivation for a sim: a pin of the pin set that a sim build has no result for
is missing evidence for that pin. (Kld and bench verdicts are re-derived in pinset.measures.derived.)
"""

from __future__ import annotations

from pinset.report.model import Untested


def missing_pins(sim_builds, pin_ids: list[str] | None) -> list[Untested]:
    """"BUILD: no sim result for pin X" for each pin of the pin set (pins.yaml when given, else every pin any
    sim build names) that a simulated build has no result for: no result is no evidence."""
    builds = list(sim_builds or [])
    wanted = list(pin_ids) if pin_ids is not None else list(dict.fromkeys(p.id for b in builds for p in b.pins))
    out = []
    for b in builds:
        have = {p.id for p in b.pins}
        gone = [pin for pin in wanted if pin not in have]
        if gone:
            out.append(Untested(b.build, f"no sim result for pin{'s' if len(gone) > 1 else ''} "
                                + ", ".join(f"`{pin}`" for pin in gone)))
    return out
