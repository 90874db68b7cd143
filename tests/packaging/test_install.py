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
    assert _undeclared(ROOT / "pinset", _declared(), {"pinset"}) == {}


def test_every_package_the_tests_and_scripts_import_is_declared_for_them():
    declared = _declared() | _declared("test")
    for folder in ("tests", "scripts", "benchmarks"):
        local = {p.stem for p in (ROOT / folder).glob("*.py")} | {"pinset", "tests"}  # tests: the test package (tests.testing)
        extra = _declared("bench") if folder == "benchmarks" else set()   # what only a benchmark compares with
        assert _undeclared(ROOT / folder, declared | extra, local) == {}, folder


def test_the_import_scan_finds_an_undeclared_package(tmp_path):
    """The check can fail: a module importing a package nobody declared is named."""
    pkg = ROOT / "pinset"
    assert "packaging" in _imports(pkg)  # the scan sees `from packaging.version import ...`
    assert _undeclared(pkg, _declared() - {"packaging"}, {"pinset"}).keys() == {"packaging (from packaging)"}


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
