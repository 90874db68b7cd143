"""Pin status and apply mode are compared in their models only (issue 28): a verb, the report or heal asks a
predicate (`PinResult.conflicts`, `needs_refresh`, `did_not_apply`, ...), so "needs a refresh" or "did not
apply" has one definition. This reads every module's source and fails on a comparison of a `status`, `state`
or `apply_mode`/`mode` with a pin status or apply mode (its string or its constant) outside the models."""

from __future__ import annotations

import ast
from pathlib import Path

import pinset
from pinset.nightly.model import PIN_STATES
from pinset.sim.modes import APPLY_MODES

PACKAGE = Path(pinset.__file__).parent
# Where the states are defined and their predicates live.
# blame's bisection compares a pin's states as values: a change of state is what it looks for.
MODELS = {"sim/model.py", "sim/modes.py", "nightly/model.py", "verify/model.py", "nightly/blame.py"}
FIELDS = {"status", "state", "apply_mode", "mode", "pin_status"}
VALUES = set(PIN_STATES) | set(APPLY_MODES)
CONSTANTS = {"APPLIED", "UPSTREAM", "CONFLICT", "CONTRACT", "ERROR", "SKIPPED",
             "EXACT", "OFFSET", "THREE_WAY", "RESOLUTION", "REFRESHABLE", "FINE", "BROKEN", "STATUSES",
             "APPLY_MODES", "PIN_STATES"}


def _names_a_field(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in FIELDS) or (isinstance(node, ast.Name)
                                                                         and node.id in FIELDS)


def _names_a_value(node: ast.expr) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in VALUES:
            return True
        if (isinstance(n, ast.Name) and n.id in CONSTANTS) or (isinstance(n, ast.Attribute)
                                                               and n.attr in CONSTANTS):   # modes.EXACT
            return True
    return False


def _ranks_a_field(node: ast.expr) -> bool:
    """`APPLY_MODES.index(p.apply_mode)`: a field's place in the models' order of states or modes."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "index"
            and _names_a_value(node.func.value) and any(_names_a_field(a) for a in node.args))


def comparisons(source: str) -> list[int]:
    """Lines of `<status|state|mode> ==/!=/in <a pin status or apply mode>` (either side), and of any comparison
    of a field's rank in the models' order (`APPLY_MODES.index(p.apply_mode) > ...`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_ranks_a_field(s) for s in sides):
                lines.append(node.lineno)
            elif any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops) \
                    and any(_names_a_field(s) for s in sides) \
                    and any(_names_a_value(s) for s in sides if not _names_a_field(s)):
                lines.append(node.lineno)
    return lines


def test_no_module_outside_the_models_compares_a_pin_status_or_apply_mode():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in MODELS:
            found += [f"pinset/{rel}:{line}" for line in comparisons(path.read_text(encoding="utf-8"))]
    assert found == [], "ask the model's predicate instead: " + ", ".join(found)


def test_the_check_sees_a_comparison():
    """The reader finds what it must refuse (a check that matches nothing passes everything)."""
    assert comparisons('if p.status == "conflict":\n    pass\n') == [1]
    assert comparisons("x = [p for p in pins if p.apply_mode in REFRESHABLE]\n") == [1]
    assert comparisons("ok = CONFLICT != pin.state\n") == [1]
    assert comparisons("if pin.apply_mode == modes.EXACT:\n    pass\n") == [1]
    assert comparisons("worse = APPLY_MODES.index(after.apply_mode) > APPLY_MODES.index(before.apply_mode)\n") == [1]
    assert comparisons('if gate.status == "passed":\n    pass\n') == []
