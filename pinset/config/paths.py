"""The paths pins.yaml names, read before (and without) validating it: the outputs rule and the recovery of a
half-replaced pin folder need them even when the pin set does not load.

This is the config layer's one answer to "which files does this pin set name": nothing outside `config/`
parses pins.yaml for it. The bytes go through the same reader as `load_pinset` (config/reading.py: a regular
file of sane size, strict UTF-8, nesting and alias limits), so a hostile file costs no more here than there.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from pinset.config.reading import compose, decode_utf8, read_regular_file
from pinset.errors import ConfigError


def pin_paths(config: str | os.PathLike) -> list[str]:
    """The patch files and folders pins.yaml names (relative to its folder), read without validating:
    a pin set that does not load is the verb's error to report, in its own words."""
    path = Path(config)
    try:
        if not path.is_file():
            return []
        root = compose(path, decode_utf8(path, read_regular_file(path)))
    except (ConfigError, OSError, ValueError):  # unreadable: the verb's own reader says why
        return []
    found = []
    for pin in _items(_value(root, "pins")):
        for item in [patches] if isinstance(patches := _value(pin, "patches"), yaml.ScalarNode) else _items(patches):
            if isinstance(item, yaml.ScalarNode) and item.tag.endswith(":str") and item.value:
                found.append(str(path.parent / Path(item.value).expanduser()))
    return found


def _value(node, key: str):
    """The node under `key` of a mapping node, the last one as YAML's loader takes it (None for anything else)."""
    found = None
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                found = v
    return found


def _items(node) -> list:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []
