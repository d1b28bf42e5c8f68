"""Array helpers shared by the statistics modules."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def median_of(x: npt.ArrayLike) -> float:
    """Median, NaN for an empty input."""
    a = np.asarray(x, dtype=np.float64)
    return float(np.median(a)) if a.size else math.nan


def finite_values(values: npt.ArrayLike) -> FloatArray:
    """The values as a flat float array with NaN and ±inf removed."""
    x = np.asarray(values, dtype=np.float64).ravel()
    return x[np.isfinite(x)]
