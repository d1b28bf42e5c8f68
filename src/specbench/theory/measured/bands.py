"""The two ends of a band and the band a few observations give.

Bands are what the measured values (theory/measured/engines.py, curves.py) carry and what the
interval (theory/spread/interval.py) moves each unknown term to; they live here, below both, so
the tables do not import the interval code that reads them (no import cycle between
theory/measured and theory/spread).
"""

from __future__ import annotations

import math
from typing import Literal

End = Literal["low", "high"]
ENDS: tuple[End, ...] = ("low", "high")

# A band read off n observations (the values of a term some calibrations measured) is their
# range, and the range of n values covers about (n − 1)/(n + 1) of what the next setup may show:
# 67 % for five. Used as an 80 % range, such a band made the intervals too narrow (issue #43:
# 11 of 21 published points inside). :func:`observed_band` widens it to the 80 % prediction range
# of one more observation, mid ± t₀.₉(n − 1) · σ · √(1 + 1/n), with σ from the range (σ ≈ range /
# d_n, the expected range of n normal values) because most sources give the range alone.
T90 = {1: 3.078, 2: 1.886, 3: 1.638, 4: 1.533, 5: 1.476, 6: 1.440, 7: 1.415, 8: 1.397, 9: 1.383}
RANGE_OF_N = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078}


def observed_band(
    low: float, high: float, n: int, floor: float = 0.0, ceiling: float = math.inf
) -> tuple[float, float]:
    """The 80 % prediction range of one more observation of a term whose ``n`` observations
    spanned ``low``–``high`` (see above), within its physical ``floor`` and ``ceiling``; the
    range itself for n < 2 (nothing to estimate a spread from) or n > 10."""
    if n < 2 or n not in RANGE_OF_N:
        return low, high
    sigma = (high - low) / RANGE_OF_N[n]
    half = T90[n - 1] * sigma * math.sqrt(1.0 + 1.0 / n)
    mid = (low + high) / 2
    return max(floor, mid - half), min(ceiling, mid + half)
