"""Automatic "this result looks unstable" warnings (pyperf-style) for one (arm, workload) cell.

LOW_N: fewer samples than a cell needs. UNSTABLE: the same prompt varies across repeats (the
median over prompts of its coefficient of variation) above a limit. DRIFT: the baseline measured
early and late in the run disagree (Mann-Whitney U on the first and last thirds by completion
order), i.e. the machine changed while the run was going on. Input is the frame described in
:mod:`specbench.analysis.stats`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd
from scipy import stats as sps

from specbench.analysis._arrays import FloatArray, finite_values
from specbench.analysis.evidence.noise import SEVERE_CV, cells, repeat_cv
from specbench.analysis.findings.family import PointFamily
from specbench.analysis.findings.gather import PointEvidence
from specbench.analysis.findings.model import Finding, Severity


class Code(StrEnum):
    LOW_N = "LOW_N"
    UNSTABLE = "UNSTABLE"
    DRIFT = "DRIFT"


#: UNSTABLE is an error above SEVERE_CV (no verdict is trusted there).
SEVERITY = {Code.LOW_N: Severity.WARNING, Code.UNSTABLE: Severity.WARNING, Code.DRIFT: Severity.WARNING}
ANCHOR = "stability"


def check(ev: PointEvidence) -> list[Finding]:
    run = ev.run
    return [
        Finding(w.code, (w.arm,), w.message, Severity.ERROR if w.severe else SEVERITY[w.code])
        for w in stability_warnings(run.df, baseline=run.baseline, client_behind=ev.client_behind)
    ]


@dataclass(frozen=True)
class Warning_:
    """A data-quality warning for one (arm, workload) cell; ``message`` is one sentence of evidence."""

    code: Code
    arm: str
    workload: str
    message: str
    severe: bool = False  # too noisy for any verdict: the decision refuses to recommend on it


def _low_n(arm: str, wl: str, x: FloatArray, metric: str, min_n: int) -> Warning_ | None:
    if x.size >= min_n:
        return None
    msg = f"{arm} on {wl} has only {x.size} {metric} samples (fewer than {min_n}), too few to trust."
    return Warning_(Code.LOW_N, arm, wl, msg)


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
    return Warning_(Code.UNSTABLE, arm, wl, msg, severe)


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
    return Warning_(Code.DRIFT, arm, wl, msg)


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
    for arm, wl, g in cells(df):
        x = finite_values(g[metric].to_numpy(np.float64))
        behind = arm in client_behind
        found = [_low_n(arm, wl, x, metric, min_n), _unstable(arm, wl, g, metric, max_cv, behind)]
        if baseline is None or arm == baseline:
            found.append(_drift(arm, wl, g, metric, drift_threshold, alpha))
        out += [w for w in found if w is not None]
    return out


FAMILY = PointFamily(Code, SEVERITY, ANCHOR, check)
