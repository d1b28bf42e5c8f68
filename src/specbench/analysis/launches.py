"""The paired launch-level estimator: a mixed model of per-prompt log-ratios (docs/statistics.md).

Every repeat launches each arm's server once, interleaved (ABBA), and sends the same prompts to
both. For prompt i in launch pair r the paired log-ratio is d_ri = log(arm_ri / baseline_ri) and

    d_ri = μ + p_i + u_r + e_ri,   u_r ~ N(0, σ_L²),   e_ri ~ N(0, σ_W²),   Σ p_i = 0

μ is the effect (exp μ the geometric-mean speedup over the prompt set), p_i the prompt's own
effect (fixed: the same prompts run in every launch, so it cancels from μ's error), u_r what the
launch pair shares (page cache, placement, clocks, background load) and e_ri the request's noise.
The estimate is μ̂ = mean_r d̄_r (d̄_r: launch pair r's mean over its prompts; the two launch
orders — arm first, baseline first — weighted equally, :func:`_order_balanced`) and

    Var(μ̂) = (σ_L² + σ_W² · h) / R,   h = mean_r 1 / P_r   (P prompts per launch when balanced)

σ_W² is the residual mean square of the additive fit (prompt + launch), with N − R − P + 1
degrees of freedom; s_m² (the launch means' variance) estimates σ_L² + σ_W² · h with R − 1. The
REML answer for this design: while σ̂_L² = s_m² − σ̂_W² · h > 0 the interval is Student t on the
launch means (R − 1 dof), so launch-level noise always widens it and an A/A run stays honest;
when the launches agree more closely than their own requests predict (σ̂_L² ≤ 0, the boundary)
the launch and residual sums of squares are pooled and the interval has their summed degrees of
freedom — consistent per-prompt effects across a few launches then give a tight interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import sparse
from scipy import stats as sps

#: The frame column (optional) giving each row's launch position within its round (0 = launched
#: first; :mod:`specbench.analysis.launchorder` fills it): tells which of a pair's launches ran first.
POSITION = "launch_position"
MIN_LAUNCHES = 3  # fewer give no verdict: LOW_N (two launch pairs leave one degree of freedom)
MAX_NEEDED = 1000  # launches_needed above this is reported as None ("not within reach")


@dataclass(frozen=True)
class LaunchFit:
    """The mixed model's fit on the log scale: ``lo``/``hi`` the CI of μ, ``data_lo``/``data_hi``
    the smallest and largest paired log-ratio, ``shown_lo``/``shown_hi`` the CI within them (what
    is printed: few launches can give a t interval wider than every ratio measured; the verdict
    is still taken from ``lo``/``hi``)."""

    mu: float
    se: float
    dof: float
    lo: float
    hi: float
    n_launches: int
    n_pairs: int
    sd_launch: float
    sd_within: float
    pooled: bool
    data_lo: float
    data_hi: float
    per_launch_sd: float  # sd of one launch pair's mean log-ratio: the noise a new launch adds

    @property
    def shown_lo(self) -> float:
        return min(max(self.lo, self.data_lo), self.data_hi)

    @property
    def shown_hi(self) -> float:
        return max(min(self.hi, self.data_hi), self.data_lo)


def paired_log_ratios(a: pd.DataFrame, b: pd.DataFrame, metric: str, keys: list[str]) -> pd.DataFrame:
    """Columns ``launch``, ``prompt``, ``d`` = log(a / b) over keys present in both arms, and
    ``arm_first`` (1.0: a's launch ran before b's in that round, 0.0: after, NaN: unknown) when
    both frames carry :data:`POSITION`.

    ``keys`` must hold ``repeat`` and ``prompt_id`` (``workload`` too when present); a key
    measured twice within an arm counts once, at its median."""
    ma, mb = a.groupby(keys)[metric].median(), b.groupby(keys)[metric].median()
    joined = pd.concat([ma.rename("a"), mb.rename("b")], axis=1, join="inner").reset_index()
    prompt_cols = [k for k in keys if k != "repeat"]
    prompt = joined[prompt_cols[0]].astype(str)  # "workload/prompt_id", column-wise: a row-wise join was slow
    for col in prompt_cols[1:]:
        prompt = prompt + "/" + joined[col].astype(str)
    d = np.log(joined["a"].to_numpy(np.float64) / joined["b"].to_numpy(np.float64))
    out = pd.DataFrame({"launch": joined["repeat"].to_numpy(), "prompt": prompt.to_numpy(), "d": d})
    if POSITION in a.columns and POSITION in b.columns:
        out["arm_first"] = out["launch"].map(_arm_first(a, b)).astype(np.float64)
    return out


def _arm_first(a: pd.DataFrame, b: pd.DataFrame) -> pd.Series:
    """Per repeat: 1.0 where a's launch ran before b's, 0.0 after, NaN where unknown or tied."""
    pa = pd.to_numeric(a[POSITION], errors="coerce").groupby(a["repeat"]).min()
    pb = pd.to_numeric(b[POSITION], errors="coerce").groupby(b["repeat"]).min()
    both = pd.concat([pa.rename("a"), pb.rename("b")], axis=1, join="inner")
    known = both["a"].notna() & both["b"].notna() & (both["a"] != both["b"])
    return pd.Series(np.where(known, (both["a"] < both["b"]).astype(np.float64), np.nan), index=both.index)


def _residual_ss(pairs: pd.DataFrame) -> tuple[float, int]:
    """Residual sum of squares of d ~ launch + prompt (least squares) and its degrees of freedom.

    The projection a dense one-hot least squares would compute, in time linear in the pairs
    (issue 31: ``lstsq`` and the rank's SVD on an N × (R + P) matrix took minutes at 25k
    requests). By Frisch–Waugh–Lovell the factor with more levels is absorbed by centring within
    its groups, and the other is solved from its normal equations on the centred data, a small
    K × K system (K = the fewer levels; its Schur complement ``diag(n_b) − Cᵀ diag(1/n_a) C`` from
    the sparse launch × prompt count table C). Rank = levels absorbed + rank of that system, so
    unbalanced and disconnected designs keep their degrees of freedom."""
    y = pairs["d"].to_numpy(np.float64)
    a, n_a = _levels(pairs["launch"])
    b, n_b = _levels(pairs["prompt"])
    if n_a.size < n_b.size:  # absorb the larger factor, solve for the smaller
        (a, n_a), (b, n_b) = (b, n_b), (a, n_a)
    y_within = y - _group_means(a, y, n_a)[a]
    counts = sparse.csr_matrix((np.ones(y.size), (a, b)), shape=(n_a.size, n_b.size))
    schur = np.diag(n_b.astype(np.float64)) - (counts.T @ sparse.diags(1.0 / n_a) @ counts).toarray()
    rhs = np.bincount(b, weights=y_within, minlength=n_b.size)
    coef, _, rank, _ = np.linalg.lstsq(schur, rhs, rcond=None)
    fitted = coef[b] - _group_means(a, coef[b], n_a)[a]  # the solved factor, centred within the other
    resid = y_within - fitted
    return float(resid @ resid), int(y.size - (n_a.size + int(rank)))


def _levels(column: pd.Series) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
    """Each row's level code and the rows per level (every level has at least one)."""
    codes, uniques = pd.factorize(column, sort=False)
    return np.asarray(codes, dtype=np.intp), np.bincount(codes, minlength=len(uniques)).astype(np.int64)


def _group_means(
    codes: npt.NDArray[np.intp], values: npt.NDArray[np.float64], sizes: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    return np.bincount(codes, weights=values, minlength=sizes.size) / sizes


def fit(pairs: pd.DataFrame, confidence: float = 0.95) -> LaunchFit:
    """Fit the model to :func:`paired_log_ratios` output with at least two launches."""
    by_launch = pairs.groupby("launch")["d"]
    means, counts = by_launch.mean().to_numpy(np.float64), by_launch.size().to_numpy()
    r = int(means.size)
    if r < 2:
        raise ValueError("the launch-level fit needs at least two launch pairs")
    h = float(np.mean(1.0 / counts))
    s2_m = float(np.var(means, ddof=1))
    first = pairs.groupby("launch")["arm_first"].first() if "arm_first" in pairs.columns else None
    mu, c = _order_balanced(by_launch.mean(), first)
    rss, dof_e = _residual_ss(pairs)
    s2_w = rss / dof_e if dof_e > 0 else math.nan
    pooled = dof_e > 0 and s2_m <= s2_w * h
    if pooled:  # boundary σ̂_L² = 0: pool the launch and residual sums of squares (REML)
        unit, dof = ((r - 1) * s2_m / h + rss) / (r - 1 + dof_e) * h, float(r - 1 + dof_e)
    else:
        unit, dof = s2_m, float(r - 1)
    se = math.sqrt(unit * c)
    half = float(sps.t.ppf(0.5 + confidence / 2, dof)) * se if se > 0 else 0.0
    d = pairs["d"].to_numpy(np.float64)
    data_lo, data_hi = float(d.min()), float(d.max())
    sd_launch = math.sqrt(max(0.0, s2_m - s2_w * h)) if not math.isnan(s2_w) else math.nan
    return LaunchFit(
        mu=mu, se=se, dof=dof, lo=mu - half, hi=mu + half, n_launches=r, n_pairs=int(d.size),
        sd_launch=sd_launch, sd_within=math.sqrt(s2_w) if not math.isnan(s2_w) else math.nan,
        pooled=pooled, data_lo=data_lo, data_hi=data_hi, per_launch_sd=math.sqrt(unit),
    )  # fmt: skip


def _order_balanced(means: pd.Series, arm_first: pd.Series | None = None) -> tuple[float, float]:
    """(μ̂, c): the mean of the two launch orders' means, and Var(μ̂) / Var(one launch mean).

    A machine can favour the first (or second) launch of a pair — A/A runs on a loaded 2-core
    machine showed the two orders tens of percent apart — and when one order has more launch
    pairs than the other (an odd number of them, or a seeded order that happened to repeat) it
    outweighs the other, which biases a plain mean. Weighting both orders equally cancels that
    effect for any R: c = (1/n_1 + 1/n_2) / 4 (= 1/R when balanced). The orders are who actually
    ran first in each round (``arm_first``, from the manifest's ``order`` or the cells' start
    times); only where that is unknown for some launch pair does the repeat's parity stand in
    (plain ABBA: old and imported runs). The launch variance is still taken around the grand
    mean, so an order effect widens the interval rather than hiding in it."""
    group = _order_groups(means, arm_first)
    values = means.to_numpy(np.float64)
    n_1, n_2 = int(np.sum(group)), int(np.sum(~group))
    if n_1 == 0 or n_2 == 0:
        return float(values.mean()), 1.0 / values.size
    mu = (float(values[group].mean()) + float(values[~group].mean())) / 2
    return mu, (1 / n_1 + 1 / n_2) / 4


def _order_groups(means: pd.Series, arm_first: pd.Series | None) -> npt.NDArray[np.bool_]:
    """True for the launch pairs of one order, False for the other: who ran first where every
    launch pair's order is known, else (one unknown is enough: two rules mixed would pair
    launches arbitrarily) the repeat's parity."""
    if arm_first is not None:
        known = arm_first.reindex(means.index)
        if known.notna().all():
            return np.asarray(known.to_numpy(np.float64) == 1.0)
    return np.asarray(np.asarray(means.index, dtype=np.int64) % 2 == 0)


def p_value(f: LaunchFit) -> float:
    """Two-sided p of μ = 0 under the fit's t distribution."""
    if f.se == 0:
        return 1.0 if f.mu == 0 else 0.0
    return float(2 * sps.t.sf(abs(f.mu) / f.se, f.dof))


def launches_needed(f: LaunchFit, band: float, confidence: float = 0.95) -> int | None:
    """Launch pairs at which, at the observed effect and noise, the interval would clear the
    noise band (|μ̂| beyond the band) or fit inside it (|μ̂| within): the smallest n with
    t(n − 1) · sd_launch_pair / √n below the margin. None when the effect sits on the band's edge
    or the answer exceeds MAX_NEEDED; the current count when it already suffices."""
    return _needed(f.n_launches, abs(abs(f.mu) - math.log1p(band)), f.per_launch_sd, confidence)


def _needed(n_launches: int, margin: float, sd: float, confidence: float) -> int | None:
    if margin <= 0 or not math.isfinite(sd):
        return None
    if sd == 0:
        return max(n_launches, MIN_LAUNCHES)
    for n in range(MIN_LAUNCHES, MAX_NEEDED + 1):
        if float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n) < margin:
            return max(n, n_launches)
    return None


#: The range printed with "about N more launches" spans this central interval of both things N
#: rests on: the per-launch variance (chi-square with the fit's degrees of freedom: with three
#: launches it is known only within a factor of ~30) and the effect's distance from the band's
#: edge (t); the number itself is a point estimate of a noisy quantity, and the range says how noisy.
MORE_RANGE = 0.80


@dataclass(frozen=True)
class MoreLaunches:
    """How many launch pairs to ADD (beyond the fit's) for the verdict to settle: ``more`` at the
    observed effect and variance, ``low``/``high`` at the favourable and unfavourable ends of
    their MORE_RANGE intervals (``high`` None: beyond MAX_NEEDED, or the effect may sit on the
    band's edge)."""

    more: int
    low: int
    high: int | None


def more_launches(f: LaunchFit, band: float, confidence: float = 0.95) -> MoreLaunches | None:
    """:class:`MoreLaunches` from the launch-level variance and the effect, with their uncertainty;
    None when the point estimate is out of reach (effect on the band's edge, > MAX_NEEDED)."""
    edge = math.log1p(band)
    total = _needed(f.n_launches, abs(abs(f.mu) - edge), f.per_launch_sd, confidence)
    if total is None:
        return None
    q = (1 - MORE_RANGE) / 2
    dof = f.dof if math.isfinite(f.dof) and f.dof > 0 else 1.0
    var = f.per_launch_sd**2
    sd_lo = math.sqrt(var * dof / float(sps.chi2.ppf(1 - q, dof)))
    sd_hi = math.sqrt(var * dof / float(sps.chi2.ppf(q, dof)))
    shift = float(sps.t.ppf(1 - q, dof)) * f.se  # how far the effect itself may be off
    outside = abs(f.mu) > edge  # a directional verdict: the effect must stay beyond the edge
    far, near = abs(f.mu) + shift, abs(f.mu) - shift
    margin_best = far - edge if outside else edge - max(0.0, near)
    margin_worst = near - edge if outside else edge - far
    low = _needed(f.n_launches, margin_best, sd_lo, confidence)
    high = _needed(f.n_launches, margin_worst, sd_hi, confidence)
    more = max(1, total - f.n_launches)  # asked of an undetermined verdict: at least one more
    low_more = more if low is None else max(1, min(more, low - f.n_launches))
    return MoreLaunches(more, low_more, None if high is None else max(more, high - f.n_launches))
