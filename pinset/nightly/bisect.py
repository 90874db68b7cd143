"""Bisect several pins over one line of commits at once: one probe of a commit serves every pin.

Pure (the probe is a callable), so the search itself is tested without git. Each pin keeps its own
interval (lo: same state as on the good end, hi: a different one); each probe is the midpoint of the
widest open interval and narrows every interval that contains it. Pins broken by the same upstream
commit share all their probes; pins broken by different commits share the early ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class Found:
    last_good: int   # index of the last commit in the pin's good state
    first_bad: int   # index of the first commit after it in another state
    steps: int       # probes that narrowed this pin's interval


def bisect_pins(count: int, good_states: dict[str, str], probe: Callable[[int], dict[str, str]]) -> dict[str, Found]:
    """First index whose state differs from `good_states[pin]`, for each pin.

    Commits are 0..count-1; index 0 is known to be in the good state and index count-1 known not to be.
    When a pin flips more than once inside the range, this finds one flip (like `git bisect`).
    """
    if count < 2:
        raise ValueError("bisection needs a good and a bad end")
    lo = dict.fromkeys(good_states, 0)
    hi = dict.fromkeys(good_states, count - 1)
    steps = dict.fromkeys(good_states, 0)
    while True:
        open_pins = [p for p in good_states if hi[p] - lo[p] > 1]
        if not open_pins:
            break
        widest = max(open_pins, key=lambda p: (hi[p] - lo[p], -lo[p]))
        mid = (lo[widest] + hi[widest]) // 2
        states = probe(mid)
        for pin in open_pins:
            if lo[pin] < mid < hi[pin]:
                steps[pin] += 1
                if states[pin] == good_states[pin]:
                    lo[pin] = mid
                else:
                    hi[pin] = mid
    return {p: Found(lo[p], hi[p], steps[p]) for p in good_states}
