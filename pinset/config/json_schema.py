"""The JSON Schema of pins.yaml, generated from the reader's own key sets and patterns (config/schema.py), so
an editor validates pins.yaml as pinset reads it (`pinset schema`, shipped as pinset/data/pins.schema.json).

It says what a document's shape alone can say: keys, types, patterns, exactly-one rules. What needs the
disk or other keys stays with the reader: that `patches:` exist and parse, that a local `upstream:` or
`repo:` is a git repository, that a PR belongs to upstream, that ids stay unique after `each: true` and
builds after selector mappings are normalised, that regexes compile and selectors parse. It is also
stricter on scalar types: the reader takes a number's text where a string is expected (`id: 42`); the
schema asks for the string an editor would quote.
"""

from __future__ import annotations

import re
from typing import Any, cast

from pinset import runner
from pinset.config import schema as s

SCHEMA_ID = "https://pinset.invalid/pins.schema.json"


def _pattern(regex: re.Pattern, *, full: bool = False) -> str:
    """A Python pattern as ECMA-262 (JSON Schema's dialect): named groups unnamed, fullmatch anchored."""
    text = re.sub(r"\(\?P<\w+>", "(", regex.pattern)
    return f"^(?:{text})$" if full else text


NON_BLANK = {"type": "string", "pattern": r"\S"}
SHA40 = {"type": "string", "pattern": "^[0-9a-fA-F]{40}$"}  # the reader lower-cases before it checks
ARCH = {"oneOf": [{"type": "string", "pattern": _pattern(s.ARCH_RE, full=True)},
                  {"type": "integer", "minimum": 10, "maximum": 999}]}  # `architectures: 90`
COUNT = {"type": "integer", "minimum": 1, "maximum": 1000}
MIN_AGE = {"type": "string", "pattern": "^(?=[0-9]*[1-9])[0-9]{1,6}[mhdw]$",
           "description": "only builds at least this old: 90m, 48h, 2d, 1w (the tag's commit time, the sdist's upload)"}
LABEL = {"type": "string", "pattern": r"^[^\s,]([^,]*[^\s,])?$"}  # a runner label: no comma, no edge blanks


def _check_kind(kind: str) -> dict:
    needed, allowed = s.CHECK_KINDS[kind]
    feature = {**NON_BLANK, "description": "the feature the check proves (a label shown in results)"}
    props = cast("dict[str, Any]", {
        "backend-op": {"op": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]*$"}, "params": NON_BLANK,
                       "mode": {"enum": ["test", "perf"]}},
        "ctest": {"name": NON_BLANK},
        "command": {"argv": {"type": "array", "minItems": 1, "items": NON_BLANK}, "expect": NON_BLANK,
                    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": runner.MAX_TIMEOUT_S}},
        "arch": {"name": {"type": "string", "pattern": s.ARCH_NAME_RE.pattern,
                          "description": "test-llama-archs -a: a llama.cpp architecture name"},
                 "seed": {"type": "integer", "minimum": 0, "maximum": 2 ** 63 - 1}},
        "mtmd": {"tests": {**NON_BLANK, "description": "test-mtmd-impl's filter: a regex the whole test name matches"},
                 "projector": {**NON_BLANK, "description": f"the projector checked (runs {s.MTMD_PROJECTOR_TESTS} "
                                                           "unless `tests` is given)"}},
    }[kind])
    props["feature"] = feature
    assert set(props) == allowed, kind  # the reader's key sets are the schema's
    return {"type": "object", "additionalProperties": False, "required": sorted(needed),
            "properties": {k: props[k] for k in sorted(allowed)}}


UNIONS = {"type": "boolean", "description": "provable add/add conflicts (both sides only added, different "
                              "constructs) are resolved as upstream's addition then the pin's (docs/heal.md)"}


def _pin() -> dict:
    props = {
        "id": {"type": "string", "pattern": s.PIN_ID_RE.pattern},
        "patches": {**NON_BLANK, "description": "a folder of format-patch files (name order) or one .patch file"},
        "each": {"type": "boolean", "description": "each patch of the `patches:` folder is its own pin ID/NAME"},
        "pr": {"type": "string", "anyOf": [{"pattern": _pattern(s.PR_URL_RE)}, {"pattern": _pattern(s.PR_COMMIT_URL_RE)}]},
        "commit": SHA40,
        "repo": {**NON_BLANK, "description": "a PR from a fork: the repository (URL or path) its commit is fetched from",
                 "anyOf": [{"not": {"pattern": "^https?://"}}, {"pattern": r"^https?://[^/\s]+/\S+$"}]},
        "required": {"type": "boolean"},
        "checks": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/check"}},
        "unchecked": NON_BLANK,
        "description": NON_BLANK,
        "evidence": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": list(s.EVIDENCE_KINDS)},
                     "description": "the evidence this pin needs, replacing what its files imply"},
        s.SKIP_UNLESS_OPEN: {"type": "boolean", "description": "a PR pin left out (status not-open) once its pull "
                                                               "request is merged or closed"},
        "unions": UNIONS,
    }
    assert set(props) == s.PIN_KEYS
    return {
        "type": "object", "additionalProperties": False, "required": ["id"], "properties": props,
        "allOf": [
            {"oneOf": [{"required": ["patches"]}, {"required": ["pr"]}]},
            {"if": {"required": ["patches"]}, "then": {"not": {"anyOf": [
                {"required": ["commit"]}, {"required": ["repo"]}, {"required": [s.SKIP_UNLESS_OPEN]}]}}},
            {"if": {"required": ["pr"]}, "then": {"not": {"required": ["each"]}}},
            # `each: true` is for a folder: a path naming a .patch file is one pin
            {"if": {"required": ["each"], "properties": {"each": {"const": True}}},
             "then": {"properties": {"patches": {"not": {"pattern": r"\.patch$"}}}}},
            # a PR pin names its commit: `commit:`, or a .../pull/N/commits/SHA URL
            {"if": {"required": ["pr"], "not": {"required": ["commit"]}},
             "then": {"properties": {"pr": {"pattern": _pattern(s.PR_COMMIT_URL_RE)}}}},
            {"not": {"required": ["checks", "unchecked"]}},
        ],
    }


def _build() -> dict:
    return {"oneOf": [
        {"type": "string", "anyOf": [{"pattern": _pattern(s.PYPI_BUILD_RE)}, {"pattern": _pattern(s.BUILD_RE)},
                                     {"pattern": "^(tags|pypi):"}]},
        {"type": "object", "additionalProperties": False, "required": ["tags"], "properties": {"tags": {
            "type": "object", "additionalProperties": False, "required": ["match", "newest"],
            "properties": {"match": NON_BLANK, "newest": COUNT, "min-age": MIN_AGE}}}},
        {"type": "object", "additionalProperties": False, "required": ["pypi"], "properties": {"pypi": {
            "type": "object", "additionalProperties": False, "required": ["package", "versions"],
            "properties": {"package": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"}, "versions": NON_BLANK,
                           "newest": COUNT, "min-age": MIN_AGE}}}},
    ]}


def pins_schema() -> dict:
    top: dict[str, Any] = {
        "upstream": {**NON_BLANK, "description": "git URL or local path of upstream llama.cpp"},
        "builds": {"type": "array", "minItems": 1, "uniqueItems": True, "items": _build()},
        "pins": {"type": "array", "items": {"$ref": "#/$defs/pin"}},
        "cuda": {"type": "object", "additionalProperties": False, "properties": {
            "architectures": ARCH,
            "flags": {"type": "array", "items": {"type": "string", "pattern": r"^-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=\S*$"}}}},
        "description": NON_BLANK,
        "checks": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/check"},
                   "description": "checks of the pin set itself (features upstream carries now), run on every build"},
        "gpus": {"type": "object", "minProperties": 1, "propertyNames": {"pattern": s.GPU_CLASS_RE.pattern},
                 "additionalProperties": {
                     "type": "object", "additionalProperties": False, "required": sorted(s.GPU_CLASS_KEYS),
                     "properties": {"runs-on": {"oneOf": [LABEL, {"type": "array", "minItems": 1, "uniqueItems": True,
                                                                  "items": LABEL}]},
                                    "architectures": ARCH}}},
        "unions": UNIONS,
    }
    assert set(top) == s.TOP_KEYS and set(top["cuda"]["properties"]) == s.CUDA_KEYS
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
        "title": "pinset pins.yaml", "description": "A llama.cpp pin set: upstream builds and the pins applied onto them "
                                                    "(generated by `pinset schema`; README.md, section pins.yaml)",
        "type": "object", "additionalProperties": False, "required": ["builds"], "properties": top,
        # without `upstream:` only sdist builds and patch pins: nothing could fetch a tag, commit or PR
        "if": {"not": {"required": ["upstream"]}},
        "then": {"properties": {
            "builds": {"items": {"anyOf": [{"type": "string", "pattern": "^pypi:"}, {"type": "object", "required": ["pypi"]}]}},
            "pins": {"items": {"not": {"required": ["pr"]}}}}},
        "$defs": {"pin": _pin(), "check": {"type": "object", "minProperties": 1, "maxProperties": 1,
                                           "additionalProperties": False,
                                           "properties": {k: _check_kind(k) for k in sorted(s.CHECK_KINDS)}}},
    }
