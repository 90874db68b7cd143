"""The bench rule's constants and plan (pinset/measures/stats.py has the statistics), apart so that reading a
result (report, forecast, bump) needs neither numpy nor scipy (issue 42: the light install)."""

from __future__ import annotations

import math
from dataclasses import dataclass

RULE = "seq-t-bonferroni"
MIN_ROUNDS = 3                         # kept rounds before any verdict (t needs 2 d.o.f.)
MIN_EFFECT = math.log(1.01)            # 1 %: smaller changes are not worth a verdict
NOISE_K = 1.0                          # band = NOISE_K x per-round noise sd (when above 1 %)
ALPHA = 0.05


@dataclass(frozen=True)
class Plan:
    """How many looks the alpha is spread over: 1 for a fixed round count, else one per round from
    first_look to the round cap."""

    looks: int = 1
    first_look: int = MIN_ROUNDS
    alpha: float = ALPHA
    signs: bool = False   # each round's order was drawn at random: a change within the sides' swings needs the signs

    @property
    def alpha_per_look(self) -> float:
        return self.alpha / self.looks

    @classmethod
    def adaptive(cls, max_kept: int, first_look: int, signs: bool = False) -> Plan:
        return cls(max(1, max_kept - first_look + 1), first_look, signs=signs)
