"""Bimodality: is one arm really two populations (e.g. the draft fires on code, not on chat)?

A mean of a two-mode arm describes neither mode (docs/mistakes.md, mistake 5), so reports flag it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

from specbench.analysis._arrays import FloatArray, finite_values, median_of

SARLE_UNIFORM = 5 / 9  # b of a uniform distribution; above it suggests bimodality


@dataclass(frozen=True)
class Bimodality:
    """Outcome of :func:`bimodality`.

    ``modes`` holds the medians of the two 2-means groups when bimodal, else the overall
    median. ``coefficient`` is Sarle's b; ``ashman_d`` the separation of the split;
    ``dip_ratio`` the KDE valley depth (1 = no valley); ``fractions`` the group shares.
    """

    bimodal: bool
    modes: tuple[float, ...]
    coefficient: float
    ashman_d: float
    dip_ratio: float
    fractions: tuple[float, float]
    n: int
    method: str


@dataclass(frozen=True)
class _Split:
    """Best 2-means split of sorted values: ``k`` points in the low group."""

    k: int
    d: float
    low: FloatArray
    high: FloatArray


def sarle_b(x: FloatArray) -> float:
    """Sarle's b = (g² + 1) / (G2 + 3(n−1)² / ((n−2)(n−3))), with g the bias-corrected
    skewness and G2 the bias-corrected excess kurtosis; NaN for n < 4 or constant data."""
    n = x.size
    if n < 4 or np.ptp(x) == 0:
        return math.nan
    g = float(sps.skew(x, bias=False))
    k = float(sps.kurtosis(x, fisher=True, bias=False))
    return (g * g + 1) / (k + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3)))


def split_d(x_sorted: FloatArray) -> tuple[npt.NDArray[np.intp], FloatArray]:
    """Optimal 1-D 2-means split along the last axis of sorted data (n ≥ 3).

    For each cut k the within sum of squares is W(k) = SS(x[:k]) + SS(x[k:]) with
    SS(y) = Σy² − (Σy)²/len(y) (prefix sums); the best k minimises W. Returns k and the
    separation D = (mean_high − mean_low) / s_w with the pooled within-group std
    s_w = sqrt(W / (n − 2)); with equal group stds this is Ashman's D.
    """
    x = x_sorted - np.mean(x_sorted, axis=-1, keepdims=True)
    n = x.shape[-1]
    c1, c2 = np.cumsum(x, axis=-1), np.cumsum(x * x, axis=-1)
    k = np.arange(1, n)
    s1, s2 = c1[..., :-1], c2[..., :-1]
    w = s2 - s1**2 / k + (c2[..., -1:] - s2) - (c1[..., -1:] - s1) ** 2 / (n - k)
    j = np.argmin(w, axis=-1)
    kk, s1k, wk = j + 1, _pick(s1, j), np.maximum(_pick(w, j), 0.0)
    gap = (c1[..., -1] - s1k) / (n - kk) - s1k / kk
    sw = np.sqrt(wk / (n - 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(sw > 0, gap / sw, np.inf)
    return kk, d


def _pick(a: FloatArray, j: npt.NDArray[np.intp]) -> FloatArray:
    """a[..., j] row by row."""
    return np.take_along_axis(a, j[..., None], -1)[..., 0]


def _split(x: FloatArray) -> _Split:
    """2-means split of the (unsorted) sample ``x``."""
    xs = np.sort(x)
    k, d = split_d(xs[None, :])
    kk = int(k[0])
    return _Split(k=kk, d=float(d[0]), low=xs[:kk], high=xs[kk:])


def kde_dip_ratio(x: FloatArray, lo: float, hi: float, grid: int = 64) -> float:
    """min_{t∈[lo,hi]} f(t) / min(f(lo), f(hi)) for a Gaussian KDE f (Scott's bandwidth):
    below 1 iff the smoothed density has a valley between ``lo`` and ``hi``."""
    f = sps.gaussian_kde(x)(np.linspace(lo, hi, grid))
    return float(f.min() / min(f[0], f[-1]))


def bimodality(
    values: npt.ArrayLike,
    *,
    min_b: float = SARLE_UNIFORM,
    min_d: float = 3.0,
    min_fraction: float = 0.1,
    max_dip: float = 0.9,
) -> Bimodality:
    """Two modes iff all four hold (NaN ignored, n ≥ 10):

    1. Sarle's b > ``min_b`` (5/9, the uniform's value);
    2. the optimal 2-means split has D = Δmean / s_w > ``min_d``. A hard split of a single
       normal already gives D ≈ 2.65 (Ashman's D > 2 assumes fitted mixture components),
       hence 3;
    3. each group holds ≥ ``min_fraction`` of the points (not a few outliers);
    4. a Gaussian KDE dips between the two group medians to ≤ ``max_dip`` of the lower
       peak; this rejects heavy-tailed unimodal samples (lognormal, exponential) that pass 1–3.
    """
    x = finite_values(values)
    if x.size < 10 or np.ptp(x) == 0:
        why = "too few distinct values (need n ≥ 10)"
        return Bimodality(False, (median_of(x),), math.nan, math.nan, math.nan, (1.0, 0.0), int(x.size), why)
    b, s = sarle_b(x), _split(x)
    m_lo, m_hi = float(np.median(s.low)), float(np.median(s.high))
    fracs = (s.k / x.size, 1 - s.k / x.size)
    dip = kde_dip_ratio(x, m_lo, m_hi)
    ok = b > min_b and s.d > min_d and min(fracs) >= min_fraction and dip <= max_dip
    modes = (m_lo, m_hi) if ok else (float(np.median(x)),)
    method = (
        f"Sarle b={b:.3f} (>{min_b:.3f}), 2-means D={s.d:.2f} (>{min_d}), "
        f"shares {fracs[0]:.0%}/{fracs[1]:.0%} (≥{min_fraction:.0%}), KDE dip {dip:.2f} (≤{max_dip})"
    )
    return Bimodality(ok, modes, b, s.d, dip, fracs, int(x.size), method)


@dataclass(frozen=True)
class CategoryBimodality:
    """Whether per-category medians of ``metric`` for ``arm`` form two clusters.

    ``low``/``high`` name the categories in each cluster (empty unless bimodal); ``modes``
    are the medians of the cluster medians; ``p_value`` is the chance that n normal
    points split at least this cleanly (D ≥ observed).
    """

    arm: str
    metric: str
    bimodal: bool
    modes: tuple[float, ...]
    low: tuple[str, ...]
    high: tuple[str, ...]
    category_medians: tuple[tuple[str, float], ...]
    ashman_d: float
    p_value: float
    method: str


def gaussian_null_p(d: float, n: int, *, n_sims: int = 2000, seed: int = 0) -> float:
    """P(D_null ≥ d) for the 2-means split of n i.i.d. normal points (D is affine-invariant),
    by seeded simulation: (1 + #{D_null ≥ d}) / (1 + n_sims). SigClust's idea in 1-D."""
    z = np.sort(np.random.default_rng(seed).standard_normal((n_sims, n)), axis=-1)
    _, d_null = split_d(z)
    return float((1 + np.count_nonzero(d_null >= d)) / (1 + n_sims))


def category_bimodality(
    df: pd.DataFrame,
    arm: str,
    metric: str = "decode_tok_s",
    *,
    min_d: float = 3.0,
    alpha: float = 0.05,
    seed: int = 0,
) -> CategoryBimodality:
    """Do the per-category medians split into two clusters? Needs ≥ 3 categories.

    With a handful of points Sarle's b and a KDE are meaningless, so the rule is the
    2-means split of the medians with D > ``min_d`` (each cluster ≥ 1 category) AND a
    Gaussian-null p-value (:func:`gaussian_null_p`) below ``alpha``.
    """
    rows = df[(df["arm"] == arm) & np.isfinite(df[metric].astype("float64"))]
    med = rows.groupby("category")[metric].median().sort_values()
    pairs = tuple((str(c), float(v)) for c, v in med.items())
    if med.size < 3 or np.ptp(med.to_numpy()) == 0:
        why = f"{med.size} categories; need ≥ 3 distinct medians"
        return CategoryBimodality(arm, metric, False, (median_of(med),), (), (), pairs, math.nan, 1.0, why)
    s = _split(med.to_numpy(np.float64))
    p = gaussian_null_p(s.d, med.size, seed=seed)
    ok = s.d > min_d and p < alpha
    names = [c for c, _ in pairs]
    low, high = (tuple(names[: s.k]), tuple(names[s.k :])) if ok else ((), ())
    modes = (float(np.median(s.low)), float(np.median(s.high))) if ok else (float(med.median()),)
    method = f"2-means on {med.size} category medians: D={s.d:.2f} (>{min_d}), null p={p:.3f} (<{alpha})"
    return CategoryBimodality(arm, metric, ok, modes, low, high, pairs, s.d, p, method)
