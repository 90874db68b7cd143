"""How a pin applied: the apply modes of `pinset sim` (docs/heal.md).

`exact`: every patch applies as it is (`git apply`, no offset); `offset`: some hunk applies only
lines away from where the patch says; `3-way`: some patch needed a 3-way merge; `resolution`: some
conflict was resolved by the pin's resolution ledger; `union`: some conflict was a provable add/add union
that pinset resolved itself (pins.yaml `unions: true`, sim/unions.py: no person wrote it). A pin that applies but not `exact` needs a
`pinset refresh` (or, for `resolution`, keeps working only while its recorded resolutions match).
"""

from __future__ import annotations

import re
from typing import Literal

ApplyMode = Literal["exact", "offset", "3-way", "resolution", "union"]
EXACT: ApplyMode = "exact"
OFFSET: ApplyMode = "offset"
THREE_WAY: ApplyMode = "3-way"
RESOLUTION: ApplyMode = "resolution"
UNION: ApplyMode = "union"
APPLY_MODES: tuple[ApplyMode, ...] = (EXACT, OFFSET, THREE_WAY, RESOLUTION, UNION)   # in order: the worst one names the pin's
# What `pinset refresh` rewrites: a pin applied lines away, by a 3-way merge or by add/add unions (its series
# then holds the union, the same one sim made: the next night it applies exactly). A `resolution` pin keeps
# working while its recorded resolutions match (refresh refuses it: rebase it instead).
REFRESHABLE: tuple[ApplyMode, ...] = (OFFSET, THREE_WAY, UNION)

# git apply -v: "Hunk #2 succeeded at 120 (offset 5 lines)." (fuzz needs -C, which pinset never gives)
_OFFSET_RE = re.compile(r"^Hunk #\d+ succeeded at \d+ \(offset -?\d+ lines?\)\.", re.M)


def direct_mode(stderr: str) -> ApplyMode:
    """`exact` or `offset` from a successful `git apply -v` (no --3way)."""
    return OFFSET if _OFFSET_RE.search(stderr) else EXACT


def worst(modes) -> ApplyMode | None:
    modes = list(modes)
    return max(modes, key=APPLY_MODES.index) if modes else None


def needs_refresh(mode: str | None) -> bool:
    """The one rule for "needs a refresh" (PinResult.needs_refresh applies it to an applied pin)."""
    return mode in REFRESHABLE
