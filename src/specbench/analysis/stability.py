"""Automatic "this result looks unstable" warnings (pyperf-style) for one (arm, workload) cell.

LOW_N: fewer samples than a cell needs. UNSTABLE: the same prompt varies across repeats (the
median over prompts of its coefficient of variation) above a limit. DRIFT: the baseline measured
early and late in the run disagree (Mann-Whitney U on the first and last thirds by completion
order), i.e. the machine changed while the run was going on. Input is the frame described in
:mod:`specbench.analysis.stats`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats as sps

from specbench.analysis._arrays import FloatArray, finite_values
from specbench.analysis.stats import describe

WarningCode = Literal["LOW_N", "UNSTABLE", "DRIFT"]
# Repeat-to-repeat CV above this is not noise around an effect but a different machine from one
# launch to the next (a busy box swings per-request rates 10x): no speedup from it is publishable.
SEVERE_CV = 0.25


@dataclass(frozen=True)
class Warning_:
    """A data-quality warning for one (arm, workload) cell; ``message`` is one sentence of evidence."""

    code: WarningCode
    arm: str
    workload: str
    message: str
    severe: bool = False  # too noisy for any verdict: the decision refuses to recommend on it


def _cells(df: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """(arm, operating point) cells: a sweep's levels are never one cell (issue 40)."""
    where = "point" if "point" in df else "workload"
    for (arm, workload), group in df.groupby(["arm", where], sort=True):
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
    return describe(finite_values(g[metric].to_numpy(np.float64))).cv, 0


def _unstable(
    arm: str, wl: str, g: pd.DataFrame, metric: str, max_cv: float, client_behind: bool = False
) -> Warning_ | None:
    cv, prompts = repeat_cv(g, metric)
    if not cv > max_cv:
        return None
    basis = (
        f"median over {prompts} prompts of the spread across repeats" if prompts else "across all requests"
    )
    msg = f"{arm} on {wl}: {metric} varies by CV {cv:.1%} ({basis}), above the {max_cv:.0%} limit."
    severe = cv > SEVERE_CV
    if client_behind:  # the client's own lag stamped this arm's chunks late (CLIENT_BEHIND)
        lead = f" Above {SEVERE_CV:.0%} no verdict or recommendation is trusted: the" if severe else " The"
        msg += (
            f"{lead} client's event loop fell behind on this arm (CLIENT_BEHIND), so part of the spread"
            " is the client's own lag; lower the concurrency or give the client its own cores, then rerun."
        )
    elif severe:
        msg += (
            f" Above {SEVERE_CV:.0%} no verdict or recommendation is trusted: the machine was likely busy,"
            " rerun on a quiet one."
        )
    return Warning_("UNSTABLE", arm, wl, msg, severe)


def _concurrent(g: pd.DataFrame) -> bool:
    return "concurrency" in g and bool((pd.to_numeric(g["concurrency"], errors="coerce") > 1).any())


def _drift(arm: str, wl: str, g: pd.DataFrame, metric: str, thr: float, alpha: float) -> Warning_ | None:
    """First vs last third in ``seq`` order: |median_last / median_first − 1| > threshold and
    two-sided Mann-Whitney p < alpha (each third ≥ 3 values). Where requests ran concurrently,
    completion order is not time (a launch's last requests decode in a shrinking batch and run
    faster: +48 % "drift" inside one level on an H200), so the thirds are of whole launches, by
    their medians, and need ≥ 3 launches each."""
    if _concurrent(g):
        ordered = g.groupby("repeat")[[metric, "seq"]].median().sort_values("seq")
        x = finite_values(ordered[metric].to_numpy(np.float64))
    else:
        x = finite_values(g.sort_values("seq")[metric].to_numpy(np.float64))
    third = x.size // 3
    if third < 3:
        return None
    first, last = x[:third], x[-third:]
    m1, m2 = float(np.median(first)), float(np.median(last))
    change, p = m2 / m1 - 1, float(sps.mannwhitneyu(first, last).pvalue)
    if not (abs(change) > thr and p < alpha):
        return None
    unit = "launches (their medians; the requests ran concurrently)" if _concurrent(g) else "requests"
    msg = (
        f"{arm} on {wl}: median {metric} moved {change:+.1%} from the first third of {unit} "
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
    client_behind: Collection[str] = (),
) -> list[Warning_]:
    """Per (arm, workload) cell: LOW_N if n < ``min_n``; UNSTABLE if the repeat-to-repeat CV
    (:func:`repeat_cv`) > ``max_cv``, naming the client's lag for arms in ``client_behind``;
    DRIFT (``baseline`` arm only, every arm if None) if the first and last thirds in ``seq``
    order differ by > ``drift_threshold`` in median with Mann-Whitney p < ``alpha``."""
    out: list[Warning_] = []
    for arm, wl, g in _cells(df):
        x = finite_values(g[metric].to_numpy(np.float64))
        behind = arm in client_behind
        found = [_low_n(arm, wl, x, metric, min_n), _unstable(arm, wl, g, metric, max_cv, behind)]
        if baseline is None or arm == baseline:
            found.append(_drift(arm, wl, g, metric, drift_threshold, alpha))
        out += [w for w in found if w is not None]
    return out


def unstable_arms(df: pd.DataFrame) -> set[str]:
    """Arms with a cell too noisy for any verdict (repeat CV above SEVERE_CV)."""
    return {w.arm for w in stability_warnings(df) if w.severe}


def caveated(verdict: str, arm: str, baseline: str, unstable: set[str]) -> str:
    """The verdict, flagged when the arm or its baseline is too unstable for it to mean anything."""
    noisy = [a for a in (arm, baseline) if a in unstable]
    return f"{verdict} (UNSTABLE: {', '.join(noisy)})" if noisy else verdict
