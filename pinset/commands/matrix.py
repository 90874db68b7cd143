"""`pinset matrix`: the CI cells to run (build x GPU class) as a GitHub Actions matrix, for `fromJSON()`.

Only builds on which the sim is green get cells: a build whose pins do not apply has nothing to verify, and
its red sim result already blocks the report. Each cell carries the exact pinset command lines it runs, so
the workflow holds no pinset logic of its own and `pinset report --expect` can name every cell that never
delivered a result.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import shlex
import sys
from collections import Counter
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from pinset.commands.common import add_config_args
from pinset.config.schema import PYPI_BUILD_RE, PinSet, load_pinset
from pinset.config.selectors import TagSelector, looks_like_selector, parse_selector
from pinset.errors import PinsetError
from pinset.output import write_text
from pinset.results import read_document
from pinset.sim.model import SimResult
from pinset.sim.run import pick_builds

MAX_CELLS = 256  # jobs GitHub Actions makes of one matrix at most


def add_parser(sub):
    p = sub.add_parser("matrix")
    add_config_args(p)
    p.add_argument("--sim", type=Path, help="sim JSON of this pin set (default: run the sim now)")
    p.add_argument("--gpus", help="comma-separated GPU classes of pins.yaml's `gpus:` (default: all)")
    p.add_argument("--kld-model", help="GGUF model: each cell also runs `pinset kld` on it (a path on the runner)")
    p.add_argument("--bench-model", help="GGUF model: each cell also runs `pinset bench` on it (a path on the runner)")
    p.add_argument("--bench-args", default="-p 512 -n 128 -ngl 99",
                   help="llama-bench options of the bench cells (default: \"-p 512 -n 128 -ngl 99\")")
    p.add_argument("--verify-args", default="",
                   help="extra options of each cell's `pinset verify` (e.g. \"--op-jobs 4\")")
    p.add_argument("--results-dir", default="pinset-results",
                   help="where the cells write their JSON and logs: RESULTS_DIR/ARTIFACT each (default pinset-results)")
    p.add_argument("--pinset-command", default="pinset", help="how the cells call pinset (default: pinset)")
    p.add_argument("--json", type=Path, help="write the matrix here instead of stdout")
    return p


def run(args) -> int:
    pinset = load_pinset(args.config, require_pins=False)
    build_names = pick_builds(pinset, args.builds)
    classes = pick_classes(pinset, args.gpus)
    for flag in ("verify_args", "bench_args", "pinset_command"):
        _split(getattr(args, flag), "--" + flag.replace("_", "-"))
    if not _split(args.pinset_command, "--pinset-command"):
        raise PinsetError("--pinset-command: empty (how the cells call pinset, e.g. \"python3 -m pinset\")")
    if not args.results_dir.strip("/ "):
        raise PinsetError(f"--results-dir {args.results_dir!r}: a folder name is needed (the cells' results would "
                          "land in the file system's root)")
    green, red = (_green_from_file(pinset, build_names, args.sim) if args.sim
                  else _green_from_sim(pinset, build_names, args.cache))
    for build, why in red:
        print(f"pinset matrix: {build} left out: the sim is red ({why})", file=sys.stderr)
    if not green:
        print(f"pinset matrix: no build is green in the sim ({len(red)} red), so there is no cell to run; "
              "an empty matrix would fail the workflow without saying why", file=sys.stderr)
        return 1
    if len(green) * len(classes) > MAX_CELLS:
        raise PinsetError(f"{len(green)} green builds x {len(classes)} GPU classes = {len(green) * len(classes)} "
                          f"cells, but GitHub Actions expands at most {MAX_CELLS} jobs from one matrix (the cell job "
                          "would fail whole); narrow it with --builds or --gpus")
    doc = matrix(pinset, args.config, green, classes, kld_model=args.kld_model, bench_model=args.bench_model,
                 bench_args=args.bench_args, verify_args=args.verify_args, results_dir=args.results_dir,
                 pinset_command=args.pinset_command)
    if args.json:  # one line, so that `echo "matrix=$(cat FILE)" >> "$GITHUB_OUTPUT"` holds all of it
        write_text(args.json, json.dumps(doc, separators=(",", ":")) + "\n")
        print(f"pinset matrix: {len(doc['include'])} cells written to {args.json}", file=sys.stderr)
    else:
        sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
    return 0


def pick_classes(pinset: PinSet, selection: str | None):
    if not pinset.gpus:
        raise PinsetError(f"{pinset.path.name} has no `gpus:` (name the GPU classes to verify on, e.g. "
                          "gpus: {h200: {runs-on: [self-hosted, h200], architectures: \"90\"}})")
    if not selection:
        return list(pinset.gpus)
    names = [n.strip() for n in selection.split(",") if n.strip()]
    if not names:
        raise PinsetError("--gpus: empty list")
    return [pinset.gpu_class(n) for n in dict.fromkeys(names)]


def _split(text: str, flag: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise PinsetError(f"{flag}: {exc}") from None


def _why_red(build) -> str:
    bad = [p for p in build.pins if p.required and not p.ok]
    return ", ".join(f"{p.id} {p.status if p.status not in ('applied', 'upstream') else 'contract broken'}"
                     for p in bad) or "not ok"


def _green_from_file(pinset: PinSet, build_names: list[str], path: Path):
    doc, kind, _, _ = read_document(path)
    if kind != "sim":
        raise PinsetError(f"{path}: a {kind} result, --sim takes the JSON of `pinset sim`")
    sim = SimResult.from_json(doc)
    if sim.pinset_digest != pinset.digest:
        raise PinsetError(f"{path}: sim of pin set {sim.pinset_digest}, but {pinset.path.name} is pin set "
                          f"{pinset.digest} (re-run pinset sim)")
    by_name = {b.build: b for b in sim.builds}
    named = {n for n in build_names if not looks_like_selector(n)}
    chosen: list[str] = []
    for name in build_names:
        if looks_like_selector(name):  # the sim resolved it: its builds are the ones that match it
            matched = _selected(parse_selector(name), [b.build for b in sim.builds if b.build not in named])
            if not matched:
                raise PinsetError(f"{path}: no simulated build matches the selector {name} (run pinset sim on it)")
            chosen += matched
        elif name in by_name:
            chosen.append(name)
        else:
            raise PinsetError(f"{path}: build {name} was not simulated (run pinset sim on it)")
    return _split_green([by_name[b] for b in dict.fromkeys(chosen)])


def _selected(selector, simulated: list[str]) -> list[str]:
    """The simulated builds a selector stands for (builds named on their own aside): those it matches, the
    newest N of them where it says N (the sim lists a selector's builds oldest first). Pre-releases only
    where the specifier names one, as when the sim resolved it."""
    if isinstance(selector, TagSelector):
        matched = [b for b in simulated if not b.startswith("pypi:") and fnmatch.fnmatchcase(b, selector.pattern)]
    else:
        spec, package = SpecifierSet(selector.specifier), canonicalize_name(selector.package)
        matched = [b for b in simulated if (m := PYPI_BUILD_RE.match(b)) and canonicalize_name(m["package"]) == package
                   and (version := _version(m["version"])) is not None
                   and spec.contains(version, prereleases=spec.prereleases is True)]
        matched.sort(key=lambda b: Version(PYPI_BUILD_RE.match(b)["version"]))
    return matched[-selector.newest:] if selector.newest else matched


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _green_from_sim(pinset: PinSet, build_names: list[str], cache: str | None):
    from pinset.sim.run import simulate
    from pinset.store import Store

    with simulate(pinset, build_names, Store.open(cache)) as sim:
        return _split_green(sim.result.builds)


def _split_green(builds) -> tuple[list[str], list[tuple[str, str]]]:
    return [b.build for b in builds if b.ok], [(b.build, _why_red(b)) for b in builds if not b.ok]


def artifact_name(build: str, gpu: str) -> str:
    """An upload-artifact name (no : / \\ and the like); see artifact_names for its uniqueness."""
    return "pinset-" + re.sub(r"[^A-Za-z0-9._-]+", "-", build).strip("-") + "-" + gpu


def artifact_names(cells: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(build, GPU class) -> artifact name, unique per cell: two builds that differ only where the name has a
    dash ("b1+x", "b1-x"), or a build and class whose join is ambiguous, would share an artifact and a
    results folder, and one cell's upload would fail or hide the other's. Those get a hash of the cell."""
    names = {cell: artifact_name(*cell) for cell in cells}
    taken = Counter(names.values())
    return {cell: name if taken[name] == 1 else name + "-" + hashlib.sha256("\0".join(cell).encode()).hexdigest()[:8]
            for cell, name in names.items()}


def matrix(pinset: PinSet, config: str, builds: list[str], classes, *, kld_model: str | None = None,
           bench_model: str | None = None, bench_args: str = "", verify_args: str = "",
           results_dir: str = "pinset-results", pinset_command: str = "pinset") -> dict:
    """{"include": [cell, ...]}, one cell per build x GPU class, in pins.yaml order. Nothing else at the top:
    Actions would read another key as one more matrix dimension."""
    q = shlex.quote
    cells = []
    artifacts = artifact_names([(build, gpu.name) for build in builds for gpu in classes])
    for build in builds:
        for gpu in classes:
            artifact = artifacts[build, gpu.name]
            out = f"{results_dir.rstrip('/')}/{artifact}"
            common = f"-c {q(config)}"
            verify = (f"{pinset_command} verify {common} --builds {q(build)} --cuda --gpu-class {q(gpu.name)} "
                      f"--no-progress {' '.join(map(q, shlex.split(verify_args)))} --json {q(out + '/verify.json')} "
                      f"--markdown {q(out + '/verify.md')} --logs {q(out + '/logs/verify')}")
            commands, kinds = [re.sub(r" +", " ", verify)], ["verify"]
            if kld_model:
                commands.append(f"{pinset_command} kld {common} --build {q(build)} --gpu-class {q(gpu.name)} "
                                f"-m {q(kld_model)} --json {q(out + '/kld.json')} --log-dir {q(out + '/logs/kld')}")
                kinds.append("kld")
            if bench_model:
                commands.append(f"{pinset_command} bench {common} --build {q(build)} --gpu-class {q(gpu.name)} "
                                f"-m {q(bench_model)} --json {q(out + '/bench.json')} "
                                f"--log-dir {q(out + '/logs/bench')} -- {' '.join(map(q, shlex.split(bench_args)))}")
                kinds.append("bench")
            cells.append({"cell": f"{build} on {gpu.name}", "pinset": pinset.digest, "build": build, "gpu": gpu.name,
                          "runs-on": list(gpu.runs_on), "architectures": gpu.architectures,
                          "artifact": artifact, "results": out, "kinds": kinds, "commands": commands,
                          "script": "\n".join(commands)})
    return {"include": cells}
