"""The sequential stopping rule's numbers, shared by the adaptive runner and every reader of a run.

``repeats: auto`` looks at each arm after every launch pair from the third on, at a *nominal*
confidence 1 − α′ chosen so that the chance of any false faster/slower verdict over all looks
stays α (:mod:`specbench.run.adaptive` runs the looks). The report reads the same confidence back
from the run's manifest (:func:`confidence`), and ``tune`` races at it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from scipy import stats as sps

from specbench.analysis.launches import MIN_LAUNCHES

ALPHA = 0.05


@functools.lru_cache(maxsize=32)
def nominal_alpha(max_launches: int, alpha: float = ALPHA, paths: int = 20_000, seed: int = 0) -> float:
    """α′ such that P(|t_n| > t_{n−1}(1 − α′/2) for some look n in 3 … max_launches) = α when the
    launch means are i.i.d. normal with no effect (t_n: one-sample t over the first n launches)."""
    if max_launches <= MIN_LAUNCHES:
        return alpha
    z = np.random.default_rng(seed).standard_normal((paths, max_launches))
    n = np.arange(1, max_launches + 1)
    mean = np.cumsum(z, axis=1) / n
    var = (np.cumsum(z**2, axis=1) - n * mean**2) / np.maximum(n - 1, 1)
    looks = slice(MIN_LAUNCHES - 1, max_launches)
    t = np.abs(mean[:, looks]) * np.sqrt(n[looks]) / np.sqrt(var[:, looks])

    def error(a: float) -> float:
        crit = sps.t.ppf(1 - a / 2, n[looks] - 1)
        return float(np.mean(np.any(t > crit, axis=1)))

    lo, hi = alpha / (max_launches - MIN_LAUNCHES + 1), alpha  # Bonferroni … no correction
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if error(mid) <= alpha else (lo, mid)
    return lo


def confidence(manifest: dict[str, Any]) -> float:
    """The confidence verdicts of this run use: 1 − α′ for an adaptive run, else 1 − the matrix's
    ``alpha`` (0.95 where the run predates the field or has no matrix, e.g. an import)."""
    adaptive = manifest.get("adaptive") or {}
    if "nominal_alpha" in adaptive:
        return 1 - float(adaptive["nominal_alpha"])
    return 1 - matrix_alpha(manifest)


def matrix_alpha(manifest: dict[str, Any]) -> float:
    """The run's α as its matrix set it; :data:`ALPHA` where the run predates the field or has no
    matrix (an import)."""
    matrix = manifest.get("matrix")
    alpha = matrix.get("alpha") if isinstance(matrix, dict) else None
    return float(alpha) if isinstance(alpha, int | float) and 0 < alpha < 1 else ALPHA
