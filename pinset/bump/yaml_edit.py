"""pins.yaml's first build replaced as text: every other byte (comments, key order, quoting, the other
entries) stays the user's own. A later entry that names the new build as a plain string goes, since
`builds:` may hold no duplicate (a selector that also yields it is fine: expansion keeps the first)."""

from __future__ import annotations

import yaml

from pinset.errors import PinsetError


def _scalar(name: str) -> str:
    """The build name as YAML text: plain where it reads back as itself, else double-quoted."""
    try:
        plain = yaml.safe_load(name) == name and "#" not in name and ": " not in name
    except yaml.YAMLError:
        plain = False
    return name if plain else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def set_first_build(text: str, name: str) -> str:
    """`text` with `builds:`'s first entry made `name` (and later plain entries equal to it removed)."""
    root = yaml.compose(text)
    builds = next((v for k, v in getattr(root, "value", []) if getattr(k, "value", None) == "builds"), None)
    if not isinstance(builds, yaml.SequenceNode) or not builds.value:
        raise PinsetError("pins.yaml: builds: not a non-empty list; nothing changed")
    first = builds.value[0]
    edits = [(first.start_mark.index, _end(text, first), _scalar(name))]
    for later in builds.value[1:]:
        if isinstance(later, yaml.ScalarNode) and later.value == name:
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
        raise PinsetError(f"pins.yaml: builds: the entry {node.value!r} shares its line with more; "
                          "remove it by hand (it would be a duplicate of the new first build)")
    return line_start, line_end, ""
