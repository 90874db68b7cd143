"""Combining result files from one or many machines into one view, refusing contradictions.

Every result is broken into cells (e.g. verify x build x machine x gate). The same cell may come from
several files (a CI matrix re-run, a copied artifact): identical values merge silently, different values
are an error naming both files, because a report that picks one of two answers would hide a flaky run.
A gate or check that was `not-run` in one file and run in another is not a contradiction: the run wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pinset.cells import SAYS_NOTHING, canonical, device_key, machine_key
from pinset.errors import PinsetError
from pinset.nightly.model import NOT_TRIED
from pinset.report.load import KINDS, ResultFile
from pinset.verify.model import NOT_RUN


@dataclass
class VerifyRun:
    """One build verified on one machine (gates merged over every file that reported them)."""

    machine: dict
    machine_key: tuple
    build: dict
    sources: list[str] = field(default_factory=list)
    gpu_class: str | None = None    # the pins.yaml `gpus:` class of the CI cell that made it (--gpu-class)


@dataclass
class KldStudy:
    """KLD runs against one CPU reference (one model, text and context)."""

    doc: dict
    runs: list[dict]
    sources: list[str] = field(default_factory=list)


@dataclass
class BenchStudy:
    """llama-bench rows of one base/head pair on one GPU and model."""

    doc: dict
    rows: list[dict]
    sources: list[str] = field(default_factory=list)


@dataclass
class Merged:
    files: list[ResultFile]
    pinset: str | None
    sim: dict | None
    verify: list[VerifyRun]
    kld: list[KldStudy]
    bench: list[BenchStudy]
    commits: dict[str, str]  # build name -> longest commit seen
    pick: dict | None = None      # pick JSON, rows merged over every pick file (a tried row beats "not tried")
    blame: list[dict] = field(default_factory=list)  # blame JSON per (good, bad) commit range, pins merged

    def kinds(self) -> set[str]:
        return {f.kind for f in self.files}


def gpu_class_of(doc: dict) -> str | None:
    """The matrix cell's GPU class a kld or bench was made as (--gpu-class): one GPU may serve two classes
    (two builds of one tree), whose numbers are two results, not one contradicting itself."""
    return (doc.get("host") or {}).get("gpu_class")


def expected_cells(path) -> list[dict]:
    """The cells a run should have delivered: `pinset matrix` JSON ({"include": [{build, gpu, kinds, ...}]})."""
    from pinset.results import Doc, read_json

    doc = Doc(read_json(path, "matrix")[0], path, "matrix")
    cells = []
    for cell in doc.objs("include"):
        kinds = cell.strs("kinds")
        bad = sorted(set(kinds) - {"verify", "kld", "bench"})
        if bad or not kinds:
            cell.fail("kinds", f"expected a non-empty list of verify, kld, bench (got {', '.join(bad) or 'none'})")
        cells.append({"cell": cell.get("cell", str), "build": cell.get("build", str), "gpu": cell.get("gpu", str),
                      "kinds": list(dict.fromkeys(kinds)), "pinset": cell.get("pinset", str, default=None),
                      "architectures": cell.get("architectures", str, default=None)})
    return cells


def op_key(op: dict) -> tuple[str, str, str]:
    """An op count is one (op, backend, -p filter): the CPU gate may run MUL_MAT under two filters."""
    return op["op"], op["backend"], op.get("params") or ""


def order_files(files: list[ResultFile]) -> list[ResultFile]:
    """A fixed order independent of the command line (same inputs -> same report), duplicates dropped."""
    seen: dict[str, ResultFile] = {}
    for f in sorted(files, key=lambda f: (KINDS.index(f.kind), canonical(f.data), f.name)):
        seen.setdefault(canonical(f.data), f)
    return list(seen.values())


# --- cells ----------------------------------------------------------------------------------
# What merging reads of each result is asked of its model, one method per question (pinset.cells): its cells
# (compared across files), its (build, commit) pairs, and the pins' states per build (`pin_states`: as blame's
# pin_state: sim's status, a broken contract as `contract`, as sim, pick -- the pins it passed a build over
# for -- and blame saw them: a blame that calls a pin broken on a build the sim calls fine, or the reverse,
# contradicts it).


def _show(value) -> str:
    return json.dumps(value, sort_keys=True) if not isinstance(value, str) else value


def check_consistent(files: list[ResultFile]) -> tuple[str | None, dict[str, str]]:
    """Raise PinsetError on the first contradiction; return the pin set digest and build commits."""
    digest_from: tuple[str, str] | None = None
    for f in files:
        digest = f.model.pinset_digest  # kld and bench: absent for explicit --base-bin/--head-bin and older files
        if not digest:
            continue
        if digest_from is None:
            digest_from = (digest, str(f.path))
        elif digest != digest_from[0]:
            raise PinsetError(f"{digest_from[1]} and {f.path} are results of different pin sets "
                              f"({digest_from[0]} vs {digest}); report one pin set at a time")

    commits: dict[str, tuple[str, str]] = {}
    for f in files:
        for build, commit in f.model.build_commits():
            if build in commits:
                known, where = commits[build]
                if not (known.startswith(commit) or commit.startswith(known)):
                    raise PinsetError(f"{where} and {f.path} disagree on build {build}: "
                                      f"commit {known[:12]} vs {commit[:12]}")
                if len(commit) > len(known):
                    commits[build] = (commit, where)
            else:
                commits[build] = (commit, str(f.path))

    cells: dict[tuple, tuple[object, str]] = {}
    for f in files:
        for key, value in f.model.cells():
            if value is SAYS_NOTHING:
                continue
            if key in cells and cells[key][0] != value:
                other_value, other = cells[key]
                raise PinsetError(f"{other} and {f.path} disagree on {' / '.join(map(str, key))}: "
                                  f"{_show(other_value)} vs {_show(value)}")
            cells.setdefault(key, (value, str(f.path)))
    states: dict[tuple[str, str], tuple[str, str, str]] = {}
    for f in files:
        for build, pin, state in f.model.pin_states():
            known = states.setdefault((build, pin), (state, f.kind, str(f.path)))
            if known[0] != state:
                raise PinsetError(f"{known[2]} and {f.path} disagree on pin {pin} on build {build}: "
                                  f"{known[0]} ({known[1]}) vs {state} ({f.kind})")
    return (digest_from[0] if digest_from else None), {b: c for b, (c, _) in commits.items()}


# --- merging --------------------------------------------------------------------------------
def merge(files: list[ResultFile]) -> Merged:
    files = order_files(files)
    digest, commits = check_consistent(files)
    return Merged(files, digest, _merge_sim(files), _merge_verify(files), _merge_kld(files),
                  _merge_bench(files), commits, _merge_pick(files), _merge_blame(files))


def _merge_pick(files: list[ResultFile]) -> dict | None:
    """One pick (the cells above refuse two different picked bases): its rows, with a row another file tried
    replacing this one's "not tried"."""
    picks = [f.data for f in files if f.kind == "pick"]
    if not picks:
        return None
    rows: dict[str, dict] = {}
    for d in picks:
        for b in d["builds"]:
            if b["build"] not in rows or rows[b["build"]]["verdict"] == NOT_TRIED:
                rows[b["build"]] = b
    return {**picks[0], "builds": list(rows.values()), "verified": any(d["verified"] for d in picks)}


def _merge_blame(files: list[ResultFile]) -> list[dict]:
    """Blame results per range (good, bad commits); the pins of two files over one range are joined."""
    ranges: dict[tuple[str, str], dict] = {}
    for f in files:
        if f.kind != "blame":
            continue
        d = f.data
        key = (d["good"]["commit"], d["bad"]["commit"])
        if key not in ranges:
            ranges[key] = {**d, "pins": list(d["pins"])}
            continue
        have = {p["id"] for p in ranges[key]["pins"]}
        ranges[key]["pins"] += [p for p in d["pins"] if p["id"] not in have]
        ranges[key]["probes"] = max(ranges[key]["probes"], d["probes"])
    return list(ranges.values())


def _merge_sim(files: list[ResultFile]) -> dict | None:
    sims = [f for f in files if f.kind == "sim"]
    if not sims:
        return None
    builds: dict[str, dict] = {}
    for f in sims:
        for b in f.data["builds"]:
            builds.setdefault(b["build"], b)
    first = sims[0].data
    return {**first, "builds": list(builds.values()), "ok": all(b["ok"] for b in builds.values())}


def _prefer_run(old: dict, new: dict) -> dict:
    return new if old["status"] == NOT_RUN and new["status"] != NOT_RUN else old


def _merge_gate(old: dict, new: dict) -> dict:
    gate = dict(_prefer_run(old, new))
    if "ops" in old or "ops" in new:
        ops = {op_key(o): o for o in (old.get("ops") or [])}
        for o in new.get("ops") or []:
            ops.setdefault(op_key(o), o)
        gate["ops"] = list(ops.values())
    if "checks" in old or "checks" in new:
        checks = {(c["pin"], c["check"]): c for c in (old.get("checks") or [])}
        for c in new.get("checks") or []:
            key = (c["pin"], c["check"])
            checks[key] = _prefer_run(checks[key], c) if key in checks else c
        gate["checks"] = list(checks.values())
    return gate


def _merge_verify(files: list[ResultFile]) -> list[VerifyRun]:
    runs: dict[tuple, VerifyRun] = {}
    for f in files:
        if f.kind != "verify":
            continue
        machine = f.data["machine"]
        mk = machine_key(machine)
        gpu_class = (f.data.get("options") or {}).get("gpu_class")
        for b in f.data["builds"]:
            key = (mk, b["build"], gpu_class)  # one GPU may run the cells of two classes (two builds of one tree)
            if key not in runs:
                runs[key] = VerifyRun(machine, mk, {**b, "gates": list(b["gates"]),
                                                    "not_tested": list(b["not_tested"])}, [str(f.path)],
                                      gpu_class)
                continue
            run = runs[key]
            run.sources.append(str(f.path))
            gates = {g["name"]: g for g in run.build["gates"]}
            for g in b["gates"]:
                gates[g["name"]] = _merge_gate(gates[g["name"]], g) if g["name"] in gates else g
            run.build["gates"] = list(gates.values())
            for item in b["not_tested"]:
                if item not in run.build["not_tested"]:
                    run.build["not_tested"].append(item)
            run.build["ok"] = run.build["ok"] and b["ok"]
    return list(runs.values())


def _merge_kld(files: list[ResultFile]) -> list[KldStudy]:
    studies: dict[tuple, KldStudy] = {}
    for f in files:
        if f.kind != "kld":
            continue
        d = f.data
        key = (d["model"]["name"], d["text"]["sha256"], d["ctx"], d["chunks"], d["reference"]["build"], device_key(d.get("host")),
               gpu_class_of(d))
        study = studies.setdefault(key, KldStudy(d, [], []))
        study.sources.append(str(f.path))
        have = {(r["label"], r["build"], r["backend"]) for r in study.runs}
        study.runs += [r for r in d["runs"] if (r["label"], r["build"], r["backend"]) not in have]
    return list(studies.values())


def _merge_bench(files: list[ResultFile]) -> list[BenchStudy]:
    studies: dict[tuple, BenchStudy] = {}
    for f in files:
        if f.kind != "bench":
            continue
        d = f.data
        key = (d["model"]["name"], d["gpu"]["name"] if d["gpu"] else None, d["base"]["build"], d["head"]["build"],
               device_key(d.get("host")), gpu_class_of(d))
        study = studies.setdefault(key, BenchStudy(d, [], []))
        study.sources.append(str(f.path))
        have = {(r["test"], canonical(r["params"])) for r in study.rows}
        study.rows += [r for r in d["rows"] if (r["test"], canonical(r["params"])) not in have]
    return list(studies.values())
