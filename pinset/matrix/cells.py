"""What `pinset matrix` builds: the sim's green builds (from a sim file or a sim run now) and one cell per
build x GPU class, with the exact pinset command lines the cell runs (pinset/matrix/model.py holds the JSON).

Only builds on which the sim is green get cells: a build whose pins do not apply has nothing to verify, and
its red sim result already blocks the report."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import shlex
from collections import Counter
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from pinset.config.schema import PYPI_BUILD_RE, PinSet
from pinset.config.selectors import TagSelector, looks_like_selector, parse_selector
from pinset.errors import PinsetError
from pinset.matrix.model import MatrixCell, MatrixResult
from pinset.results import read_document
from pinset.sim.model import SimResult

MAX_CELLS = 256  # jobs GitHub Actions makes of one matrix at most


def green_builds(pinset: PinSet, build_names: list[str], sim_path: Path | None,
                 cache: str | None) -> tuple[list[str], list[tuple[str, str]]]:
    """(green build names, [(red build, why)]): from the sim JSON at `sim_path`, else from a sim run now."""
    return (_green_from_file(pinset, build_names, sim_path) if sim_path
            else _green_from_sim(pinset, build_names, cache))


def _why_red(build) -> str:
    bad = [p for p in build.pins if p.required and not p.ok]
    return ", ".join(f"{p.id} {p.status if not p.in_tree else 'contract broken'}"
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
        matched.sort(key=lambda b: Version(PYPI_BUILD_RE.match(b)["version"]))  # type: ignore[index]  # matched above
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
           results_dir: str = "pinset-results", pinset_command: str = "pinset") -> MatrixResult:
    """One cell per build x GPU class, in pins.yaml order."""
    if len(builds) * len(classes) > MAX_CELLS:
        raise PinsetError(f"{len(builds)} green builds x {len(classes)} GPU classes = {len(builds) * len(classes)} "
                          f"cells, but GitHub Actions expands at most {MAX_CELLS} jobs from one matrix (the cell job "
                          "would fail whole); narrow it with --builds or --gpus")
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
            cells.append(MatrixCell(f"{build} on {gpu.name}", build, gpu.name, pinset.digest, list(gpu.runs_on),
                                    gpu.architectures, artifact, out, kinds, commands))
    return MatrixResult(cells)
