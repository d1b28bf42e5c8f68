"""Statistics over per-request benchmark metrics: summaries, speedups, bimodality, warnings.

Input is a DataFrame with one row per (non-warmup) request and the columns ``arm``,
``workload``, ``category``, ``prompt_id``, ``repeat``, ``seq`` (global completion order)
plus float metric columns (NaN allowed) such as ``decode_tok_s`` or ``ttft_ms``. Every
function here is pure and every random step takes an explicit seed, so results reproduce.

Speedup is always oriented so that a ratio above 1 means the arm beats the baseline:
``arm / baseline`` for higher-is-better metrics (``*_tok_s``), ``baseline / arm`` for
lower-is-better ones (``*_ms``). Two estimators:

* paired (same ``workload``, ``prompt_id``, ``repeat`` measured under both arms):
  the geometric mean of per-pair ratios, ``exp(mean_i log(a_i / b_i))``, with a studentized
  (bootstrap-t) CI of the mean log-ratio and a Wilcoxon signed-rank p-value;
* unpaired: the ratio of medians ``median(a) / median(b)``, with a two-sample bootstrap
  percentile CI (``scipy.stats.bootstrap``, each arm resampled independently) and a
  Mann-Whitney U p-value.

The verdict needs the CI to clear a noise band: "faster" if ``ci_low > 1 + threshold``,
"slower" if ``ci_high < 1 − threshold``, otherwise "no difference".
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

FloatArray = npt.NDArray[np.float64]
Statistic = Callable[..., Any]
Verdict = Literal["faster", "slower", "no difference"]
WarningCode = Literal["LOW_N", "UNSTABLE", "DRIFT"]

DEFAULT_METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "decode_tok_s", "prefill_tok_s")
HIGHER_IS_BETTER: frozenset[str] = frozenset({"decode_tok_s", "prefill_tok_s"})
LOWER_IS_BETTER: frozenset[str] = frozenset({"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
PAIR_KEYS: tuple[str, ...] = ("workload", "prompt_id", "repeat")
MIN_PAIRS = 3
SARLE_UNIFORM = 5 / 9  # b of a uniform distribution; above it suggests bimodality

_RNG_KW = "rng" if "rng" in inspect.signature(sps.bootstrap).parameters else "random_state"


# --------------------------------------------------------------------------- describe


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of the finite values; ``std`` is the sample std (ddof=1) and
    ``cv = std / mean``. Percentiles use linear interpolation. NaN where undefined."""

    n: int
    median: float
    mean: float
    std: float
    min: float
    max: float
    p90: float
    p99: float
    cv: float


def _median(x: npt.ArrayLike) -> float:
    """Median, NaN for an empty input."""
    a = np.asarray(x, dtype=np.float64)
    return float(np.median(a)) if a.size else math.nan


def _finite(values: npt.ArrayLike) -> FloatArray:
    """The values as a flat float array with NaN and ±inf removed."""
    x = np.asarray(values, dtype=np.float64).ravel()
    return x[np.isfinite(x)]


def describe(values: npt.ArrayLike) -> Summary:
    """Summary of ``values`` ignoring NaN/inf; ``cv = std(ddof=1) / mean``."""
    x = _finite(values)
    if x.size == 0:
        return Summary(0, *([math.nan] * 8))
    std = float(np.std(x, ddof=1)) if x.size > 1 else math.nan
    mean = float(np.mean(x))
    p90, p99 = (float(p) for p in np.percentile(x, [90, 99]))
    cv = std / mean if mean != 0 else math.nan
    return Summary(int(x.size), float(np.median(x)), mean, std, float(x.min()), float(x.max()), p90, p99, cv)


def describe_frame(
    df: pd.DataFrame, metrics: Sequence[str] | None = None, by: Sequence[str] = ("arm", "workload")
) -> pd.DataFrame:
    """Long table: one row per group of ``by`` and metric, with the :class:`Summary` fields.

    ``metrics=None`` takes those of :data:`DEFAULT_METRICS` present in ``df``; naming a
    missing column raises ``ValueError``.
    """
    cols = [m for m in DEFAULT_METRICS if m in df.columns] if metrics is None else list(metrics)
    missing = [c for c in [*by, *cols] if c not in df.columns]
    if missing:
        raise ValueError(f"describe_frame: columns {missing} are not in the frame")
    rows: list[dict[str, Any]] = []
    for key, group in df.groupby(list(by), sort=True):
        keys = dict(zip(by, key, strict=True))
        rows += [{**keys, "metric": m, **asdict(describe(group[m].to_numpy()))} for m in cols]
    return pd.DataFrame(rows, columns=[*by, "metric", *Summary.__dataclass_fields__])


# --------------------------------------------------------------------------- speedup


@dataclass(frozen=True)
class Comparison:
    """Speedup of ``arm`` over ``baseline`` on ``metric`` (>1 means the arm is better).

    ``ratio`` is the point estimate named by ``estimator``; ``[ci_low, ci_high]`` its
    bootstrap CI at ``confidence``. ``n_pairs`` is 0 for unpaired comparisons; ``n_a`` and
    ``n_b`` count the values used from each arm. ``p_value`` is two-sided: Wilcoxon
    signed-rank on paired log-ratios, Mann-Whitney U otherwise.
    """

    arm: str
    baseline: str
    metric: str
    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    paired: bool
    n_pairs: int
    n_a: int
    n_b: int
    verdict: Verdict
    p_value: float
    estimator: str
    higher_is_better: bool


def metric_higher_is_better(metric: str) -> bool:
    """True for throughput-like metrics (``*_tok_s``), False for latencies (``*_ms``)."""
    if metric in HIGHER_IS_BETTER or metric.endswith("_tok_s"):
        return True
    if metric in LOWER_IS_BETTER or metric.endswith("_ms"):
        return False
    raise ValueError(f"unknown direction for metric {metric!r}; pass higher_is_better explicitly")


def verdict(ci_low: float, ci_high: float, threshold: float = 0.01) -> Verdict:
    """Return "faster" if ci_low > 1 + threshold, "slower" if ci_high < 1 − threshold,
    else "no difference": the CI must clear a ±threshold noise band around 1."""
    if ci_low > 1 + threshold:
        return "faster"
    if ci_high < 1 - threshold:
        return "slower"
    return "no difference"


def _arm_rows(df: pd.DataFrame, arm: str, metric: str) -> pd.DataFrame:
    """Rows of ``arm`` whose metric is finite and > 0 (ratios of non-positive values are undefined)."""
    rows = df[df["arm"] == arm]
    vals = rows[metric].astype("float64")
    return rows[np.isfinite(vals) & (vals > 0)]


def _paired_log_ratios(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> FloatArray:
    """log(a_i / b_i) over keys present in both arms (keys: PAIR_KEYS found in the frame);
    duplicated keys within an arm are collapsed to their median first."""
    keys = [k for k in PAIR_KEYS if k in a.columns and k in b.columns]
    if "prompt_id" not in keys:
        return np.empty(0)
    ma = a.groupby(keys)[metric].median()
    mb = b.groupby(keys)[metric].median()
    joined = pd.concat([ma.rename("a"), mb.rename("b")], axis=1, join="inner")
    ratio: FloatArray = joined["a"].to_numpy(np.float64) / joined["b"].to_numpy(np.float64)
    return np.log(ratio)


def _two_sample_ci(
    data: tuple[FloatArray, ...], statistic: Statistic, confidence: float, n_resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` (scipy.stats.bootstrap, each sample resampled
    independently); collapses to the observed value when the data are constant."""
    point = float(statistic(*data, axis=-1))
    if all(np.ptp(x) == 0 for x in data):
        return point, point
    res = sps.bootstrap(
        data,
        statistic,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        **{_RNG_KW: np.random.default_rng(seed)},
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _bootstrap_t_ci(x: FloatArray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    """Studentized (bootstrap-t) CI of mean(x), seeded numpy resampling.

    With m = mean(x), se = s/√n and, per resample b, t*_b = (m*_b − m) / se*_b, the interval is
    [m − q(1−α/2)·se, m − q(α/2)·se] for the quantiles q of t* (resamples with se*_b = 0
    are dropped). Used instead of scipy's percentile/BCa methods, which for a mean of n = 12
    miss ≈ 9–10 % of the time at 95 % (bootstrap-t: ≈ 5 %).
    """
    m, se = float(np.mean(x)), float(np.std(x, ddof=1)) / math.sqrt(x.size)
    if se == 0:
        return m, m
    t = _t_stats(x, m, np.random.default_rng(seed), n_resamples)
    alpha = (1 - confidence) / 2
    q_lo, q_hi = np.quantile(t, [alpha, 1 - alpha])
    return m - float(q_hi) * se, m - float(q_lo) * se


def _t_stats(x: FloatArray, m: float, rng: np.random.Generator, n_resamples: int) -> FloatArray:
    """t*_b = (mean(x*_b) − m) / (s*_b/√n) over resamples with s*_b > 0, drawn in batches of
    about 10⁶ values to bound memory."""
    n, per, out = x.size, max(1, 1_000_000 // x.size), []
    for start in range(0, n_resamples, per):
        xb = x[rng.integers(0, n, size=(min(per, n_resamples - start), n))]
        se_b = np.std(xb, axis=1, ddof=1) / math.sqrt(n)
        out.append((np.mean(xb, axis=1)[se_b > 0] - m) / se_b[se_b > 0])
    return np.concatenate(out)


def _log_median_ratio(a: FloatArray, b: FloatArray, axis: int = -1) -> Any:
    """log(median(a) / median(b))."""
    return np.log(np.median(a, axis=axis)) - np.log(np.median(b, axis=axis))


def _wilcoxon_p(logr: FloatArray) -> float:
    """Two-sided Wilcoxon signed-rank p of log-ratios against 0; 1.0 if all are 0."""
    if not np.any(logr != 0):
        return 1.0
    return float(sps.wilcoxon(logr).pvalue)


def _exp(x: float) -> float:
    return math.inf if x > 700 else math.exp(x)


def _oriented(sign: float, lo: float, hi: float) -> tuple[float, float]:
    """exp of a log-space CI after multiplying by ``sign`` (−1 flips the interval). With very few
    pairs a studentized bound can be astronomically wide: it saturates at ±inf rather than raising."""
    bounds = sorted((_exp(sign * lo), _exp(sign * hi)))
    return bounds[0], bounds[1]


@dataclass(frozen=True)
class _Estimate:
    """An unoriented estimate on the log(a / b) scale, with its CI and test."""

    log_ratio: float
    lo: float
    hi: float
    p_value: float
    n_pairs: int
    n_a: int
    n_b: int
    estimator: str


def _launch_log_ratios(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> FloatArray:
    """Per repeat, the mean over prompts of log(a_i / b_i).

    Each repeat is one server launch per arm, and requests inside a launch share its state (page
    cache, placement, clocks), so pairs within a repeat are not independent: the repeat is the
    unit of replication (findings.md pitfall 4: one config's repeats ranged +17 % to +27 %)."""
    keys = [k for k in PAIR_KEYS if k in a.columns and k in b.columns]
    if "repeat" not in keys or "prompt_id" not in keys:
        return np.empty(0)
    ma, mb = a.groupby(keys)[metric].median(), b.groupby(keys)[metric].median()
    joined = pd.concat([ma.rename("a"), mb.rename("b")], axis=1, join="inner")
    logr = pd.Series(np.log(joined["a"] / joined["b"]), index=joined.index)
    per_launch: FloatArray = np.asarray(logr.groupby(level="repeat").mean(), dtype=np.float64)
    return per_launch


def _launch_estimate(launches: FloatArray, n_pairs: int, confidence: float) -> _Estimate:
    """Mean of per-launch mean log-ratios with a Student-t interval over launches (n − 1 dof)."""
    n, m = int(launches.size), float(np.mean(launches))
    se = float(np.std(launches, ddof=1)) / math.sqrt(n)
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * se
    p = float(sps.ttest_1samp(launches, 0.0).pvalue) if se > 0 else (1.0 if m == 0 else 0.0)
    est = f"geometric mean of paired ratios; CI over {n} launches (t, {n - 1} dof)"
    return _Estimate(m, m - half, m + half, p, n_pairs, n_pairs, n_pairs, est)


def _paired_estimate(logr: FloatArray, boot: dict[str, Any]) -> _Estimate:
    """Mean log-ratio (log of the geometric mean ratio), bootstrap-t CI, Wilcoxon p."""
    lo, hi = _bootstrap_t_ci(logr, **boot)
    n, est = int(logr.size), "geometric mean of paired ratios"
    return _Estimate(float(np.mean(logr)), lo, hi, _wilcoxon_p(logr), n, n, n, est)


def _unpaired_estimate(xa: FloatArray, xb: FloatArray, boot: dict[str, Any]) -> _Estimate:
    """log(median(a) / median(b)), two-sample bootstrap CI, Mann-Whitney p."""
    lo, hi = _two_sample_ci((xa, xb), _log_median_ratio, **boot)
    p, point = float(sps.mannwhitneyu(xa, xb).pvalue), float(_log_median_ratio(xa, xb))
    return _Estimate(point, lo, hi, p, 0, int(xa.size), int(xb.size), "ratio of medians")


def speedup(
    df: pd.DataFrame,
    arm: str,
    baseline: str,
    metric: str = "decode_tok_s",
    *,
    higher_is_better: bool | None = None,
    paired: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    threshold: float = 0.01,
) -> Comparison:
    """Speedup of ``arm`` over ``baseline`` (filter ``df`` to one workload first for a
    per-workload answer). Paired when ``paired`` and at least MIN_PAIRS keys match:
    ratio = exp(mean log(a_i/b_i)) (geometric mean ratio); otherwise ratio =
    median(a)/median(b). Lower-is-better metrics are inverted (baseline/arm).
    ``higher_is_better=None`` infers the direction from the metric name. Values that are
    NaN or ≤ 0 are dropped.
    """
    hib = metric_higher_is_better(metric) if higher_is_better is None else higher_is_better
    a, b = _arm_rows(df, arm, metric), _arm_rows(df, baseline, metric)
    if len(a) < 2 or len(b) < 2:
        counts = f"{arm}={len(a)}, {baseline}={len(b)}"
        raise ValueError(f"speedup: need ≥2 positive {metric} values per arm; got {counts}")
    boot = {"confidence": confidence, "n_resamples": n_resamples, "seed": seed}
    logr = _paired_log_ratios(a, b, metric) if paired else np.empty(0)
    launches = _launch_log_ratios(a, b, metric) if paired else np.empty(0)
    if launches.size >= 2 and launches.size < logr.size:
        e = _launch_estimate(launches, logr.size, confidence)
    elif logr.size >= MIN_PAIRS:
        e = _paired_estimate(logr, boot)
    else:
        e = _unpaired_estimate(a[metric].to_numpy(np.float64), b[metric].to_numpy(np.float64), boot)
    sign = 1.0 if hib else -1.0
    lo, hi = _oriented(sign, e.lo, e.hi)
    ratio, v = math.exp(sign * e.log_ratio), verdict(lo, hi, threshold)
    return Comparison(
        arm=arm, baseline=baseline, metric=metric, ratio=ratio, ci_low=lo, ci_high=hi,
        confidence=confidence, paired=e.n_pairs > 0, n_pairs=e.n_pairs, n_a=e.n_a, n_b=e.n_b,
        verdict=v, p_value=e.p_value, estimator=e.estimator, higher_is_better=hib,
    )  # fmt: skip


# --------------------------------------------------------------------------- bimodality


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
    x = _finite(values)
    if x.size < 10 or np.ptp(x) == 0:
        why = "too few distinct values (need n ≥ 10)"
        return Bimodality(False, (_median(x),), math.nan, math.nan, math.nan, (1.0, 0.0), int(x.size), why)
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
        return CategoryBimodality(arm, metric, False, (_median(med),), (), (), pairs, math.nan, 1.0, why)
    s = _split(med.to_numpy(np.float64))
    p = gaussian_null_p(s.d, med.size, seed=seed)
    ok = s.d > min_d and p < alpha
    names = [c for c, _ in pairs]
    low, high = (tuple(names[: s.k]), tuple(names[s.k :])) if ok else ((), ())
    modes = (float(np.median(s.low)), float(np.median(s.high))) if ok else (float(med.median()),)
    method = f"2-means on {med.size} category medians: D={s.d:.2f} (>{min_d}), null p={p:.3f} (<{alpha})"
    return CategoryBimodality(arm, metric, ok, modes, low, high, pairs, s.d, p, method)


# --------------------------------------------------------------------------- warnings


@dataclass(frozen=True)
class Warning_:
    """A data-quality warning for one (arm, workload) cell; ``message`` is one sentence of evidence."""

    code: WarningCode
    arm: str
    workload: str
    message: str


def _cells(df: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    for (arm, workload), group in df.groupby(["arm", "workload"], sort=True):
        yield str(arm), str(workload), group


def _low_n(arm: str, wl: str, x: FloatArray, metric: str, min_n: int) -> Warning_ | None:
    if x.size >= min_n:
        return None
    msg = f"{arm} on {wl} has only {x.size} {metric} samples (fewer than {min_n}), too few to trust."
    return Warning_("LOW_N", arm, wl, msg)


def repeat_cv(g: pd.DataFrame, metric: str) -> tuple[float, int]:
    """Median over prompts of the CV across repeats of the same prompt, and the prompt count.

    Different prompts legitimately run at different speeds (length, category), so spread across
    prompts is not instability; spread across repeats of one prompt is (pyperf's view). Falls back
    to the CV over all requests, with count 0, when no prompt was repeated."""
    if "prompt_id" in g and "repeat" in g:
        per = g.groupby("prompt_id")[metric].agg(["mean", "std", "count"])
        per = per[(per["count"] >= 2) & (per["mean"] > 0)]
        if len(per):
            return float(np.median(per["std"] / per["mean"])), len(per)
    return describe(_finite(g[metric].to_numpy(np.float64))).cv, 0


def _unstable(arm: str, wl: str, g: pd.DataFrame, metric: str, max_cv: float) -> Warning_ | None:
    cv, prompts = repeat_cv(g, metric)
    if not cv > max_cv:
        return None
    basis = (
        f"median over {prompts} prompts of the spread across repeats" if prompts else "across all requests"
    )
    msg = f"{arm} on {wl}: {metric} varies by CV {cv:.1%} ({basis}), above the {max_cv:.0%} limit."
    return Warning_("UNSTABLE", arm, wl, msg)


def _drift(arm: str, wl: str, g: pd.DataFrame, metric: str, thr: float, alpha: float) -> Warning_ | None:
    """First vs last third in ``seq`` order: |median_last / median_first − 1| > threshold and
    two-sided Mann-Whitney p < alpha (each third ≥ 3 values)."""
    x = _finite(g.sort_values("seq")[metric].to_numpy(np.float64))
    third = x.size // 3
    if third < 3:
        return None
    first, last = x[:third], x[-third:]
    m1, m2 = float(np.median(first)), float(np.median(last))
    change, p = m2 / m1 - 1, float(sps.mannwhitneyu(first, last).pvalue)
    if not (abs(change) > thr and p < alpha):
        return None
    msg = (
        f"{arm} on {wl}: median {metric} moved {change:+.1%} from the first third of requests "
        f"({m1:.3g}, n={third}) to the last third ({m2:.3g}, n={third}) in completion order "
        f"(Mann-Whitney p={p:.2g})."
    )
    return Warning_("DRIFT", arm, wl, msg)


def stability_warnings(
    df: pd.DataFrame,
    *,
    baseline: str | None = None,
    min_n: int = 10,
    max_cv: float = 0.10,
    metric: str = "decode_tok_s",
    drift_threshold: float = 0.05,
    alpha: float = 0.05,
) -> list[Warning_]:
    """Per (arm, workload) cell: LOW_N if n < ``min_n``; UNSTABLE if the repeat-to-repeat CV
    (:func:`repeat_cv`) > ``max_cv``;
    DRIFT (``baseline`` arm only, every arm if None) if the first and last thirds in ``seq``
    order differ by > ``drift_threshold`` in median with Mann-Whitney p < ``alpha``."""
    out: list[Warning_] = []
    for arm, wl, g in _cells(df):
        x = _finite(g[metric].to_numpy(np.float64))
        found = [_low_n(arm, wl, x, metric, min_n), _unstable(arm, wl, g, metric, max_cv)]
        if baseline is None or arm == baseline:
            found.append(_drift(arm, wl, g, metric, drift_threshold, alpha))
        out += [w for w in found if w is not None]
    return out
