"""STALLED: requests whose stream shows the engine paused, not decoding.

Which gaps are pauses and which are verification rounds is :mod:`specbench.analysis.evidence.stalls`;
this names the arms with stalled requests, how long they stalled, and the speedup without them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from enum import StrEnum

import numpy as np
import pandas as pd

from specbench.analysis import stats
from specbench.analysis.evidence.stalls import STALL_FACTOR, Rows, drop_stalled, measured, stalled
from specbench.analysis.findings.family import PointFamily
from specbench.analysis.findings.gather import PointEvidence
from specbench.analysis.findings.model import Finding, Severity


class Code(StrEnum):
    STALLED = "STALLED"


SEVERITY = {Code.STALLED: Severity.WARNING}
ANCHOR = "stalls"


def check(ev: PointEvidence) -> list[Finding]:
    run = ev.run
    return stall_findings(run.records, run.measured_arms, run.df, run.baseline, ev.speculating)


def _without_line(df: pd.DataFrame, clean: pd.DataFrame, arm: str, baseline: str) -> str:
    """ " Speedup ×a with them, ×b without" for an arm compared with the baseline, else "" (also
    where too few requests are left on a side for a ratio)."""
    if arm == baseline or baseline not in set(df["arm"]):
        return ""
    with_ = stats.speedup(df, arm, baseline).ratio
    without = stats.speedup(clean, arm, baseline).ratio
    if not (np.isfinite(with_) and np.isfinite(without)):
        return ""
    return f" Speedup over {baseline}: ×{with_:.2f} with them, ×{without:.2f} without."


def stall_findings(
    records: Rows,
    arms: Sequence[str],
    df: pd.DataFrame,
    baseline: str,
    speculating: Collection[str] | None = None,
) -> list[Finding]:
    """STALLED per arm with stalled requests: how many, how long, and the speedup without them."""
    keys = stalled(records, speculating)
    clean = drop_stalled(df, keys)
    out = []
    for arm in arms:
        pauses = sorted(ms for (a, _), ms in keys.items() if a == arm)
        if not pauses:
            continue
        total = sum(1 for r in measured(records) if r.arm == arm)
        span = (
            f"{pauses[0] / 1000:.1f} s"
            if len(pauses) == 1
            else f"{pauses[0] / 1000:.1f}–{pauses[-1] / 1000:.1f} s"
        )
        out.append(
            Finding(
                Code.STALLED,
                (arm,),
                f"{arm}: {len(pauses)} of {total} requests stalled (one gap of {span}, ≥ {STALL_FACTOR:.0f}× "
                "the request's usual gap; neither a burst of tokens after it, the arm's verification-round "
                "time nor the server's own timing shows decoding in it): the engine was paused, not "
                "decoding; these requests drag its "
                "mean and speedup down and are left out of the bimodality and category checks."
                + _without_line(df, clean, arm, baseline),
            )
        )
    return out


FAMILY = PointFamily(Code, SEVERITY, ANCHOR, check)
