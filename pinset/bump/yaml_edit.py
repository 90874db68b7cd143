"""pins.yaml's first build replaced as text: every other byte (comments, key order, quoting, the other
entries) stays the user's own. A later entry that names the new build as a plain string goes, since
`builds:` may hold no duplicate (a selector that also yields it is fine: expansion keeps the first).

YAML anchors and aliases stay valid: an anchor on the first entry (`builds: [&ship b1, b2]`, used elsewhere as
`*ship`) is kept on the new value (`[&ship b3, b2]`), so every alias of it names the new build; a first entry that
is an alias (`*ship`) is replaced where the alias is written, never at its anchor's place. Positions come from the
parser's events (an alias's own place; a composed node is its anchor's)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from pinset.errors import PinsetError


def _scalar(name: str) -> str:
    """The build name as YAML text: plain where it reads back as itself, else double-quoted."""
    try:
        plain = yaml.safe_load(name) == name and "#" not in name and ": " not in name
    except yaml.YAMLError:
        plain = False
    return name if plain else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class _Mark:
    index: int


@dataclass
class _Item:
    """One entry of `builds:` where the text holds it: an alias at the alias, else the node's own text."""
    start_mark: _Mark
    end_mark: _Mark
    value: object            # a scalar's (or an alias's target scalar's) value; None for a collection
    alias: bool
    anchor: str | None
    tag_kept: bool           # a scalar's tag (`!!str b1`) is kept on the new value; a collection's is not


_PROPERTIES = re.compile(r"(?:&[^\s,\[\]{}]+\s+|![^\s,\[\]{}]*\s+)+")


def _items(text: str, builds) -> list[_Item]:
    """The entries of the top-level `builds:` sequence (`builds`, its composed node), from the parser's events:
    an alias at its own place, with the value of the scalar its anchor names."""
    anchors: dict[str, object] = {}
    events = list(yaml.parse(text))
    depth, expect_key, is_builds, start = 0, True, False, None
    for i, event in enumerate(events):
        if isinstance(event, yaml.ScalarEvent) and event.anchor:
            anchors[event.anchor] = event.value
        if depth == 1 and expect_key:   # a key of the top-level mapping (or its end)
            if isinstance(event, yaml.MappingEndEvent):
                break
            is_builds, expect_key = isinstance(event, yaml.ScalarEvent) and event.value == "builds", False
            continue
        if depth == 1:                   # its value
            if is_builds and isinstance(event, yaml.SequenceStartEvent):
                start = i
                break
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
            else:
                expect_key = True
            continue
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            expect_key = expect_key or depth == 1
    items: list[_Item] = []
    if start is None:
        return items
    nodes, inner = iter(builds.value), 0
    for event in events[start + 1:]:
        if isinstance(event, yaml.ScalarEvent) and event.anchor:
            anchors[event.anchor] = event.value
        if inner == 0 and isinstance(event, yaml.SequenceEndEvent):
            break
        if inner == 0 and isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)):
            node = next(nodes)
            if isinstance(event, yaml.AliasEvent):
                items.append(_Item(_Mark(event.start_mark.index), _Mark(event.end_mark.index),
                                   anchors.get(event.anchor), True, None, False))
            else:
                scalar = isinstance(event, yaml.ScalarEvent)
                items.append(_Item(_Mark(node.start_mark.index), _Mark(_end(text, node)),
                                   event.value if scalar else None, False, event.anchor, scalar))
        if isinstance(event, yaml.CollectionStartEvent):
            inner += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            inner -= 1
    return items


def set_first_build(text: str, name: str) -> str:
    """`text` with `builds:`'s first entry made `name` (and later plain entries equal to it removed)."""
    root = yaml.compose(text)
    builds = next((v for k, v in getattr(root, "value", []) if getattr(k, "value", None) == "builds"), None)
    if not isinstance(builds, yaml.SequenceNode) or not builds.value:
        raise PinsetError("pins.yaml: builds: not a non-empty list; nothing changed")
    items = _items(text, builds)
    first = items[0]
    start, end = first.start_mark.index, first.end_mark.index
    properties = _PROPERTIES.match(text, start, end) if not first.alias else None
    keep = ""
    if properties:   # the anchor (and a scalar's tag) stay: every alias of the anchor names the new build
        words = properties.group(0).split()
        keep = "".join(word + " " for word in words if word.startswith("&") or first.tag_kept)
    edits = [(start, end, keep + _scalar(name))]
    for later in items[1:]:
        if later.value == name and not isinstance(later.value, (dict, list)):
            if later.anchor:
                raise PinsetError(f"pins.yaml: builds: the entry {name!r} carries the anchor &{later.anchor}; remove "
                                  "it by hand (it would be a duplicate of the new first build)")
            edits.append(_removal(text, builds, later))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _end(text: str, node) -> int:
    """Where a node's own text ends (a block mapping's end mark may sit on the next line: trailing blank
    space and comments belong to the file, not the node)."""
    end = node.end_mark.index
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        end = _end(text, node.value[-1][1])
    return end


def _removal(text: str, seq, node) -> tuple[int, int, str]:
    """The edit that removes one entry of a flow (`[a, b]`) or block (`- b`) sequence."""
    start, end = node.start_mark.index, node.end_mark.index
    if seq.flow_style:
        before = text.rfind(",", 0, start)   # the comma that led to it (never the first entry)
        return before, end, ""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    if text[line_start:start].strip() != "-" or text[end:line_end].strip().split("#")[0].strip():
        raise PinsetError(f"pins.yaml: builds: the entry {text[start:end]!r} shares its line with more; "
                          "remove it by hand (it would be a duplicate of the new first build)")
    return line_start, line_end, ""
