"""pins.yaml from the files other distributors keep their pin sets in (`pinset import`).

- Unsloth's `scripts/unsloth/pr-set.json` as it is: `_doc` (kept as comments), an ordered list of PR commit
  URLs, PRs of a fork of upstream (a pin with `repo:`), `{"url", "required": false}` = "skip this entry once
  its PR is not open" (not pinset's "may fail").
- Unsloth's `feature-checks.json` with it: checks keyed by feature, on their `owner` pin (`owner: null`: the
  pin set's own `checks:`, they outlive the pin), `unchecked` reasons per pin.
- An Ollama-style checkout: `Makefile.sync` names the upstream (`UPSTREAM`) and the build (`FETCH_HEAD`, full
  or abbreviated: the command resolves it against upstream); `llama/patches/*.patch` become one folder pin
  with `each: true` (each patch its own pin `ollama/NAME`, in name order; a patch added later is seen).

Each importer returns the pins.yaml text, one YAML comment per pin naming where it came from. Pure: reads
only its source, writes nothing (the command validates the text through the reader before it writes it).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload
from urllib.parse import urlsplit

from pinset.config import schema
from pinset.config.schema import FULL_SHA_RE, PIN_ID_RE, PIN_ID_RULE, PR_COMMIT_URL_RE, PR_URL_RE, SHA_RE
from pinset.errors import PinsetError

DEFAULT_UPSTREAM = "https://github.com/ggml-org/llama.cpp"
DEFAULT_BUILDS = "tags:b*:1"  # upstream's newest release tag, when the source names no build
PR_SET_ENTRY_KEYS = {"url", "pr", "commit", "required", "description", "id", "repo"}
PR_SET_TOP_KEYS = {"upstream", "builds", "prs", "description"}
# JSON has no comments: keys starting with `_` are the files' notes (Unsloth's `_doc`), kept as YAML comments
# The pin key for Unsloth's `"required": false` ("skip once its PR is not open")
SKIP_KEY = schema.SKIP_UNLESS_OPEN
FEATURE_TOP_KEYS = {"schema", "features", "unchecked"}
FEATURE_KEYS = {"owner", "checks"}
FEATURE_SCHEMAS = (1,)
# Unsloth's check kinds -> pins.yaml's (config/schema.py CHECK_KINDS): their keys, renamed where pinset's differ
FEATURE_CHECK_KEYS = {"arch": {"arch": "name", "seed": "seed"},
                      "backend-op": {"op": "op", "params": "params", "mode": "mode"},
                      "mtmd": {"projector": "projector", "tests": "tests"}}


class ImportProblem(PinsetError):
    """The source is not in the format read (exit 2, naming the file and entry)."""


@dataclass(frozen=True)
class Imported:
    upstream: str
    builds: tuple[str, ...]
    pins: tuple[dict, ...]  # pins.yaml pin mappings, plus "_from": the comment naming the source ("_notes": more)
    description: str | None = None
    notes: tuple[str, ...] = ()  # what the import decided that the user should hear (the command says it)
    doc: tuple[str, ...] = ()    # the source's own notes (`_doc`), written as comments under the header
    checks: tuple[dict, ...] = ()  # pin-set-level checks (features no pin carries), each with "_from"


def _q(value) -> str:
    """A YAML scalar: JSON's string and bool spelling is YAML too, and quotes what needs quoting."""
    return json.dumps(value, ensure_ascii=False)


def _check_yaml(check: dict) -> str:
    """`- KIND: {key: value, ...}` of one check mapping (flow style: one line per check)."""
    (kind, fields), = ((k, v) for k, v in check.items() if not k.startswith("_"))
    return f"- {kind}: {{{', '.join(f'{k}: {_q(v)}' for k, v in fields.items())}}}"


def _comment(text: str) -> str:
    return f"# {text}".rstrip()


def to_yaml(imported: Imported, header: str) -> str:
    lines = [_comment(line) for line in header.splitlines()]
    if imported.doc:
        lines.append("#")
        lines += [_comment(line) for line in imported.doc]
    lines.append(f"upstream: {_q(imported.upstream)}")
    lines.append(f"builds: [{', '.join(_q(b) for b in imported.builds)}]")
    if imported.description:
        lines.append(f"description: {_q(imported.description)}")
    if imported.checks:
        lines.append("checks:   # the pin set's own: features no pin carries any more (upstream does)")
        for check in imported.checks:
            lines.append(f"  {_comment(check['_from'])}")
            lines.append(f"  {_check_yaml(check)}")
    lines.append("pins:")
    for pin in imported.pins:
        lines.append(f"  {_comment(pin['_from'])}")
        lines += [f"  {_comment(note)}" for note in pin.get("_notes", ())]
        first = True
        for key in ("id", "pr", "commit", "repo", "patches", "each", SKIP_KEY, "required", "description",
                    "unchecked"):
            if key is not None and key in pin:
                lines.append(f"  {'- ' if first else '  '}{key}: {_q(pin[key])}")
                first = False
        if pin.get("checks"):
            lines.append("    checks:")
            for check in pin["checks"]:
                lines.append(f"      {_comment(check['_from'])}")
                lines.append(f"      {_check_yaml(check)}")
    return "\n".join(lines) + "\n"


def _notes_of(path: Path, key: str, value) -> list[str]:
    """A `_`-prefixed key's text (a string or a list of strings), as comment lines."""
    if isinstance(value, str):
        return value.splitlines() or [""]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [line for v in value for line in (v.splitlines() or [""])]
    raise ImportProblem(f"{path}: {key}: a note must be a string or a list of strings, got {_shape(value)}")


def _shape(value) -> str:
    return {dict: "a mapping", list: "a list", bool: "true/false", type(None): "null"}.get(type(value), repr(value))


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ImportProblem(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ImportProblem(f"{path}: nested too deeply to be a {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportProblem(f"{path}: cannot read: {exc}") from None


def is_feature_checks(path: Path) -> bool:
    """Unsloth's feature-checks.json (a mapping with `features`), told from a pr-set.json by its content."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError, RecursionError):
        return False
    return isinstance(doc, dict) and "features" in doc and "prs" not in doc


# --- pr-set.json ------------------------------------------------------------------------------------

def from_pr_set(path: Path, upstream: str | None, builds: list[str] | None) -> Imported:
    """`pr-set.json`: a list of entries, or {"upstream", "builds", "description", "prs": [entries]}. An entry is
    a PR commit URL (`.../pull/N/commits/SHA`) or a mapping {"url": that URL, or "pr": a PR URL + "commit": SHA;
    "required": bool (default true); "description"; "id"; "repo" (a fork)}. Order is kept."""
    doc = _read_json(path, "pr-set.json (a list of PR commit URLs)")
    description = None
    notes_doc: list[str] = []
    if isinstance(doc, dict):
        for key in sorted(k for k in doc if k.startswith("_")):
            notes_doc += _notes_of(path, key, doc[key])
        unknown = sorted(k for k in set(doc) - PR_SET_TOP_KEYS if not k.startswith("_"))
        if unknown:
            raise ImportProblem(f"{path}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(PR_SET_TOP_KEYS))})")
        if "prs" not in doc:
            raise ImportProblem(f"{path}: no \"prs\" list")
        upstream = upstream or _string(path, "upstream", doc.get("upstream"), optional=True)
        if builds is None and doc.get("builds") is not None:
            if not isinstance(doc["builds"], list) or not all(isinstance(b, str) and b for b in doc["builds"]):
                raise ImportProblem(f"{path}: builds: must be a list of build names")
            builds = doc["builds"]
        description = _string(path, "description", doc.get("description"), optional=True)
        entries = doc["prs"]
    else:
        entries = doc
    if not isinstance(entries, list) or not entries:
        raise ImportProblem(f"{path}: prs: must be a non-empty list of PR commit URLs or mappings")
    read = [_pr_entry(path, f"prs[{index}]", entry) for index, entry in enumerate(entries)]
    notes = _duplicates(path, read)
    upstream = upstream or DEFAULT_UPSTREAM
    notes += _forks(path, read, upstream)
    notes += _skip_unless_open(path, read)
    pins, ids = [], {p["id"] for p in read if p["_explicit"]}
    derived = [p["_derived"] for p in read]
    for index, pin in enumerate(read):
        if not pin.pop("_explicit"):
            wanted, pin["id"] = pin["id"], _unique(pin["id"], ids)
            if pin["id"] != wanted:
                first = derived.index(wanted)
                notes.append(f"{path.name}: prs[{index}] is a second commit of the PR of prs[{first}] "
                             f"({wanted}): pin id {pin['id']}")
        pin.pop("_derived")
        pin["_from"] = f"{path.name} prs[{index}]: {pin.pop('_url')}"
        pins.append(pin)
    return Imported(upstream, tuple(builds or [DEFAULT_BUILDS]), tuple(pins), description, tuple(notes),
                    tuple(notes_doc))


def _forks(path: Path, read: list[dict], upstream: str) -> list[str]:
    """A PR of another owner's repository of upstream's name on upstream's host (unslothai/llama.cpp while
    upstream is ggml-org/llama.cpp) is a PR of a fork: its pin fetches from there (`repo:`). A PR of a
    repository of another name is refused here, saying how to name its repository."""
    origin = schema.repository_of(upstream)
    if origin is None:   # a local upstream: its hosting is unknown, the PRs are fetched from it as they are
        return []
    host, upstream_repo = origin
    notes = []
    for index, pin in enumerate(read):
        if "repo" in pin:
            continue
        m = PR_URL_RE.match(pin["pr"])
        assert m is not None   # _pr_entry matched it
        pr_host = (urlsplit(pin["pr"]).hostname or "").lower()
        pr_repo = f"{m['owner']}/{m['repo']}".lower().removesuffix(".git")
        if pr_host != host or pr_repo == upstream_repo or upstream_repo.count("/") != 1:
            continue
        if pr_repo.split("/")[1] != upstream_repo.split("/")[1]:
            raise ImportProblem(f"{path}: prs[{index}]: PR {pin['pr']} belongs to {m['owner']}/{m['repo']}, but upstream "
                                f"is {upstream_repo}: if it is a fork, give the entry "
                                f"\"repo\": \"https://{host}/{m['owner']}/{m['repo']}\" (or name --upstream)")
        pin["repo"] = f"https://{pr_host}/{m['owner']}/{m['repo']}"
        notes.append(index)
    if not notes:
        return []
    owners = sorted({read[i]["repo"] for i in notes})
    return [f"{path.name}: {len(notes)} PR{'s' if len(notes) != 1 else ''} of a fork of {upstream_repo} "
            f"({', '.join(owners)}): fetched from there (`repo:`)"]


def _skip_unless_open(path: Path, read: list[dict]) -> list[str]:
    """Unsloth's `"required": false` is "skip this entry once its PR is not open", not pinset's `required: false`
    ("its failure does not fail the set"): imported as `skip-unless-open: true` on a required pin."""
    for pin in read:
        if pin.get("required") is False:
            del pin["required"]
            pin[SKIP_KEY] = True
    return []


def _duplicates(path: Path, read: list[dict]) -> list[str]:
    """Refuse what would silently become two pins of one thing: the same commit twice, an id given twice (or given
    to one entry and made from another's PR). Two commits of one PR are two pins (`owner#N`, `owner#N-2`), said."""
    commits: dict[str, int] = {}
    explicit: dict[str, int] = {}
    for index, pin in enumerate(read):
        if pin["commit"] in commits:
            raise ImportProblem(f"{path}: prs[{commits[pin['commit']]}] and prs[{index}] both name commit "
                                f"{pin['commit'][:12]}: one pin per commit (remove one of them)")
        commits[pin["commit"]] = index
        if pin["_explicit"]:
            if pin["id"] in explicit:
                raise ImportProblem(f"{path}: prs[{explicit[pin['id']]}] and prs[{index}] both have id {pin['id']!r}: "
                                    "ids must be unique")
            explicit[pin["id"]] = index
    for index, pin in enumerate(read):
        if not pin["_explicit"] and pin["id"] in explicit:
            raise ImportProblem(f"{path}: prs[{explicit[pin['id']]}].id {pin['id']!r} is the id prs[{index}] gets "
                                "from its PR: give one of them another id")
    return []


@overload
def _string(path: Path, key: str, value, optional: Literal[False] = False) -> str: ...
@overload
def _string(path: Path, key: str, value, optional: bool) -> str | None: ...
def _string(path: Path, key: str, value, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ImportProblem(f"{path}: {key}: must be a non-empty string, got {value!r}")
    return value


def _text(path: Path, key: str, value) -> str:
    """A required non-empty string (`_string` without the optional case)."""
    text = _string(path, key, value)
    assert text is not None  # noqa: S101 - _string raises rather than return None when not optional
    return text


def _pr_entry(path: Path, key: str, entry) -> dict:
    fields = {"url": entry} if isinstance(entry, str) else entry
    if not isinstance(fields, dict):
        raise ImportProblem(f"{path}: {key}: must be a PR commit URL or a mapping, got {entry!r}")
    entry_notes = [line for k in sorted(k for k in fields if k.startswith("_"))
                   for line in _notes_of(path, f"{key}.{k}", fields[k])]
    fields = {k: v for k, v in fields.items() if not k.startswith("_")}
    unknown = sorted(set(fields) - PR_SET_ENTRY_KEYS)
    if unknown:
        raise ImportProblem(f"{path}: {key}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(PR_SET_ENTRY_KEYS))})")
    url = _text(path, f"{key}.url", fields.get("url") or fields.get("pr"))
    m = PR_COMMIT_URL_RE.match(url)
    pr_url, commit = (m["pr"], m["commit"].lower()) if m else (url.rstrip("/"), None)
    pr = PR_URL_RE.match(pr_url)
    if not pr:
        raise ImportProblem(f"{path}: {key}: {url!r} is not a PR URL (https://HOST/OWNER/REPO/pull/N/commits/SHA)")
    if "commit" in fields:
        given = _text(path, f"{key}.commit", fields["commit"]).lower()
        if not FULL_SHA_RE.match(given):
            raise ImportProblem(f"{path}: {key}.commit: malformed sha {given!r} (need 40 hex digits)")
        if commit is not None and given != commit:
            raise ImportProblem(f"{path}: {key}.commit: {given} is not the commit its URL names ({commit})")
        commit = given
    if commit is None:
        raise ImportProblem(f"{path}: {key}: {url!r} names no commit: a pin is an exact commit "
                            "(.../pull/N/commits/SHA, or a \"commit\" key)")
    derived = f"{pr['owner']}#{pr['number']}"
    pin = {"id": fields.get("id") or derived, "pr": pr_url, "commit": commit, "_url": url,
           "_explicit": bool(fields.get("id")), "_derived": derived}
    if not isinstance(pin["id"], str) or not PIN_ID_RE.match(pin["id"]):
        raise ImportProblem(f"{path}: {key}.id: malformed id {pin['id']!r} ({PIN_ID_RULE})")
    if "required" in fields:
        if not isinstance(fields["required"], bool):
            raise ImportProblem(f"{path}: {key}.required: must be true or false, got {fields['required']!r}")
        pin["required"] = fields["required"]
    for name in ("description", "repo"):
        if name in fields:
            pin[name] = _string(path, f"{key}.{name}", fields[name])
    if entry_notes:
        pin["_notes"] = entry_notes
    return pin


def _unique(pin_id: str, seen: set[str]) -> str:
    """The same PR twice (two of its commits) gets `owner#N`, `owner#N-2`, ..."""
    candidate, n = pin_id, 1
    while candidate in seen:
        n += 1
        candidate = f"{pin_id}-{n}"
    seen.add(candidate)
    return candidate


# --- feature-checks.json ------------------------------------------------------------------------------

def with_feature_checks(imported: Imported, path: Path, checked: frozenset[str] = frozenset()) -> Imported:
    """Unsloth's feature-checks.json onto the pins of `imported`: `{"schema": 1, "features": {NAME: {"owner": PIN
    or null, "checks": [{"kind": "arch" | "backend-op" | "mtmd", ...}]}}, "unchecked": {PIN: reason}}` (plus `_doc`).
    A feature's checks go to its owner pin (pins.yaml `checks:`, each with `feature: NAME`); an owner-less one's to
    the pin set's own `checks:` (the feature arrives through the base now: its check outlives the pin). An owner
    naming no pin is bad input (its checks would be lost); an `unchecked` reason for no pin is said and dropped."""
    doc = _read_json(path, "feature-checks.json")
    if not isinstance(doc, dict) or "features" not in doc:
        raise ImportProblem(f"{path}: not a feature-checks.json (a mapping with \"features\")")
    notes_doc = [line for k in sorted(k for k in doc if k.startswith("_")) for line in _notes_of(path, k, doc[k])]
    unknown = sorted(k for k in set(doc) - FEATURE_TOP_KEYS if not k.startswith("_"))
    if unknown:
        raise ImportProblem(f"{path}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(FEATURE_TOP_KEYS))})")
    if "schema" in doc and doc["schema"] not in FEATURE_SCHEMAS:
        raise ImportProblem(f"{path}: schema: {doc['schema']!r} is not a feature-checks.json schema pinset reads "
                            f"({', '.join(map(str, FEATURE_SCHEMAS))})")
    features, unchecked = doc["features"], doc.get("unchecked", {})
    if not isinstance(features, dict):
        raise ImportProblem(f"{path}: features: must be a mapping of feature name to {{owner, checks}}")
    if not isinstance(unchecked, dict):
        raise ImportProblem(f"{path}: unchecked: must be a mapping of pin to reason")
    pins = [dict(pin) for pin in imported.pins]
    by_id = {pin["id"]: pin for pin in pins}
    known = ", ".join(by_id) or "none"
    pin_set_checks: list[dict] = []
    for name, feature in features.items():
        key = f"features.{name}"
        if not isinstance(feature, dict):
            raise ImportProblem(f"{path}: {key}: must be a mapping {{owner, checks}}, got {_shape(feature)}")
        bad = sorted(k for k in set(feature) - FEATURE_KEYS if not k.startswith("_"))
        if bad:
            raise ImportProblem(f"{path}: {key}.{bad[0]}: unknown key (allowed: {', '.join(sorted(FEATURE_KEYS))})")
        owner = feature.get("owner")
        if owner is not None and (not isinstance(owner, str) or owner not in by_id):
            raise ImportProblem(f"{path}: {key}.owner: {owner!r} names no pin of the pin set (pins: {known})")
        checks = feature.get("checks")
        if not isinstance(checks, list) or not checks:
            raise ImportProblem(f"{path}: {key}.checks: must be a non-empty list of checks")
        made = [_feature_check(path, f"{key}.checks[{i}]", name, check) for i, check in enumerate(checks)]
        for check in made:
            check["_from"] = f"{path.name} {key}" + ("" if owner else " (owner null: upstream carries it)")
        if owner is None:
            pin_set_checks += made
        else:
            by_id[owner].setdefault("checks", []).extend(made)
    notes = list(imported.notes)
    for pin_id, reason in unchecked.items():
        if not isinstance(reason, str) or not reason.strip():
            raise ImportProblem(f"{path}: unchecked.{pin_id}: must be a non-empty reason, got {_shape(reason)}")
        if pin_id not in by_id:
            notes.append(f"{path.name}: unchecked.{pin_id}: no such pin in the pin set (dropped)")
            continue
        if by_id[pin_id].get("checks"):
            raise ImportProblem(f"{path}: unchecked.{pin_id}: the pin also owns features with checks "
                                "(a pin has either checks or an `unchecked:` reason)")
        by_id[pin_id]["unchecked"] = reason
    # every pin in features or in unchecked (Unsloth's own lint): a pin with neither is said, not guessed
    silent = [pin["id"] for pin in pins if not pin.get("checks") and "unchecked" not in pin and pin["id"] not in checked]
    if silent:
        notes.append(f"{path.name}: {len(silent)} pin(s) with no feature check and no unchecked reason: "
                     f"{', '.join(silent)} (verify says so)")
    return Imported(imported.upstream, imported.builds, tuple(pins), imported.description, tuple(notes),
                    imported.doc + (("", f"{path.name}:") + tuple(notes_doc) if notes_doc else ()),
                    imported.checks + tuple(pin_set_checks))


def feature_checks_onto(path: Path, pins_yaml: Path) -> tuple[str, Imported]:
    """Unsloth's feature-checks.json onto an existing pins.yaml (its pins are the owners): that file's text with
    lines added and nothing else changed (its comments, order and style kept): `checks:` / `unchecked:` under each
    owner pin, the owner-less features' checks as the pin set's `checks:` at the end. A pin that has checks or an
    unchecked reason already, an owner that is one patch of an `each: true` folder, a pin written in flow style,
    a pin set with its own `checks:` already: one line, exit 2 (edit them by hand, or import both files again)."""
    import yaml

    from pinset.config.reading import compose, decode_utf8, read_regular_file

    pinset = schema.load_pinset(pins_yaml)
    text = decode_utf8(pins_yaml, read_regular_file(pins_yaml, "pin set file"))
    root = compose(pins_yaml, text)
    top = {k.value: v for k, v in root.value}
    nodes: dict[str, yaml.MappingNode] = {}
    for node in (top["pins"].value if "pins" in top else []):
        fields = {k.value: v for k, v in node.value}
        nodes[fields["id"].value] = node
    base = Imported(pinset.upstream or "", pinset.builds,
                    tuple({"id": pin.id, "_from": ""} for pin in pinset.pins))
    imported = with_feature_checks(base, path, frozenset(p.id for p in pinset.pins if p.checks or p.unchecked))
    inserts: list[tuple[int, str]] = []
    for pin, spec in zip(imported.pins, pinset.pins):
        if not pin.get("checks") and "unchecked" not in pin:
            continue
        where = f"{pins_yaml}:{spec.line}: pin {spec.id}"
        node = nodes.get(spec.id)
        if node is None:
            raise ImportProblem(f"{where}: one patch of an `each: true` folder: its checks would be every patch's "
                                "(give the folder's pins their own entries, or the checks by hand)")
        if spec.checks or spec.unchecked:
            raise ImportProblem(f"{where}: has {'checks' if spec.checks else 'an unchecked reason'} already "
                                f"({path.name} would add more): edit them by hand, or import both files again")
        if node.flow_style:
            raise ImportProblem(f"{where}: written in flow style ({{...}}): add its checks by hand")
        indent = " " * node.value[0][0].start_mark.column
        lines = _pin_check_lines(pin, indent)
        inserts.append((_end_of(text, _last_scalar(node)), "".join(f"\n{line}" for line in lines)))
    if imported.checks:
        if "checks" in top:
            raise ImportProblem(f"{pins_yaml}:{top['checks'].start_mark.line + 1}: checks: the pin set has checks "
                                f"already ({path.name} would add more): edit them by hand")
        tail = ["checks:   # the pin set's own: features no pin carries any more (upstream does)"]
        for check in imported.checks:
            tail += [f"  {_comment(check['_from'])}", f"  {_check_yaml(check)}"]
        inserts.append((len(text.rstrip("\n")), "\n" + "\n".join(tail)))
    for at, added in sorted(inserts, reverse=True):
        text = text[:at] + added + text[at:]
    return (text if text.endswith("\n") else text + "\n"), imported


def _pin_check_lines(pin: dict, indent: str) -> list[str]:
    if "unchecked" in pin:
        return [f"{indent}unchecked: {_q(pin['unchecked'])}"]
    lines = [f"{indent}checks:"]
    for check in pin["checks"]:
        lines += [f"{indent}  {_comment(check['_from'])}", f"{indent}  {_check_yaml(check)}"]
    return lines


def _last_scalar(node):
    """The last scalar of a node's subtree: where its text ends (a block collection's own end mark is the next
    token's start, past comments and blank lines)."""
    while isinstance(node.value, list) and node.value:   # a mapping's (key, value) pairs, a sequence's items
        node = node.value[-1][1] if isinstance(node.value[-1], tuple) else node.value[-1]
    return node


def _end_of(text: str, scalar) -> int:
    """Where the line holding the scalar's last character ends (after a comment on it). A block scalar (`|`, `>`)
    ends at the next token, past its line breaks: its text ends at the line break before that."""
    index = scalar.end_mark.index
    if scalar.style in ("|", ">"):
        end = max(text.rfind("\n", 0, index), scalar.start_mark.index)
        while True:   # back over blank lines and comments less indented than the content: the next entry's
            start = text.rfind("\n", scalar.start_mark.index, end)
            line = text[start + 1:end]
            if start < 0 or (line.strip() and not (line.lstrip().startswith("#")
                                                   and len(line) - len(line.lstrip()) <= scalar.start_mark.column)):
                return end
            end = start
    end = text.find("\n", index)
    return len(text) if end < 0 else end


def _feature_check(path: Path, key: str, feature: str, check) -> dict:
    """One of Unsloth's checks as a pins.yaml check mapping {KIND: {..., feature: NAME}}."""
    if not isinstance(check, dict):
        raise ImportProblem(f"{path}: {key}: must be a mapping with a \"kind\", got {_shape(check)}")
    kind = check.get("kind")
    if kind not in FEATURE_CHECK_KEYS:
        raise ImportProblem(f"{path}: {key}.kind: {kind!r} is not a check kind pinset runs "
                            f"({', '.join(FEATURE_CHECK_KEYS)})")
    renames = FEATURE_CHECK_KEYS[kind]
    bad = sorted(k for k in set(check) - set(renames) - {"kind"} if not k.startswith("_"))
    if bad:
        raise ImportProblem(f"{path}: {key}.{bad[0]}: unknown key for a {kind} check "
                            f"(allowed: {', '.join(sorted(renames))})")
    fields = {renames[k]: v for k, v in check.items() if k in renames}
    for needed in sorted(schema.CHECK_KINDS[kind][0]):
        if needed not in fields:
            theirs = next(k for k, v in renames.items() if v == needed)
            raise ImportProblem(f"{path}: {key}.{theirs}: missing")
    fields["feature"] = feature
    return {kind: fields}


# --- Ollama-style checkout ----------------------------------------------------------------------------

_MAKE_VAR = r"^\s*{name}\s*(?::=|\?=|=)\s*(?P<value>\S+)\s*$"


def from_ollama(checkout: Path, out: Path, upstream: str | None, builds: list[str] | None) -> Imported:
    """`Makefile.sync` (`UPSTREAM := URL`, `FETCH_HEAD := SHA`, full or abbreviated: `abbreviated_build` says
    which build the command must resolve against upstream) and the patch queue `llama/patches/` as one folder pin
    with `each: true` (each patch its own pin `ollama/NAME`, name order, read again on every run: a patch added
    to the queue is a pin without another import), its path relative to the output file's folder."""
    makefile = checkout / "Makefile.sync"
    try:
        text = makefile.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportProblem(f"{makefile}: cannot read ({exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else exc}): "
                            "not an Ollama-style checkout") from None
    head = re.search(_MAKE_VAR.format(name="FETCH_HEAD"), text, re.M)
    if not head:
        raise ImportProblem(f"{makefile}: no `FETCH_HEAD := <commit>` line")
    sha = head["value"].lower()
    if not (SHA_RE.match(sha) or re.fullmatch(r"[0-9a-f]{4,6}", sha)):
        raise ImportProblem(f"{makefile}:{text[:head.start('value')].count(chr(10)) + 1}: FETCH_HEAD: "
                            f"{head['value']!r} is not a commit (4 to 40 hex digits)")
    named = re.search(_MAKE_VAR.format(name="UPSTREAM"), text, re.M)
    folder = checkout / "llama" / "patches"
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".patch"))
    except OSError as exc:
        raise ImportProblem(f"{folder}: cannot read ({(exc.strerror or str(exc)).lower()})") from None
    if not names:
        raise ImportProblem(f"{folder}: no *.patch files")
    for name in names:
        pin_id = f"ollama/{name.removesuffix('.patch')}"
        if not PIN_ID_RE.match(pin_id):
            raise ImportProblem(f"{folder / name}: makes a malformed pin id {pin_id!r} ({PIN_ID_RULE})")
    rel = os.path.relpath(folder, out.parent)
    pin = {"id": "ollama", "patches": rel, "each": True,
           "_from": f"{checkout.name}/llama/patches: {len(names)} patches, each its own pin ollama/NAME in name order "
                    f"(Makefile.sync FETCH_HEAD {sha[:12]})"}
    return Imported(upstream or (named["value"] if named else DEFAULT_UPSTREAM), tuple(builds or [sha]), (pin,))


def abbreviated_build(imported: Imported, makefile_build: bool) -> str | None:
    """The build to resolve against upstream: Makefile.sync's FETCH_HEAD when it is abbreviated (and no --builds
    replaced it)."""
    build = imported.builds[0] if makefile_build and len(imported.builds) == 1 else None
    return build if build is not None and re.fullmatch(r"[0-9a-f]{4,39}", build) else None


def with_build(imported: Imported, build: str) -> Imported:
    """The import with its one build replaced (the full commit an abbreviated FETCH_HEAD names)."""
    pins = tuple({**pin, "_from": pin["_from"].replace(f"FETCH_HEAD {imported.builds[0][:12]}",
                                                        f"FETCH_HEAD {imported.builds[0]} = {build[:12]}")}
                 for pin in imported.pins)
    return Imported(imported.upstream, (build,), pins, imported.description, imported.notes, imported.doc,
                    imported.checks)
