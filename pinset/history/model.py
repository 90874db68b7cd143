"""What `pinset history` shows, worked out from the runs (pinset/history/load.py), as data the renderers and the
JSON (kind "history") share. The tables are pandas pivots over the nights (imported here, lazily by the verb).

- Pins x nights: each pin's state on each build of each night's sim (the first build of a sim is the shipped
  build, pins.yaml's first `builds:` entry), its digest (PinSpec.digest) and apply mode.
- Red: a pin is red on a night when it is red on any build that night (conflict, contract, error, skipped:
  nightly.model.BROKEN). "red since NIGHT (BUILD)" is the first night of the streak that reaches the last night
  the pin was simulated, BUILD the first build it was red on then; "blamed on COMMIT" where a blame of those
  nights named the pin's first bad upstream commit, else where pick passed a build over for the pin and named it.
- Refreshed: the nights a pin's digest differs from the one before (a refreshed, rebased or replaced series; a
  PR pin moved to another commit); a pin that only applies by offset now has the same digest ("moved").
- Bench: head/base ratio and verdict per benchmark (model, test, device) and night; KLD: head - base mean KLD
  per study and night; verify: the gates passed, failed, not run per night; forecast: the PRs that would break
  a pin, and for how many nights (with a forecast) in a row each alarm has stood up to the last one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pinset.forecast.model import BREAKS, ForecastResult
from pinset.history.load import Run, Skipped
from pinset.measures.bench_model import BenchResult
from pinset.measures.kld_model import KldResult
from pinset.nightly.model import BlameResult, PickResult, is_broken
from pinset.results import SCHEMAS, utc_text
from pinset.sim.model import SimResult
from pinset.verify.model import FAILED, NOT_RUN, PASSED, VerifyResult

NO_DATA = ""   # a pin not simulated that night


def is_red(state: str) -> bool:
    return is_broken(state)


@dataclass
class Cell:
    """One pin on one night: its state on each build, in the sim's order (the first is the shipped build)."""

    builds: list[tuple[str, str, str | None]]     # (build, state, apply mode)
    digest: str | None = None
    refreshed: bool = False

    @property
    def shipped(self) -> str:
        return self.builds[0][1] if self.builds else NO_DATA

    @property
    def red(self) -> bool:
        return any(is_red(state) for _, state, _ in self.builds)

    @property
    def worst(self) -> str:
        return next((s for _, s, _ in self.builds if is_red(s)), self.shipped)


@dataclass
class PinHistory:
    id: str
    required: bool
    description: str | None = None
    cells: dict[str, Cell] = field(default_factory=dict)    # night -> cell
    red_since: dict | None = None     # {"night", "build", "blamed": {"commit", "pr", "subject", "by"} | None}
    refreshed_on: list[str] = field(default_factory=list)

    @property
    def last(self) -> Cell | None:
        return next(reversed(self.cells.values()), None)

    @property
    def last_night(self) -> str | None:
        return next(reversed(self.cells), None)


@dataclass
class History:
    nights: list[Run]
    pins: list[PinHistory]
    bench: dict[str, dict[str, dict]]          # benchmark -> night -> {"ratio", "ci95", "verdict"}
    kld: dict[str, dict[str, dict]]            # study -> night -> {"diff", "sigma", "verdict", "further"}
    verify: dict[str, dict]                    # night -> {"passed", "failed", "not_run", "failing", "summary"}
    alarms: list[dict]                         # {"pr", "title", "url", "pin", "required", "since", "nights", "now"}
    reports: dict[str, str]                    # night -> the report's outcome
    skipped: list[Skipped]
    grid: Any = None           # pandas DataFrame: pins x nights, the worst state over the night's builds ("": none)
    ratios: Any = None         # pandas DataFrame: benchmarks x nights, head/base ratio and verdict as text

    @property
    def night_names(self) -> list[str]:
        return [r.name for r in self.nights]

    def to_json(self) -> dict:
        names = self.night_names
        return {
            "schema": SCHEMAS["history"], "kind": "history",
            "nights": [{"night": r.name, "started": utc_text(r.started) if r.started else None,
                        "files": len(r.results), "report": self.reports.get(r.name)} for r in self.nights],
            "pins": [{"id": p.id, "required": p.required, "description": p.description,
                      "states": [_cell_json(p.cells.get(n)) for n in names],
                      "red_since": p.red_since, "refreshes": len(p.refreshed_on), "refreshed_on": p.refreshed_on}
                     for p in self.pins],
            "bench": [{"benchmark": name, "nights": [{"night": n, **v} for n, v in by_night.items()]}
                      for name, by_night in self.bench.items()],
            "kld": [{"study": name, "nights": [{"night": n, **v} for n, v in by_night.items()]}
                    for name, by_night in self.kld.items()],
            "verify": [{"night": n, **v} for n, v in self.verify.items()],
            "forecast_alarms": list(self.alarms),
            "skipped": [{"path": s.where, "why": s.why} for s in self.skipped],
        }


def _cell_json(cell: Cell | None) -> dict | None:
    if cell is None:
        return None
    return {"shipped": cell.shipped, "builds": [{"build": b, "state": s, **({"mode": m} if m else {})}
                                                for b, s, m in cell.builds],
            "digest": cell.digest, **({"refreshed": True} if cell.refreshed else {})}


def build_history(runs: list[Run], skipped: list[Skipped], descriptions: dict[str, str | None] | None = None) -> History:
    import pandas as pd

    pins: dict[str, PinHistory] = {}
    records: list[tuple[str, str, str]] = []
    for r in runs:
        for sim in r.of("sim"):
            sim_pins(sim, r.name, pins, records)
    last_sim = next((r.name for r in reversed(runs) if r.of("sim")), None)
    for p in pins.values():
        previous = None
        for night, cell in p.cells.items():
            if cell.digest is not None:
                if previous is not None and cell.digest != previous:
                    cell.refreshed = True
                    p.refreshed_on.append(night)
                previous = cell.digest
        # a pin the last sim no longer names (taken out of the set) is red no longer, whatever it was
        p.red_since = red_since(p, runs) if p.last_night == last_sim else None
        if descriptions and descriptions.get(p.id):
            p.description = descriptions[p.id]
    nights = [r.name for r in runs]
    # the pivots over the nights: a pin's worst state over each night's builds (red first, else the shipped
    # build's), and each benchmark's ratio and verdict
    frame = pd.DataFrame.from_records(records, columns=["pin", "night", "state"])
    grid = (frame.pivot_table(index="pin", columns="night", values="state", aggfunc=_worst)
            .reindex(index=list(pins), columns=nights, fill_value=NO_DATA)) if records else pd.DataFrame()
    bench = bench_series(runs)
    rows = [(name, night, _ratio_text(v)) for name, by_night in bench.items() for night, v in by_night.items()]
    ratios = (pd.DataFrame.from_records(rows, columns=["benchmark", "night", "text"])
              .pivot(index="benchmark", columns="night", values="text")
              .reindex(index=list(bench), columns=nights, fill_value="")) if rows else pd.DataFrame()
    return History(runs, list(pins.values()), bench, kld_series(runs), verify_counts(runs),
                   forecast_alarms(runs), {r.name: m.outcome for r in runs for m in r.of("report")[:1]}, skipped,
                   grid, ratios)


def _worst(states) -> str:
    """pivot_table's aggregate of one pin's states on one night (in build order, as the records were made): the
    first red one, else the first (the shipped build's)."""
    states = list(states)
    return next((s for s in states if is_red(s)), states[0] if states else NO_DATA)


def _ratio_text(v: dict) -> str:
    return f"{v['ratio']:.3f}× {v['verdict']}" if v["ratio"] is not None else v["verdict"]


def sim_pins(sim: SimResult, night: str, pins: dict[str, PinHistory], records: list) -> None:
    for b in sim.builds:
        for p in b.pins:
            ph = pins.setdefault(p.id, PinHistory(p.id, p.required))
            ph.required = p.required
            cell = ph.cells.setdefault(night, Cell([]))
            if any(name == b.build for name, _, _ in cell.builds):
                continue   # a second sim file of the night that simulated this build: the first speaks for it
            cell.builds.append((b.build, p.state, p.apply_mode if p.applied else None))
            cell.digest = cell.digest or p.digest
            records.append((p.id, night, p.state))


def red_since(p: PinHistory, runs: list[Run]) -> dict | None:
    nights = list(p.cells)
    if not nights or not p.cells[nights[-1]].red:
        return None
    start = len(nights) - 1
    while start > 0 and p.cells[nights[start - 1]].red:
        start -= 1
    first = p.cells[nights[start]]
    build = next(b for b, s, _ in first.builds if is_red(s))
    streak = set(nights[start:])
    return {"night": nights[start], "build": build, "state": first.worst, "nights": len(nights) - start,
            "blamed": blamed(p.id, [r for r in runs if r.name in streak])}


def blamed(pin: str, runs: list[Run]) -> dict | None:
    """The first bad upstream commit a blame (else a pick) of these nights named for the pin, the latest first."""
    for r in reversed(runs):
        for b in r.of("blame"):
            assert isinstance(b, BlameResult)
            for pb in b.pins:
                if pb.id == pin and pb.first_bad is not None and not pb.landed:
                    c = pb.first_bad
                    return {"commit": c.commit, "pr": c.pr, "subject": c.subject, "by": "blame", "night": r.name}
        for pk in r.of("pick"):
            assert isinstance(pk, PickResult)
            for bp in pk.builds:
                for reason in bp.reasons:
                    if reason.pin == pin and reason.upstream_commit is not None:
                        c = reason.upstream_commit
                        return {"commit": c.commit, "pr": c.pr, "subject": c.subject, "by": "pick", "night": r.name}
    return None


def bench_series(runs: list[Run]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in runs:
        for b in r.of("bench"):
            assert isinstance(b, BenchResult)
            if b.aa_check or b.compare != "builds":
                continue   # a check of the machine's noise, or two models: not head against base
            for row in b.rows:
                name = f"{row.test} · {b.model.name} · {b.device}"
                out.setdefault(name, {}).setdefault(r.name, {"ratio": row.ratio, "ci95": row.ci95,
                                                            "verdict": row.verdict})
    return out


def kld_series(runs: list[Run]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in runs:
        for k in r.of("kld"):
            assert isinstance(k, KldResult)
            name = f"{k.model.name} · {k.device}"
            v = k.verdict
            out.setdefault(name, {}).setdefault(r.name, {"diff": v.head_minus_base_kld, "sigma": v.sigma,
                                                        "verdict": v.text, "further": k.further})
    return out


def verify_counts(runs: list[Run]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in runs:
        files = r.of("verify")
        if not files:
            continue
        gates = [(b.build, g) for v in files if isinstance(v, VerifyResult) for b in v.builds for g in b.gates]
        out[r.name] = {"passed": sum(g.status == PASSED for _, g in gates),
                       "failed": sum(g.status == FAILED for _, g in gates),
                       "not_run": sum(g.status == NOT_RUN for _, g in gates),
                       "failing": [f"{g.name} on {build}" for build, g in gates if g.status == FAILED or g.stopped],
                       "summary": "; ".join(v.summary() for v in files)}
    return out


def forecast_alarms(runs: list[Run]) -> list[dict]:
    """The alarms (a PR that would break a pin) of the last night with a forecast, each with the nights (with a
    forecast) in a row it has stood up to then and the first of them."""
    seen: list[tuple[str, dict[tuple[int, str], dict]]] = []
    for r in runs:
        files = r.of("forecast")
        if not files:
            continue
        alarms: dict[tuple[int, str], dict] = {}
        for f in files:
            assert isinstance(f, ForecastResult)
            for pr in f.prs:
                for pe in pr.pins_with(BREAKS):
                    alarms.setdefault((pr.number, pe.id), {"pr": pr.number, "title": pr.title, "url": pr.url,
                                                           "pin": pe.id, "required": pe.required, "state": pr.state,
                                                           "onto": f.build})
        seen.append((r.name, alarms))
    if not seen:
        return []
    out = []
    for key, alarm in seen[-1][1].items():
        stood = 0
        for night, alarms in reversed(seen):
            if key not in alarms:
                break
            stood += 1
            since = night
        out.append({**alarm, "since": since, "nights": stood, "now": seen[-1][0]})
    return sorted(out, key=lambda a: (-a["nights"], a["pr"], a["pin"]))
