"""pins.yaml from the files other distributors keep their pin sets in (`pinset import`).

- Unsloth-style `pr-set.json`: an ordered list of PR commit URLs, each optionally with `required` (format
  below, and in the README).
- An Ollama-style checkout: `Makefile.sync` names the upstream (`UPSTREAM`) and the build (`FETCH_HEAD`);
  `llama/patches/*.patch` are independent patches, each its own pin, in name order.

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

from pinset.config.schema import FULL_SHA_RE, PIN_ID_RE, PIN_ID_RULE, PR_COMMIT_URL_RE, PR_URL_RE
from pinset.errors import PinsetError

DEFAULT_UPSTREAM = "https://github.com/ggml-org/llama.cpp"
DEFAULT_BUILDS = "tags:b*:1"  # upstream's newest release tag, when the source names no build
PR_SET_ENTRY_KEYS = {"url", "pr", "commit", "required", "description", "id", "repo"}
PR_SET_TOP_KEYS = {"upstream", "builds", "prs", "description"}


class ImportProblem(PinsetError):
    """The source is not in the format read (exit 2, naming the file and entry)."""


@dataclass(frozen=True)
class Imported:
    upstream: str
    builds: tuple[str, ...]
    pins: tuple[dict, ...]  # pins.yaml pin mappings, plus "_from": the comment naming the source
    description: str | None = None
    notes: tuple[str, ...] = ()  # what the import decided that the user should hear (the command says it)


def _q(value) -> str:
    """A YAML scalar: JSON's string and bool spelling is YAML too, and quotes what needs quoting."""
    return json.dumps(value, ensure_ascii=False)


def to_yaml(imported: Imported, header: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines.append(f"upstream: {_q(imported.upstream)}")
    lines.append(f"builds: [{', '.join(_q(b) for b in imported.builds)}]")
    if imported.description:
        lines.append(f"description: {_q(imported.description)}")
    lines.append("pins:")
    for pin in imported.pins:
        lines.append(f"  # {pin['_from']}")
        first = True
        for key in ("id", "pr", "commit", "repo", "patches", "required", "description", "unchecked"):
            if key in pin:
                lines.append(f"  {'- ' if first else '  '}{key}: {_q(pin[key])}")
                first = False
    return "\n".join(lines) + "\n"


# --- pr-set.json ------------------------------------------------------------------------------------

def from_pr_set(path: Path, upstream: str | None, builds: list[str] | None) -> Imported:
    """`pr-set.json`: a list of entries, or {"upstream", "builds", "description", "prs": [entries]}. An entry is
    a PR commit URL (`.../pull/N/commits/SHA`) or a mapping {"url": that URL, or "pr": a PR URL + "commit": SHA;
    "required": bool (default true); "description"; "id"; "repo" (a fork)}. Order is kept."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ImportProblem(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ImportProblem(f"{path}: nested too deeply to be a pr-set.json (a list of PR commit URLs)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportProblem(f"{path}: cannot read: {exc}") from None
    description = None
    if isinstance(doc, dict):
        unknown = sorted(set(doc) - PR_SET_TOP_KEYS)
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
    return Imported(upstream or DEFAULT_UPSTREAM, tuple(builds or [DEFAULT_BUILDS]), tuple(pins), description,
                    tuple(notes))


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
    return pin


def _unique(pin_id: str, seen: set[str]) -> str:
    """The same PR twice (two of its commits) gets `owner#N`, `owner#N-2`, ..."""
    candidate, n = pin_id, 1
    while candidate in seen:
        n += 1
        candidate = f"{pin_id}-{n}"
    seen.add(candidate)
    return candidate


# --- Ollama-style checkout ----------------------------------------------------------------------------

_MAKE_VAR = r"^\s*{name}\s*(?::=|\?=|=)\s*(?P<value>\S+)\s*$"


def from_ollama(checkout: Path, out: Path, upstream: str | None, builds: list[str] | None) -> Imported:
    """`Makefile.sync` (`UPSTREAM := URL`, `FETCH_HEAD := SHA`) and `llama/patches/*.patch`, each its own pin
    (`ollama/NAME`, name order), with `patches:` paths relative to the output file's folder."""
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
    if not FULL_SHA_RE.match(sha):
        raise ImportProblem(f"{makefile}:{text[:head.start('value')].count(chr(10)) + 1}: FETCH_HEAD: "
                            f"{head['value']!r} is not a 40-hex-digit commit")
    named = re.search(_MAKE_VAR.format(name="UPSTREAM"), text, re.M)
    folder = checkout / "llama" / "patches"
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".patch"))
    except OSError as exc:
        raise ImportProblem(f"{folder}: cannot read ({(exc.strerror or str(exc)).lower()})") from None
    if not names:
        raise ImportProblem(f"{folder}: no *.patch files")
    pins = []
    for name in names:
        pin_id = f"ollama/{name.removesuffix('.patch')}"
        if not PIN_ID_RE.match(pin_id):
            raise ImportProblem(f"{folder / name}: makes a malformed pin id {pin_id!r} ({PIN_ID_RULE})")
        rel = os.path.relpath(folder / name, out.parent)
        pins.append({"id": pin_id, "patches": rel, "_from": f"{checkout.name}/llama/patches/{name}"
                                                             f" (Makefile.sync FETCH_HEAD {sha[:12]})"})
    return Imported(upstream or (named["value"] if named else DEFAULT_UPSTREAM), tuple(builds or [sha]), tuple(pins))
