"""The paths pins.yaml names, read before (and without) validating it: the outputs rule and the recovery of a
half-replaced pin folder need them even when the pin set does not load."""

from __future__ import annotations

import os
from pathlib import Path


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def pin_paths(config: str | os.PathLike) -> list[str]:
    """The patch files and folders pins.yaml names (relative to its folder), read without validating:
    a pin set that does not load is the verb's error to report, in its own words."""
    import yaml

    try:
        path = Path(config)
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return []
        data = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except Exception:  # noqa: BLE001 - any unreadable file: the verb's own reader says why
        return []
    pins = data.get("pins") if isinstance(data, dict) else None
    found = []
    for pin in pins if isinstance(pins, list) else []:
        patches = pin.get("patches") if isinstance(pin, dict) else None
        for item in _as_list(patches):
            if isinstance(item, str) and item:
                found.append(str(path.parent / Path(item).expanduser()))
    return found
