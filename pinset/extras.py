"""The `measure` extra: what kld, bench and model synth need beyond the light install (issue 42).

`pip install pinset` brings what keeps a pin set (sim, apply, pick, blame, refresh, rebase, forecast, bump,
report, import, schema, cache, matrix, verify); `pip install 'pinset[measure]'` adds numpy, scipy, pandas and
matplotlib for the measurements. A verb or a result that needs them without them is one line, exit 2.
"""

from __future__ import annotations

import importlib.util
import sys

from pinset.errors import PinsetError

MEASURE_PACKAGES = ("numpy", "scipy", "pandas", "matplotlib")
MEASURE_VERBS = ("kld", "bench", "model")


def missing_measure() -> list[str]:
    """The measure extra's packages this interpreter cannot import (one imported already is there)."""
    return [name for name in MEASURE_PACKAGES if name not in sys.modules and importlib.util.find_spec(name) is None]


def need_measure(what: str = "") -> None:
    """PinsetError (exit 2) naming `what` and the install that brings the extra, when a package of it is missing."""
    gone = missing_measure()
    if gone:
        raise PinsetError(f"{what + ' ' if what else ''}needs the measure extra ({', '.join(gone)} not installed): "
                          "pip install 'pinset[measure]'")
