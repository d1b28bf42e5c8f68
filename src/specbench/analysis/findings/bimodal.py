"""BIMODAL: an arm whose decode rate has two modes, so its mean describes neither.

A mean of a two-mode arm describes neither mode (docs/mistakes.md, mistake 5). Stalled requests
are left out first (:mod:`specbench.analysis.evidence.stalls`): a few pauses would make any arm
look bimodal.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from enum import StrEnum
from typing import Any

import pandas as pd

from specbench.analysis import bimodality
from specbench.analysis.evidence.stalls import without_stalls
from specbench.analysis.findings.busy import busy_cells
from specbench.analysis.findings.family import PointFamily
from specbench.analysis.findings.gather import PointEvidence
from specbench.analysis.findings.model import Finding, Severity
from specbench.store.record import Record


class Code(StrEnum):
    BIMODAL = "BIMODAL"


SEVERITY = {Code.BIMODAL: Severity.WARNING}
ANCHOR = "bimodality"


def check(ev: PointEvidence) -> list[Finding]:
    run = ev.run
    return bimodal_findings(run.df, run.records, run.cells, run.measured_arms, ev.speculating)


def bimodal_findings(
    df: pd.DataFrame,
    records: Sequence[Record],
    cells: Sequence[Mapping[str, Any]],
    arms: Sequence[str],
    speculating: Collection[str] | None = None,
) -> list[Finding]:
    """BIMODAL per arm whose decode rate has two modes once stalled requests are left out."""
    clean = without_stalls(df, records, speculating)
    out = []
    for arm in arms:
        bimodal = bimodality.bimodality(clean.loc[clean["arm"] == arm, "decode_tok_s"].to_numpy())
        if not bimodal.bimodal:
            continue
        modes = " and ".join(f"{m:.1f}" for m in bimodal.modes)
        busy = busy_cells(cells, arm)
        why = (
            f"the machine was busy during {len(busy)} of its cells ({busy[0]}): the modes may be the "
            "load, not the workload"
            if busy
            else "see the per-category breakdown"
        )
        msg = f"{arm}: decode tok/s has two modes ({modes}); the mean describes neither — {why}."
        out.append(Finding(Code.BIMODAL, (arm,), msg, SEVERITY[Code.BIMODAL]))
    return out


FAMILY = PointFamily(Code, SEVERITY, ANCHOR, check)
