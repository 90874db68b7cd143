"""How a pin applied: the apply modes of `pinset sim` (docs/heal.md).

`exact`: every patch applies as it is (`git apply`, no offset); `offset`: some hunk applies only
lines away from where the patch says; `3-way`: some patch needed a 3-way merge; `resolution`: some
conflict was resolved by the pin's resolution ledger. A pin that applies but not `exact` needs a
`pinset refresh` (or, for `resolution`, keeps working only while its recorded resolutions match).
"""

from __future__ import annotations

import re

EXACT, OFFSET, THREE_WAY, RESOLUTION = "exact", "offset", "3-way", "resolution"
APPLY_MODES = (EXACT, OFFSET, THREE_WAY, RESOLUTION)   # in order: the worst one names the pin's

# git apply -v: "Hunk #2 succeeded at 120 (offset 5 lines)." (fuzz needs -C, which pinset never gives)
_OFFSET_RE = re.compile(r"^Hunk #\d+ succeeded at \d+ \(offset -?\d+ lines?\)\.", re.M)


def direct_mode(stderr: str) -> str:
    """`exact` or `offset` from a successful `git apply -v` (no --3way)."""
    return OFFSET if _OFFSET_RE.search(stderr) else EXACT


def worst(modes) -> str | None:
    modes = list(modes)
    return max(modes, key=APPLY_MODES.index) if modes else None


def needs_refresh(mode: str | None) -> bool:
    return mode in (OFFSET, THREE_WAY, RESOLUTION)
