"""The README's set-up in a fresh virtual environment: every package the code imports is declared, and the
tests' stand-in `python3` is this interpreter with this interpreter's packages (issue 23 §1)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from tests.testing import ROOT

try:
    import tomllib
except ImportError:  # Python 3.10: the test extra declares tomli there
    import tomli as tomllib

from tests.packaging.test_workflows import python3_is_this_python  # noqa: F401  (a fixture)


def _imports(folder: Path) -> dict[str, set[str]]:
    """Top-level names of absolute imports in the .py files under `folder`, each with the files importing it."""
    found: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(extra: str | None = None) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return {_norm(re.match(r"\s*([A-Za-z0-9_.-]+)", r).group(1)) for r in reqs}


# import name -> distribution for what a fresh CI venv does not install (an extra other than `test`)
NOT_INSTALLED = {"git": "GitPython"}


def _undeclared(folder: Path, declared: set[str], local: set[str]) -> dict[str, list[str]]:
    dists = metadata.packages_distributions()  # import name -> distributions installed here
    missing = {}
    for name, files in sorted(_imports(folder).items()):
        if name in sys.stdlib_module_names or name in local or name == "__future__":
            continue
        # not installed here (tomli on Python 3.11+): its distribution is named as it is imported
        providers = {_norm(d) for d in dists.get(name, [NOT_INSTALLED.get(name, name)])}
        if not providers & declared:
            missing[f"{name} (from {', '.join(sorted(providers))})"] = sorted(files)[:3]
    return missing


def test_every_package_pinset_imports_is_a_declared_dependency():
    """Declared in the base install, or in the `measure` extra (kld, bench, model synth: test_light_* below)."""
    assert _undeclared(ROOT / "pinset", _declared() | _declared("measure"), {"pinset"}) == {}


def test_every_package_the_tests_and_scripts_import_is_declared_for_them():
    declared = _declared() | _declared("test")
    assert _declared("measure") <= _declared("test")   # the README's `.[test]` brings everything
    for folder in ("tests", "scripts", "benchmarks"):
        local = {p.stem for p in (ROOT / folder).glob("*.py")} | {"pinset", "tests"}  # tests: the test package (tests.testing)
        extra = _declared("bench") if folder == "benchmarks" else set()   # what only a benchmark compares with
        assert _undeclared(ROOT / folder, declared | extra, local) == {}, folder


def test_the_import_scan_finds_an_undeclared_package(tmp_path):
    """The check can fail: a module importing a package nobody declared is named."""
    pkg = ROOT / "pinset"
    assert "packaging" in _imports(pkg)  # the scan sees `from packaging.version import ...`
    assert _undeclared(pkg, (_declared() | _declared("measure")) - {"packaging"}, {"pinset"}).keys() == \
        {"packaging (from packaging)"}


def test_the_stand_in_python3_has_this_interpreters_packages(python3_is_this_python):  # noqa: F811
    """A symlink to a venv's python placed outside the venv starts the base interpreter: sys.prefix tells."""
    import os
    env = {**os.environ, **python3_is_this_python}
    out = subprocess.run(["python3", "-c", "import sys, yaml; print(sys.prefix)"], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == sys.prefix


def test_ci_installs_into_a_fresh_venv():
    """.ci/run makes a venv without the system's packages and runs the tests with its python3."""
    script = (ROOT / ".ci/run").read_text()
    assert re.search(r"^python3 -m venv --clear ", script, re.M) and "--system-site-packages" not in script
    venv_at = script.index("python3 -m venv")
    assert venv_at < script.index("python3 -m pip install") < script.index("python3 -m pytest")
    assert re.search(r'^export PATH="\$venv/bin:\$PATH"', script, re.M)


# --- the light install (issue 42) -----------------------------------------------------------------------------

MEASURE = ("numpy", "scipy", "pandas", "matplotlib")
# the verbs that keep a pin set; kld, bench and model (synth) take the `measure` extra
LIGHT_VERBS = ("sim", "apply", "pick", "blame", "refresh", "rebase", "forecast", "bump", "report", "import", "schema",
               "cache", "matrix", "verify")
# the floors (tests/packaging/test_layers.py) the light verbs stand on: every module in them is imported below
LIGHT_FLOORS = ("config", "upstream", "sim", "checks", "build", "heal", "nightly", "matrix", "verify", "report",
                "forecast", "bump")

_IMPORTS = """
import importlib, json, pkgutil, sys
import pinset
from pinset.cli import build_parser
for verb in {verbs!r}:
    build_parser(verb)   # imports the verb's module and builds its options, as `pinset VERB` does
for info in pkgutil.walk_packages(pinset.__path__, "pinset."):
    floor = info.name.split(".")[1]
    if floor in {floors!r} or (not info.ispkg and info.name.count(".") == 1 and floor not in ("__main__", "cli")):
        importlib.import_module(info.name)
{more}
print(json.dumps(sorted({{name.split(".")[0] for name in sys.modules}} & {measure!r})))
"""


def _measure_imported(more: str = "") -> list[str]:
    import json
    code = _IMPORTS.format(verbs=list(LIGHT_VERBS), floors=list(LIGHT_FLOORS), measure=set(MEASURE), more=more)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_light_verbs_import_no_measure_package():
    """Importing every light verb (its parser built) and every module of the floors they stand on loads none of
    numpy, scipy, pandas, matplotlib (sys.modules, in a fresh interpreter); a measure verb does (the check can
    fail)."""
    assert _measure_imported() == []
    assert _measure_imported("build_parser('bench')") != []


def test_the_measure_extra_is_what_the_base_install_leaves_out():
    assert _declared("measure") == set(MEASURE)
    assert not _declared() & set(MEASURE)


def _upstream(tmp: Path) -> Path:
    """A small local upstream (b1) and one patch series on it: pins.yaml beside them."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(tmp)}
    up = tmp / "up"

    def git(*args):
        subprocess.run(["git", *args], cwd=up, env=env, check=True, capture_output=True)
    up.mkdir()
    git("init", "-q", "-b", "master")
    (up / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    git("add", "a.txt")
    git("commit", "-qm", "base")
    git("tag", "b1")
    git("checkout", "-qb", "s")
    (up / "a.txt").write_text((up / "a.txt").read_text().replace("line 15\n", "line 15 pinned\n"))
    git("commit", "-qam", "pin")
    git("format-patch", "-q", "-o", str(tmp / "patches" / "p"), "b1..s")
    git("checkout", "-q", "master")
    pins = tmp / "pins.yaml"
    pins.write_text("upstream: up\nbuilds: [b1]\npins:\n  - id: p\n    patches: patches/p\n    unchecked: demo\n")
    return pins


def test_light_install_in_a_fresh_venv_runs_sim_and_bench_says_the_extra(tmp_path):
    """`pip install .` (no extra) into a fresh venv: none of the measure packages there, `pinset sim` on a small
    local upstream green, `pinset bench` one line naming the extra, exit 2."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py, pinset = venv / "bin" / "python", venv / "bin" / "pinset"
    made = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-2000:]
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True).stdout
    installed = {_norm(line.split("==")[0]) for line in listed.split()}
    assert "pinset" in installed and not installed & set(MEASURE), listed
    work = tmp_path / "work"
    work.mkdir()
    pins = _upstream(work)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "PINSET_CACHE": str(tmp_path / "cache")}
    sim = subprocess.run([str(pinset), "sim", "-c", str(pins), "--json", str(work / "sim.json")], cwd=work, env=env,
                         capture_output=True, text=True)
    assert sim.returncode == 0 and "p" in sim.stdout and "applied" in sim.stdout, sim.stdout + sim.stderr
    report = subprocess.run([str(pinset), "report", str(work / "sim.json")], cwd=work, env=env, capture_output=True,
                            text=True)
    assert report.returncode in (0, 1) and "Traceback" not in report.stderr, report.stderr
    bench = ROOT / "tests" / "golden" / "measures" / "bench" / "captured-faster.json"   # a real bench result
    said = subprocess.run([str(pinset), "report", str(bench)], cwd=work, env=env, capture_output=True, text=True)
    assert said.returncode == 2 and said.stderr == (
        f"pinset report: error: {bench}: a bench result's verdict, checked against its speeds, needs the measure "
        "extra (numpy, scipy, pandas, matplotlib not installed): pip install 'pinset[measure]'\n"), said.stderr
    for argv in (["bench", "--rounds", "3"], ["kld"], ["model", "synth", "--arch", "llama", "--size", "1b"]):
        said = subprocess.run([str(pinset), *argv], cwd=work, env=env, capture_output=True, text=True)
        assert said.returncode == 2 and said.stdout == "", (argv, said)
        assert said.stderr == (f"pinset {argv[0]}: error: needs the measure extra (numpy, scipy, pandas, matplotlib "
                               "not installed): pip install 'pinset[measure]'\n"), said.stderr
