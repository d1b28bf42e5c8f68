"""Statistics over per-request benchmark metrics: summaries and speedups (warnings: stability.py).

Input is a DataFrame with one row per (non-warmup) request and the columns ``arm``,
``workload``, ``category``, ``prompt_id``, ``repeat``, ``seq`` (global completion order)
plus float metric columns (NaN allowed) such as ``decode_tok_s`` or ``ttft_ms``. Every
function here is pure and every random step takes an explicit seed, so results reproduce.

Speedup is always oriented so that a ratio above 1 means the arm beats the baseline:
``arm / baseline`` for higher-is-better metrics (``*_tok_s``), ``baseline / arm`` for
lower-is-better ones (``*_ms``). Two estimators:

* paired (same ``workload``, ``prompt_id``, ``repeat`` measured under both arms):
  the geometric mean of per-pair ratios, ``exp(mean_i log(a_i / b_i))``. With two or more
  repeats (server launches) holding several prompts each, the CI is a Student-t interval over
  the per-launch mean log-ratios — the launch is the unit of replication; with one launch, a
  studentized (bootstrap-t) CI over prompts and a Wilcoxon signed-rank p-value;
* unpaired: the ratio of medians ``median(a) / median(b)``, with a two-sample bootstrap
  percentile CI (``scipy.stats.bootstrap``, each arm resampled independently) and a
  Mann-Whitney U p-value.

The verdict needs the CI to clear a noise band: "faster" if ``ci_low > 1 + threshold``,
"slower" if ``ci_high < 1 − threshold``, otherwise "no difference".
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

from specbench._arrays import FloatArray, _finite

Statistic = Callable[..., Any]
Verdict = Literal["faster", "slower", "no difference"]

DEFAULT_METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "decode_tok_s", "prefill_tok_s")
HIGHER_IS_BETTER: frozenset[str] = frozenset({"decode_tok_s", "prefill_tok_s"})
LOWER_IS_BETTER: frozenset[str] = frozenset({"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
PAIR_KEYS: tuple[str, ...] = ("workload", "prompt_id", "repeat")
MIN_PAIRS = 3

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
