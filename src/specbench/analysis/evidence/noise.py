"""How noisy each (arm, operating point) cell is: the spread of one prompt across repeats.

Different prompts legitimately run at different speeds (length, category), so spread across
prompts is not instability; spread across repeats of one prompt is (pyperf's view). The UNSTABLE
finding reads it (:mod:`specbench.analysis.findings.stability`); the summary's verdicts and
``specbench compare`` mark the arms too noisy for any verdict.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from specbench.analysis._arrays import finite_values
from specbench.analysis.stats import describe

# Repeat-to-repeat CV above this is not noise around an effect but a different machine from one
# launch to the next (a busy box swings per-request rates 10x): no speedup from it is publishable.
SEVERE_CV = 0.25


def cells(df: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """(arm, operating point) cells: a sweep's levels are never one cell (issue 40)."""
    where = "point" if "point" in df else "workload"
    for (arm, workload), group in df.groupby(["arm", where], sort=True):
        yield str(arm), str(workload), group


def repeat_cv(g: pd.DataFrame, metric: str) -> tuple[float, int]:
    """Median over prompts of the CV across repeats of the same prompt, and the prompt count.
    Falls back to the CV over all requests, with count 0, when no prompt was repeated."""
    if "prompt_id" in g and "repeat" in g:
        per = g.groupby("prompt_id")[metric].agg(["mean", "std", "count"])
        per = per[(per["count"] >= 2) & (per["mean"] > 0)]
        if len(per):
            return float(np.median(per["std"] / per["mean"])), len(per)
    return describe(finite_values(g[metric].to_numpy(np.float64))).cv, 0


def unstable_arms(df: pd.DataFrame, metric: str = "decode_tok_s") -> set[str]:
    """Arms with a cell too noisy for any verdict (repeat CV above SEVERE_CV)."""
    return {arm for arm, _, g in cells(df) if repeat_cv(g, metric)[0] > SEVERE_CV}


def caveated(verdict: str, arm: str, baseline: str, unstable: set[str]) -> str:
    """The verdict, flagged when the arm or its baseline is too unstable for it to mean anything."""
    noisy = [a for a in (arm, baseline) if a in unstable]
    return f"{verdict} (UNSTABLE: {', '.join(noisy)})" if noisy else verdict
