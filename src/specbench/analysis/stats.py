"""Statistics over per-request benchmark metrics: summaries and speedups (warnings: stability.py).

Input is a DataFrame with one row per (non-warmup) request and the columns ``arm``,
``workload``, ``category``, ``prompt_id``, ``repeat``, ``seq`` (global completion order)
plus float metric columns (NaN allowed) such as ``decode_tok_s`` or ``ttft_ms``. Every
function here is pure and every random step takes an explicit seed, so results reproduce.

Speedup is always oriented so that a ratio above 1 means the arm beats the baseline:
``arm / baseline`` for higher-is-better metrics (``*_tok_s``), ``baseline / arm`` for
lower-is-better ones (``*_ms``). Two estimators:

* paired (same ``workload``, ``prompt_id``, ``repeat`` measured under both arms): the geometric
  mean of per-pair ratios, with the interval of the launch-level mixed model
  (:mod:`specbench.analysis.launches`): each repeat is one server launch per arm, the launch pair is the
  unit of replication and prompts are paired inside it. Fewer than
  :data:`~specbench.analysis.launches.MIN_LAUNCHES` launch pairs give no verdict ("undetermined", LOW_N);
* unpaired: the ratio of medians ``median(a) / median(b)``, with a two-sample bootstrap
  percentile CI (``scipy.stats.bootstrap``, each arm resampled independently) and a
  Mann-Whitney U p-value.

Verdicts against a ±``threshold`` noise band around 1: "faster" if ``ci_low > 1 + threshold``,
"slower" if ``ci_high < 1 − threshold``, "equivalent" if the whole CI lies inside the band (a
positive result: no difference worth having), otherwise "undetermined" — with the number of
launches that would settle it at the observed noise (``launches_needed``).
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

from specbench.analysis import launches as L
from specbench.analysis._arrays import FloatArray, RankedMedian, finite_values
from specbench.analysis.metrics import METRICS

Statistic = Callable[..., Any]
Verdict = Literal["faster", "slower", "equivalent", "undetermined"]

DEFAULT_METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "decode_tok_s", "prefill_tok_s")
#: Directions, from the one metric table (analysis/metrics.py).
HIGHER_IS_BETTER: frozenset[str] = frozenset(k for k, m in METRICS.items() if m.better == "higher")
LOWER_IS_BETTER: frozenset[str] = frozenset(k for k, m in METRICS.items() if m.better == "lower")
PAIR_KEYS: tuple[str, ...] = ("workload", "prompt_id", "repeat")
MIN_PAIRS = 3

#: Resampled values held at once by a bootstrap (issue 31): 2,000 resamples of 33,000 requests
#: took a gigabyte in one batch. The resamples are drawn from the one generator in order, so the
#: interval is the same in batches as in one.
BOOT_BATCH_VALUES = 2_000_000
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
    x = finite_values(values)
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
    ``n_b`` count the values used from each arm. ``p_value`` is two-sided: the launch-level
    model's t test when paired over ≥ 2 launches, Wilcoxon signed-rank on the paired log-ratios
    of a single launch, Mann-Whitney U unpaired. ``n_launches`` counts the launch pairs (0
    unpaired); ``launches_needed`` is how many would settle an undetermined verdict at the
    observed noise (None: out of reach, or not estimable from one launch) and ``more_launches``
    how many to ADD, with ``more_range`` its range over the variance's uncertainty
    (:func:`specbench.analysis.launches.more_launches`). ``[ci_low, ci_high]`` is the interval the
    verdict was taken from, always: ``pairs_low``/``pairs_high`` (the smallest and largest paired
    ratio) are data, never an interval. ``too_few``: the baseline or the arm has fewer than two
    usable values — no estimate, LOW_N. ``family``: how many comparisons share the error rate
    ``family_alpha`` (Holm, :mod:`specbench.analysis.multiplicity`); ``confidence`` is then the
    level this comparison was tested at.
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
    n_launches: int = 0
    launches_needed: int | None = None
    threshold: float = 0.01
    more_launches: int | None = None
    more_range: tuple[int, int | None] | None = None
    pairs_low: float = math.nan
    pairs_high: float = math.nan
    too_few: bool = False
    family: int = 1
    family_alpha: float = math.nan
    # How the family shares ``family_alpha`` when it is not plain Holm over ``family`` comparisons
    # (arms and their categories: :func:`specbench.analysis.multiplicity.arms_and_categories`).
    family_name: str = ""

    @property
    def low_n(self) -> bool:
        """Too few values in either arm, or paired over fewer launch pairs than a verdict needs."""
        return self.too_few or (self.paired and self.n_launches < L.MIN_LAUNCHES)

    @property
    def decidable(self) -> bool:
        """Whether any verdict could be reached from these data (LOW_N and one launch: never)."""
        return not self.too_few and (not self.paired or self.n_launches >= L.MIN_LAUNCHES)


def metric_higher_is_better(metric: str) -> bool:
    """The metric's direction in :data:`specbench.analysis.metrics.METRICS` (True: throughputs,
    False: latencies); a metric without one (a count, a ratio) needs it passed explicitly."""
    if metric in HIGHER_IS_BETTER:
        return True
    if metric in LOWER_IS_BETTER:
        return False
    raise ValueError(f"unknown direction for metric {metric!r}; pass higher_is_better explicitly")


def verdict(ci_low: float, ci_high: float, threshold: float = 0.01) -> Verdict:
    """ "faster" if ci_low > 1 + threshold, "slower" if ci_high < 1 − threshold, "equivalent" if
    the CI lies inside [1 − threshold, 1 + threshold], else "undetermined" (also for a NaN CI)."""
    if math.isnan(ci_low) or math.isnan(ci_high):
        return "undetermined"
    if ci_low > 1 + threshold:
        return "faster"
    if ci_high < 1 - threshold:
        return "slower"
    if ci_low >= 1 - threshold and ci_high <= 1 + threshold:
        return "equivalent"
    return "undetermined"


def ci_label(c: Comparison) -> str:
    """ "95 %", or e.g. "98.6 %" for the nominal level of a sequential (adaptive) run."""
    return level_label(c.confidence)


def level_label(confidence: float) -> str:
    """A confidence level as printed: "95 %", "99.9 %", "98.6 %"."""
    pct = confidence * 100
    return f"{pct:.0f} %" if abs(pct - round(pct)) < 1e-6 else f"{pct:.1f} %"


def more_text(c: Comparison) -> str:
    """ "about 4 more launches, between 2 and 11": launch pairs to ADD at the observed effect,
    with the range the launch variance's uncertainty allows (docs/statistics.md); "" when not
    estimable. Plain words (issue 44: "4–> 1000" read as an arrow)."""
    if c.more_launches is None:
        return ""
    lo, hi = c.more_range if c.more_range is not None else (c.more_launches, c.more_launches)
    return f"about {c.more_launches} more launch{'es' if c.more_launches != 1 else ''}{launch_span(lo, hi)}"


def launch_span(lo: int, hi: int | None) -> str:
    """ ", between 2 and 11", ", between 4 and over 1,000", or "" when the two agree."""
    if lo == hi:
        return ""
    return f", between {lo} and {f'{hi:,}' if hi is not None else f'over {L.MAX_NEEDED:,}'}"


def error_rate_text(c: Comparison) -> str:
    """Which error rate the verdict carries, e.g. "Holm over 3 comparisons: ≤ 5 % chance of any
    false verdict among them" (docs/statistics.md, Multiplicity)."""
    alpha = c.family_alpha if math.isfinite(c.family_alpha) else 1 - c.confidence
    pct = f"{alpha * 100:.3g} %"
    if c.family_name:
        return f"{ci_label(c)} CI; {c.family_name}: ≤ {pct} chance of any false verdict among them"
    if c.family <= 1:
        return f"{ci_label(c)} CI: ≤ {pct} chance of a false verdict"
    return (
        f"{ci_label(c)} CI; Holm over {c.family} comparisons: ≤ {pct} chance of any false verdict among them"
    )


def verdict_text(c: Comparison) -> str:
    """The verdict as printed: an undetermined one says why and what would settle it."""
    if c.verdict != "undetermined":
        return c.verdict
    if c.too_few:
        return f"undetermined (LOW_N: {c.n_b} {c.baseline} / {c.n_a} {c.arm} values)"
    if c.low_n:
        return f"undetermined (LOW_N: {c.n_launches} launch{'es' if c.n_launches != 1 else ''})"
    if c.more_launches is not None:
        return f"undetermined ({more_text(c)})"
    if c.paired and c.n_launches >= L.MIN_LAUNCHES:  # the effect sits on the band's edge
        return f"undetermined (over {L.MAX_NEEDED:,} more launches)"
    return "undetermined"


def _arm_rows(df: pd.DataFrame, arm: str, metric: str) -> pd.DataFrame:
    """Rows of ``arm`` whose metric is finite and > 0 (ratios of non-positive values are undefined)."""
    rows = df[df["arm"] == arm]
    vals = rows[metric].astype("float64")
    return rows[np.isfinite(vals) & (vals > 0)]


def _pairs(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Paired log-ratios (:func:`specbench.analysis.launches.paired_log_ratios`); a frame without a
    ``repeat`` column is one launch. Empty when requests cannot be paired by prompt."""
    if "prompt_id" not in a.columns or "prompt_id" not in b.columns:
        return pd.DataFrame({"launch": [], "prompt": [], "d": []})
    if "repeat" not in a.columns or "repeat" not in b.columns:
        a, b = a.assign(repeat=0), b.assign(repeat=0)
    keys = [k for k in PAIR_KEYS if k in a.columns and k in b.columns]
    return L.paired_log_ratios(a, b, metric, keys)


def _two_sample_ci(
    data: tuple[npt.NDArray[Any], ...], statistic: Statistic, confidence: float, n_resamples: int, seed: int
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
        batch=max(1, BOOT_BATCH_VALUES // max(x.size for x in data)),
        **{_RNG_KW: np.random.default_rng(seed)},
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def median_ci(
    values: npt.ArrayLike, seed: int = 0, confidence: float = 0.95, n_resamples: int = 2000
) -> tuple[float, float, float]:
    """(median, CI low, CI high) of the finite values: percentile bootstrap of the median, the
    CI collapsing to the median for n < 2 or constant data (a median without its spread is the
    single-number reporting docs/mistakes.md, mistake 4 warns about)."""
    x = finite_values(values)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    med = float(np.median(x))
    if x.size < 2:
        return med, med, med
    # The report asks for the same arm's interval more than once (its table, its plot): a
    # bootstrap costs resamples × values, so each distinct one is computed once per process.
    key = (hashlib.sha256(x.tobytes()).hexdigest(), x.size, seed, confidence, n_resamples)
    if key not in _MEDIAN_CIS:
        if len(_MEDIAN_CIS) >= 512:
            _MEDIAN_CIS.clear()
        _MEDIAN_CIS[key] = _median_interval(x, confidence, n_resamples, seed)
    low, high = _MEDIAN_CIS[key]
    return med, low, high


_MEDIAN_CIS: dict[tuple[str, int, int, float, int], tuple[float, float]] = {}


def _median_interval(x: FloatArray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    """:func:`_two_sample_ci` of ``np.median`` on ``x``, resampling ranks (the same draws, the
    same medians to the bit: :class:`RankedMedian`)."""
    if (x == 0).any():  # 0.0 and -0.0 tie in ranks but not in print: np.median's own choice
        return _two_sample_ci((x,), np.median, confidence, n_resamples, seed)
    if np.ptp(x) == 0:
        point = float(np.median(x))
        return point, point
    ranked = RankedMedian(x)
    return _two_sample_ci((ranked.ranks,), ranked, confidence, n_resamples, seed)


def _log_median_ratio(a: FloatArray, b: FloatArray, axis: int = -1) -> Any:
    """log(median(a) / median(b))."""
    return np.log(np.median(a, axis=axis)) - np.log(np.median(b, axis=axis))


def _wilcoxon_p(logr: FloatArray) -> float:
    """Two-sided Wilcoxon signed-rank p of log-ratios against 0; 1.0 if all are 0."""
    if not np.any(logr != 0):
        return 1.0
    return float(sps.wilcoxon(logr).pvalue)


def _oriented(sign: float, lo: float, hi: float) -> tuple[float, float]:
    """exp of a log-space CI after multiplying by ``sign`` (−1 flips the interval)."""
    bounds = sorted((math.exp(sign * lo), math.exp(sign * hi)))
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
    n_launches: int = 0
    launches_needed: int | None = None
    decidable: bool = True  # False: report the numbers, but the verdict is "undetermined"
    data: tuple[float, float] | None = None  # smallest and largest paired log-ratio (data, not a CI)
    more: L.MoreLaunches | None = None


def _launch_estimate(pairs: pd.DataFrame, confidence: float, threshold: float) -> _Estimate:
    """The launch-level mixed model over ≥ 2 launch pairs (:mod:`specbench.analysis.launches`): the
    interval printed is the one the verdict uses (issue 28: a narrower "shown" interval beside an
    undetermined verdict read as a contradiction)."""
    f = L.fit(pairs, confidence)
    how = "pooled with within-launch noise" if f.pooled else "t"
    est = (
        f"order-balanced mean of launch-pair log-ratios; mixed model over {f.n_launches} launches "
        f"({how}, {f.dof:.0f} dof)"
    )
    decidable = f.n_launches >= L.MIN_LAUNCHES
    n = f.n_pairs
    return _Estimate(
        f.mu, f.lo, f.hi, L.p_value(f), n, n, n, est, f.n_launches,
        L.launches_needed(f, threshold, confidence), decidable, (f.data_lo, f.data_hi),
        L.more_launches(f, threshold, confidence),
    )  # fmt: skip


def _range_estimate(pairs: pd.DataFrame, n_launches: int) -> _Estimate:
    """One launch pair, or fewer than MIN_PAIRS pairs: the geometric mean ratio and the range of
    the paired ratios, no verdict (LOW_N) — launch-to-launch noise cannot be told from the effect
    with one launch, and two requests against two are no evidence. Never a ratio of medians where
    the design pairs prompts (a category with one prompt per launch once read "faster" so)."""
    d = pairs["d"].to_numpy(np.float64)
    n = int(d.size)
    est = f"geometric mean of paired ratios; {n} pair{'s' if n != 1 else ''}: range of the pairs, no CI"
    return _Estimate(
        float(np.mean(d)), float(d.min()), float(d.max()), _wilcoxon_p(d), n, n, n, est,
        max(n_launches, 1), None, False, (float(d.min()), float(d.max())),
    )  # fmt: skip


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
    if len(a) < 2 or len(b) < 2:  # thin data (issue 29): LOW_N and undetermined, never an exception
        return _too_few(arm, baseline, metric, hib, len(a), len(b), confidence, threshold)
    boot = {"confidence": confidence, "n_resamples": n_resamples, "seed": seed}
    pairs = _pairs(a, b, metric) if paired else pd.DataFrame({"launch": []})
    n_launches = int(pairs["launch"].nunique())
    if len(pairs) >= MIN_PAIRS and n_launches >= 2:
        e = _launch_estimate(pairs, confidence, threshold)
    elif len(pairs) >= MIN_PAIRS or (len(pairs) and 2 * len(pairs) >= min(len(a), len(b))):
        # One launch pair, or a paired design (most rows pair) with too few pairs for a CI: the
        # pairs' range, LOW_N. Where few rows pair (other prompts), the unpaired estimate below.
        e = _range_estimate(pairs, n_launches)
    else:
        e = _unpaired_estimate(a[metric].to_numpy(np.float64), b[metric].to_numpy(np.float64), boot)
    sign = 1.0 if hib else -1.0
    lo, hi = _oriented(sign, e.lo, e.hi)
    ratio = math.exp(sign * e.log_ratio)
    v: Verdict = verdict(lo, hi, threshold) if e.decidable else "undetermined"
    if not e.decidable:
        lo = hi = math.nan  # LOW_N: no verdict, so no interval (two launches give t(1): ×0.00–×7e5)
    data = _oriented(sign, *e.data) if e.data is not None else (math.nan, math.nan)
    more = e.more if v == "undetermined" and e.decidable else None
    return Comparison(
        arm=arm, baseline=baseline, metric=metric, ratio=ratio, ci_low=lo, ci_high=hi,
        confidence=confidence, paired=e.n_pairs > 0, n_pairs=e.n_pairs, n_a=e.n_a, n_b=e.n_b,
        verdict=v, p_value=e.p_value, estimator=e.estimator, higher_is_better=hib,
        n_launches=e.n_launches, launches_needed=e.launches_needed if v == "undetermined" else None,
        threshold=threshold, more_launches=more.more if more else None,
        more_range=(more.low, more.high) if more else None, pairs_low=data[0], pairs_high=data[1],
        family_alpha=1 - confidence,
    )  # fmt: skip


def _too_few(
    arm: str, baseline: str, metric: str, hib: bool, n_a: int, n_b: int, confidence: float, threshold: float
) -> Comparison:
    """Fewer than two usable values in the arm or the baseline: no ratio, no interval, LOW_N."""
    nan = math.nan
    return Comparison(
        arm=arm, baseline=baseline, metric=metric, ratio=nan, ci_low=nan, ci_high=nan,
        confidence=confidence, paired=False, n_pairs=0, n_a=n_a, n_b=n_b, verdict="undetermined",
        p_value=nan, estimator=f"none: fewer than 2 usable {metric} values in an arm", higher_is_better=hib,
        threshold=threshold, too_few=True, family_alpha=1 - confidence,
    )  # fmt: skip
