"""The JSON Schema of pins.yaml agrees with the reader (issue 23 §2): documents drawn from valid and invalid
values of every key go through both, and both say the same. The shipped file is the generated one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from pinset.config.json_schema import pins_schema
from pinset.config.schema import load_pinset
from pinset.errors import ConfigError
from tests.testing import ROOT, GitRepo

SHIPPED = ROOT / "pinset" / "data" / "pins.schema.json"
UP = "https://github.com/ggml-org/llama.cpp"
SHA = "0123456789abcdef0123456789abcdef01234567"
VALIDATOR = jsonschema.Draft202012Validator(pins_schema())


def test_the_shipped_schema_is_the_generated_one_and_pinset_schema_prints_it():
    jsonschema.Draft202012Validator.check_schema(pins_schema())
    assert json.loads(SHIPPED.read_text()) == pins_schema()
    out = subprocess.run([sys.executable, "-m", "pinset", "schema"], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=True).stdout
    assert out == SHIPPED.read_text()


def test_the_projects_own_pin_set_is_valid_under_the_schema():
    assert list(VALIDATOR.iter_errors(yaml.safe_load((ROOT / "pins.yaml").read_text()))) == []


@pytest.fixture(scope="module")
def patch_dir(tmp_path_factory):
    """A folder with a real format-patch file and one such file alone: the values `patches:` takes here."""
    root = tmp_path_factory.mktemp("schema")
    repo = GitRepo(root / "repo")
    repo.commit("base", {"a.c": "int a;\n"})
    repo.commit("change", {"a.c": "int a = 1;\n"})
    repo.format_patch("HEAD~1..HEAD", root / "p")
    (root / "one.patch").write_bytes(next((root / "p").glob("*.patch")).read_bytes())
    return root


# values of each key: valid ones and invalid ones, all of them things the document's shape decides (what
# needs the disk or other keys, e.g. a commit URL contradicting `commit:`, is the reader's alone)
STR_BAD = ["", "   ", [], {}, None]
CHECKS = [
    [{"ctest": {"name": "test-chat"}}],
    [{"backend-op": {"op": "MUL_MAT", "params": "type_a=iq1_m", "mode": "perf"}}],
    [{"command": {"argv": ["{bin}/llama-cli", "--version"], "expect": "version", "timeout": 30}}],
    [], [{}], [{"ctest": {}}], [{"ctest": {"name": "x"}, "command": {"argv": ["a"], "expect": "b"}}],
    [{"backend-op": {"op": "mul_mat"}}], [{"backend-op": {"op": "MUL_MAT", "mode": "fast"}}],
    [{"command": {"argv": [], "expect": "v"}}], [{"command": {"argv": ["a"], "expect": "v", "timeout": 0}}],
    [{"command": {"argv": ["a"], "expect": "v", "timeout": 2_000_000}}], [{"ctest": {"name": "t", "x": 1}}],
]


def pick(draw, valid: list, invalid: list):
    """Mostly a valid value (so that many whole documents are valid too), sometimes an invalid one."""
    return draw(st.sampled_from(invalid)) if invalid and draw(st.integers(0, 7)) == 0 else draw(st.sampled_from(valid))


@st.composite
def pins(draw, index: int):
    kind = pick(draw, ["folder", "file", "pr", "pr-url"], ["both", "neither"])
    pin = {"id": pick(draw, [f"pin{index}", f"ggml-org#{index}"], ["-bad", "a b", *STR_BAD])}
    if kind in ("folder", "file", "both"):
        pin["patches"] = draw(st.sampled_from(["p", "p/"] if kind != "file" else ["one.patch"]))
        if kind == "folder" and draw(st.booleans()):
            pin["each"] = pick(draw, [True, False], ["yes"])
    if kind in ("pr", "both"):
        pin["pr"] = pick(draw, [f"{UP}/pull/{index + 1}"], [f"{UP}/pull/x", "not a url"])
        if draw(st.integers(0, 9)):
            pin["commit"] = pick(draw, [SHA, SHA.upper()], [SHA[:12], "zz" * 20, *STR_BAD])
    if kind == "pr-url":
        pin["pr"] = f"{UP}/pull/{index + 1}/commits/{SHA}"
        if draw(st.booleans()):
            pin["commit"] = SHA
    for key, valid, invalid in (("required", [True, False], ["no", 1]), ("description", ["one line"], STR_BAD),
                                ("unchecked", ["no GPU-visible feature"], STR_BAD),
                                ("repo", ["https://github.com/someone/llama.cpp"], ["http://", *STR_BAD]),
                                ("checks", CHECKS[:3], CHECKS[3:]), ("commit", [], [SHA]), ("each", [], [True]),
                                ("skip-unless-open", [True, False], ["yes", 1]), ("bogus", [], [1])):
        if key not in pin and draw(st.integers(0, 5)) == 0 and (valid or draw(st.integers(0, 3)) == 0):
            pin[key] = pick(draw, valid or invalid, invalid if valid else [])
            if key in ("repo", "skip-unless-open") and "pr" not in pin and valid and draw(st.integers(0, 3)):
                del pin[key]  # a patch pin's repo or skip-unless-open: invalid, kept rarely
    return pin


BUILDS = ["b1", "b2", "master", SHA, "pypi:llama-cpp-python==0.3.36", "tags:b*:3",
          # (a mapping equal to a string entry once normalised is a duplicate only the reader sees)
          {"tags": {"match": "b*", "newest": 2}}, {"pypi": {"package": "llama-cpp-python", "versions": ">=0.3.33"}},
          {"tags": {"match": "b*", "newest": 1, "min-age": "48h"}},
          {"pypi": {"package": "llama-cpp-python", "versions": ">=0.3.33", "min-age": "2d"}}]
BAD_BUILDS = [{"tags": {"match": "b*"}}, {"tags": {"match": "b*", "newest": 0}},
              {"tags": {"match": "b*", "newest": 3, "min-age": 48}}, {"tags": {"match": "b*", "newest": 3, "min-age": "0h"}},
              {"pypi": {"package": "llama-cpp-python", "versions": ">=0.3.33", "min-age": "2 d"}},
              {"tags": {"match": "b*", "newest": 3}, "pypi": {}}, {"other": 1}, "bad build!", "", None]


@st.composite
def documents(draw):
    doc = {}
    if draw(st.integers(0, 9)):
        doc["upstream"] = pick(draw, [UP], ["", None])
    if draw(st.integers(0, 9)):
        doc["builds"] = [pick(draw, BUILDS, BAD_BUILDS) for _ in range(draw(st.integers(1, 3)))] \
            if draw(st.integers(0, 9)) else draw(st.sampled_from([[], "b1", {}]))
    if draw(st.integers(0, 3)):
        doc["pins"] = [draw(pins(i)) for i in range(draw(st.integers(0, 3)))]
    if draw(st.integers(0, 3)) == 0:
        doc["cuda"] = pick(draw, [{"architectures": "90"}, {"architectures": "86;90"}, {"architectures": 90},
                                  {"architectures": "native"}, {"flags": ["-DGGML_CUDA_FA=OFF"]}],
                           [{"architectures": "9x"}, {"architectures": ""}, {"flags": ["oops"]}, {"other": 1}, []])
    if draw(st.integers(0, 3)) == 0:
        doc["gpus"] = pick(draw, [
            {"h200": {"runs-on": ["self-hosted", "h200"], "architectures": "90"}},
            {"a100": {"runs-on": "gpu-a100", "architectures": 80}}], [
            {"h200": {"runs-on": "h200"}}, {"h200": {"runs-on": "a,b", "architectures": "90"}},
            {"h200": {"runs-on": [], "architectures": "90"}}, {"h200": {"runs-on": ["x", "x"], "architectures": "90"}},
            {"-x": {"runs-on": "x", "architectures": "90"}}, {}, {"h200": {"runs-on": " x", "architectures": "90"}},
            {"h200": {"runs-on": "x", "architectures": "90", "more": 1}}])
    if draw(st.integers(0, 3)) == 0:
        doc["description"] = pick(draw, ["a pin set"], STR_BAD)
    if draw(st.integers(0, 19)) == 0:
        doc["bogus"] = 1
    return doc


def _reader_accepts(folder: Path, doc: dict) -> tuple[bool, str]:
    path = folder / "pins.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        load_pinset(path, require_pins=False)
    except ConfigError as exc:
        return False, str(exc)
    return True, ""


def _agrees(folder: Path, doc: dict) -> None:
    reader_ok, why = _reader_accepts(folder, doc)
    errors = [e.message for e in VALIDATOR.iter_errors(doc)]
    assert reader_ok == (not errors), (doc, why, errors[:3])


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=documents())
def test_schema_and_reader_agree(patch_dir, doc):
    _agrees(patch_dir, doc)


@pytest.mark.parametrize("doc", [
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "patches": "p", "each": True, "required": False}]},
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "pr": f"{UP}/pull/1/commits/{SHA}"}]},
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "pr": f"{UP}/pull/1", "commit": SHA,
                                                 "repo": "https://github.com/someone/llama.cpp"}]},
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "pr": f"{UP}/pull/1"}]},           # no commit
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "patches": "one.patch", "commit": SHA}]},
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "pr": f"{UP}/pull/1", "commit": SHA, "each": True}]},
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "pr": f"{UP}/pull/1", "commit": SHA, "skip-unless-open": True}]},
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "patches": "p", "skip-unless-open": True}]},
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "pr": f"{UP}/pull/1", "commit": SHA, "skip-unless-open": "no"}]},
    {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "patches": "p", "checks": CHECKS[0], "unchecked": "x"}]},
    {"upstream": UP, "builds": []}, {"builds": ["pypi:llama-cpp-python==0.3.36"], "cuda": {"architectures": 90}},
])
def test_named_cases_agree(patch_dir, doc):
    _agrees(patch_dir, doc)


def test_the_agreement_check_can_fail(patch_dir):
    """A document the schema takes and the reader refuses (a PR of another repository: the reader's own
    cross-key rule) shows as a disagreement."""
    doc = {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "pr": "https://github.com/x/y/pull/1", "commit": SHA}]}
    with pytest.raises(AssertionError):
        _agrees(patch_dir, doc)


ARCH_MTMD_CHECKS = [   # (check, valid): the kinds of Unsloth's feature-checks.json, and `feature:` on every kind
    ({"arch": {"name": "qwen3moe"}}, True), ({"arch": {"name": "gpt-oss", "seed": 7, "feature": "oss"}}, True),
    ({"mtmd": {}}, True), ({"mtmd": {"projector": "kimik3", "feature": "kimi-k3"}}, True),
    ({"mtmd": {"tests": "test_image_.*"}}, True), ({"backend-op": {"op": "MUL_MAT", "feature": "iq1"}}, True),
    ({"arch": {}}, False), ({"arch": {"name": "bad name"}}, False), ({"arch": {"name": "x", "seed": -1}}, False),
    ({"arch": {"name": "x", "seed": "1"}}, False), ({"arch": {"name": "x", "seed": 2 ** 63}}, False),
    ({"mtmd": {"projector": ""}}, False), ({"mtmd": {"other": 1}}, False), ({"ctest": {"name": "t", "feature": ""}}, False),
]


@pytest.mark.parametrize("check,valid", ARCH_MTMD_CHECKS)
@pytest.mark.parametrize("where", ["pin", "pin set"])
def test_arch_mtmd_and_pin_set_checks_agree(patch_dir, check, valid, where):
    doc: dict = {"upstream": UP, "builds": ["b1"], "pins": [{"id": "a", "patches": "p"}]}
    if where == "pin":
        doc["pins"][0]["checks"] = [check]
    else:
        doc["checks"] = [check]
    assert _reader_accepts(patch_dir, doc)[0] == valid, doc
    _agrees(patch_dir, doc)


def test_an_empty_pin_set_checks_list_is_refused_by_both(patch_dir):
    doc = {"upstream": UP, "builds": ["b1"], "checks": []}
    assert not _reader_accepts(patch_dir, doc)[0]
    _agrees(patch_dir, doc)
