"""Bisect several pins over one line of commits at once: one probe of a commit serves every pin.

Pure (the probe is a callable), so the search itself is tested without git. Each pin keeps its own
interval (lo: same state as on the good end, hi: a different one); each probe is the midpoint of the
widest open interval and narrows every interval that contains it. Pins broken by the same upstream
commit share all their probes; pins broken by different commits share the early ones.

Bisection assumes a pin breaks once. It does not always: upstream may break a pin, undo that, and
break it again. Every probe is therefore checked against every pin, not only those whose interval
holds it, and a few evenly spaced sentinel probes look outside the intervals: a pin seen broken
before its last good commit is bisected again towards that earlier break, and a pin seen in its
good state again after a break is marked not monotone, so no single commit is claimed as the cause
without saying so. A break-and-heal that no probe lands in is not seen (as with `git bisect`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

SENTINELS = 8   # extra evenly spaced probes per bisection (shared by every pin), to catch a second flip


@dataclass
class Found:
    last_good: int   # index of the last commit in the pin's good state
    first_bad: int   # index of the first commit after it in another state
    steps: int       # probes that narrowed this pin's interval
    monotone: bool = True   # False: probes saw the pin flip more than once (break, heal, break)


def bisect_pins(count: int, good_states: Mapping[str, str], probe: Callable[[int], dict[str, str]]) -> dict[str, Found]:
    """The earliest flip found away from `good_states[pin]`, for each pin.

    Commits are 0..count-1; index 0 is known to be in the good state and index count-1 known not to be.
    """
    if count < 2:
        raise ValueError("bisection needs a good and a bad end")
    lo = dict.fromkeys(good_states, 0)
    hi = dict.fromkeys(good_states, count - 1)
    steps = dict.fromkeys(good_states, 0)
    monotone = dict.fromkeys(good_states, True)
    seen: dict[int, dict[str, str]] = {}
    sentinels = sorted({i * (count - 1) // (SENTINELS + 1) for i in range(1, SENTINELS + 1)} - {0, count - 1})

    def look(index: int) -> None:
        states = seen[index] = probe(index)
        for pin, good in good_states.items():
            is_good = states[pin] == good
            if lo[pin] < index < hi[pin]:
                steps[pin] += 1
                if is_good:
                    lo[pin] = index
                else:
                    hi[pin] = index
            elif index < lo[pin] and not is_good:   # broken before its last good commit: an earlier break
                monotone[pin] = False
                hi[pin] = index
                lo[pin] = max(i for i in [0, *seen] if i < index and (i == 0 or seen[i][pin] == good))
            elif index > hi[pin] and is_good:       # fine again after its first bad commit
                monotone[pin] = False

    while True:
        open_pins = [p for p in good_states if hi[p] - lo[p] > 1]
        if open_pins:
            widest = max(open_pins, key=lambda p: (hi[p] - lo[p], -lo[p]))
            look((lo[widest] + hi[widest]) // 2)
            continue
        # Sentinels where they can tell something: before a pin's last good or after its first bad commit.
        unseen = [i for i in sentinels if i not in seen and any(i < lo[p] or i > hi[p] for p in good_states)]
        if not unseen:
            break
        look(unseen[0])
    for pin, good in good_states.items():   # a heal seen before the sentinels moved the interval earlier
        if any(i > hi[pin] and s[pin] == good for i, s in seen.items()):
            monotone[pin] = False
    return {p: Found(lo[p], hi[p], steps[p], monotone[p]) for p in good_states}
