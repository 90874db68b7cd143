"""The package's floors: every `pinset.X -> pinset.Y` import (top-level, in a function, under TYPE_CHECKING) goes
to the same floor or to one FLOORS lets it import, and no modules import each other in a circle. A new upward
import or a new circle fails here; docs/design.md ("The package's floors") shows the same table.

Read from the source (ast), not by importing: a lazy import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pinset"

# floor -> the floors it may import (besides its own), bottom to top: a floor names only floors above it in
# this table, so floors cannot import each other in a circle. A subpackage pinset/X/ is floor X; the
# top-level modules are in the floors TOP_LEVEL names.
FLOORS: dict[str, tuple[str, ...]] = {
    "core": (),
    "config": ("core",),
    "upstream": ("config", "core"),
    "sim": ("upstream", "config", "core"),
    "checks": ("core",),
    "build": ("checks", "config", "core"),
    "github": ("sim", "config", "core"),
    "heal": ("sim", "upstream", "config", "core"),
    "nightly": ("sim", "upstream", "config", "core"),
    "matrix": ("sim", "config", "core"),
    "measures": ("build", "checks", "sim", "config", "core"),
    "models": ("build", "core"),
    "verify": ("build", "checks", "sim", "config", "core"),
    "report": ("github", "measures", "verify", "nightly", "matrix", "sim", "build", "checks", "config", "core"),
    "forecast": ("report", "github", "sim", "upstream", "config", "core"),
    "bump": ("report", "github", "nightly", "heal", "sim", "upstream", "config", "core"),
    # reads results like report, and forecast's too
    "history": ("forecast", "report", "github", "measures", "verify", "nightly", "sim", "config", "core"),
    "annotations": ("verify", "sim", "core"),
    "commands": ("annotations", "history", "bump", "forecast", "report", "github", "verify", "models", "measures", "matrix", "nightly", "heal", "build",
                 "checks", "sim", "upstream", "config", "core"),
    # the verbs' modules are imported by name (importlib), not by an import; commands.paths: the options' roles
    "cli": ("commands", "annotations", "config", "core"),
}
# the top-level modules (pinset/NAME.py) that are not floor "core", and pinset/data/ (files, in core)
TOP_LEVEL = {"ci_annotations": "annotations", "cli": "cli", "__main__": "cli", "data": "core"}
# Module circles inside one floor that are known; the list only shrinks (an entry that is gone fails too).
KNOWN_CIRCLES: list[set[str]] = []


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports() -> dict[str, set[str]]:
    """module -> the pinset modules it imports; `from pkg import name` is pkg.name when that is a module."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        me = _module(path)
        package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
        found = graph.setdefault(me, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                names = [f"{base}.{a.name}" if _exists(f"{base}.{a.name}") else base for a in node.names]
            for name in names:
                if name == "pinset" or name.startswith("pinset."):
                    while not _exists(name):
                        name = name.rpartition(".")[0]
                    if name != me:
                        found.add(name)
    return graph


def floor(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "core"   # pinset/__init__.py
    if parts[1] in TOP_LEVEL:
        return TOP_LEVEL[parts[1]]
    return parts[1] if (PACKAGE / parts[1]).is_dir() else "core"


def test_every_module_has_a_floor():
    assert {floor(m) for m in imports()} <= set(FLOORS)


def test_floors_table_points_down_only():
    """Each floor names only floors listed before it: the table is bottom to top and has no circle."""
    seen: set[str] = set()
    for name, allowed in FLOORS.items():
        assert set(allowed) <= seen, f"{name} may import {sorted(set(allowed) - seen)}, not below it in FLOORS"
        seen.add(name)


def test_no_import_goes_up_or_sideways():
    bad = [f"{a} -> {b} ({floor(a)} may import {', '.join(FLOORS[floor(a)]) or 'only itself'})"
           for a, targets in sorted(imports().items()) for b in sorted(targets)
           if floor(b) != floor(a) and floor(b) not in FLOORS[floor(a)]]
    assert not bad, "imports against the floors (tests/packaging/test_layers.py FLOORS):\n" + "\n".join(bad)


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_new_circle():
    found = circles(imports())
    assert [c for c in found if c not in KNOWN_CIRCLES] == [], "modules importing each other in a circle"
    assert [c for c in KNOWN_CIRCLES if c not in found] == [], "a known circle is gone: remove it from KNOWN_CIRCLES"


def test_circle_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_design_md_shows_the_table():
    """docs/design.md's floor table lists the same floors, in order, each with what it may import."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("## The package's floors", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|[^|]*\| ([^|]*) \|$", section, re.M)
    shown = {name: tuple(re.findall(r"`(\w+)`", allowed)) for name, allowed in rows}
    assert list(shown) == list(reversed(FLOORS)), "docs/design.md lists the floors top to bottom"
    assert shown == FLOORS


def re_exports(source: str) -> list[str]:
    """Names a module imports only to hand on (a facade): an import marked `noqa: F401`, or an imported name in
    `__all__`."""
    tree = ast.parse(source)
    lines = source.splitlines()
    imported: dict[str, int] = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                imported[(alias.asname or alias.name).split(".")[0]] = node.lineno
            if any("noqa: F401" in line for line in lines[node.lineno - 1:node.end_lineno]):
                found += [alias.asname or alias.name for alias in node.names]
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            found += [n.value for n in ast.walk(node.value)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in imported]
    return found


def test_no_module_re_exports_a_name():
    """The facades are gone (issue 28): a name is imported from the module that defines it."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names = re_exports(path.read_text(encoding="utf-8"))
        if names:
            found[_module(path)] = names
    assert found == {}, "import these from the module that defines them"


def test_re_export_check_sees_a_facade():
    assert re_exports("from pinset.x import a, b  # noqa: F401\n") == ["a", "b"]
    assert re_exports("from pinset.x import a\n\ndef f():\n    pass\n\n__all__ = ['a', 'f']\n") == ["a"]
    assert re_exports("from pinset.x import a\n\n__all__ = ['f']\n\ndef f():\n    return a\n") == []


# Below commands/ a module says what it has to say through a `say`/`warn` callable the verb hands it, or in its
# result; these print themselves, each for a reason of its own.
KNOWN_PRINTS = {
    "pinset.ci_annotations": "GitHub workflow commands on stderr are what it makes",
    "pinset.store": "locked(): the one 'waiting for another pinset' line, from any floor that takes a lock",
    "pinset.upstream.select": "a tag selector's skipped tags (of a tree or blob) on stderr",
}


def argparse_and_prints(source: str) -> tuple[bool, bool]:
    """(imports argparse or names argparse.Namespace, calls or hands on print)."""
    reads = prints = False
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            reads = True
        elif isinstance(node, ast.ImportFrom) and node.module == "argparse":
            reads = True
        elif isinstance(node, ast.Name) and node.id == "Namespace":
            reads = True
        elif isinstance(node, ast.Name) and node.id == "print":   # called, or handed on (`say=print`)
            prints = True
    return reads, prints


def test_nothing_below_commands_reads_argparse_or_prints():
    """commands/ turns argparse options into calls (issue 28): below it no module sees argparse, and none prints
    but the KNOWN_PRINTS."""
    reading, printing = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        if floor(module) in ("commands", "cli"):
            continue
        reads, prints = argparse_and_prints(path.read_text(encoding="utf-8"))
        reading += [module] if reads else []
        printing |= {module} if prints else set()
    assert reading == [], "argparse below commands/: pass an options object instead"
    assert printing == set(KNOWN_PRINTS), "print below commands/: hand the module a `say` (or drop a known one)"


def test_argparse_check_sees_both():
    assert argparse_and_prints("import argparse\n") == (True, False)
    assert argparse_and_prints("def f(args: Namespace):\n    print(args)\n") == (True, True)
    assert argparse_and_prints("def f(say=print):\n    say('x')\n") == (False, True)
    assert argparse_and_prints("def f(say):\n    say('x')\n") == (False, False)
