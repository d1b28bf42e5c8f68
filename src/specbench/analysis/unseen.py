"""A speculating arm whose only evidence is its speed, and that speed is the baseline's.

An imported file without draft columns (vLLM's per-request output has none), or a server that
reports nothing about speculation, leaves one data-driven question: did the arm speculate at all?
When nothing says it drafted (no per-request draft counts, no counter deltas, no word from the
server either way) and its decode speed equals the baseline's, the arm cannot be told from a
silent fallback: the published 190-row CSV of issue 15 had exactly such an arm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from specbench.analysis.finding import Finding
from specbench.analysis.speculation import counter_drafts
from specbench.analysis.stats import Comparison
from specbench.engines.base import Engine

#: |ratio − 1| at most this: closer than any drafting arm gets (drafting costs time even when every
#: draft is rejected, and accepted drafts save it), wider than the jitter of repeated runs' medians.
SAME_BAND = 0.02


def no_draft_evidence(arm: str, df: pd.DataFrame, cells: Sequence[Mapping[str, Any]], engine: Engine) -> bool:
    """Nothing in the run says whether ``arm`` drafted: no per-request counts, no counter deltas,
    no server statement (those have their own checks: SILENT_FALLBACK, NO_DRAFTS)."""
    mine = [c for c in cells if c.get("arm") == arm]
    servers = [c.get("server") or {} for c in mine]
    counted = bool(df.loc[df["arm"] == arm, "draft_n"].notna().any())
    said = bool(engine.server_says_off(servers)) or engine.server_says_on(servers) is not None
    return not counted and not said and counter_drafts(mine) is None


def same_as_baseline(
    arm: str, df: pd.DataFrame, cells: Sequence[Mapping[str, Any]], cmp: Comparison, engine: Engine
) -> list[Finding]:
    """SAME_AS_BASELINE (warning) for an arm configured or declared to speculate (the caller
    decides) with no draft evidence, whose decode ratio is ×1 within :data:`SAME_BAND` and, where
    a CI exists, not significantly different from ×1."""
    if not no_draft_evidence(arm, df, cells, engine) or not abs(cmp.ratio - 1) <= SAME_BAND:
        return []
    has_ci = math.isfinite(cmp.ci_low) and math.isfinite(cmp.ci_high)
    if has_ci and not cmp.ci_low <= 1 <= cmp.ci_high:
        return []
    ci = f", CI {cmp.ci_low:.3f}–{cmp.ci_high:.3f}" if has_ci else ""
    return [
        Finding(
            "SAME_AS_BASELINE",
            (arm, cmp.baseline),
            f"{arm} is meant to speculate, but nothing in the data shows it drafted (no per-request "
            f"draft counts, no server counters) and its decode speed equals {cmp.baseline}'s "
            f"(×{cmp.ratio:.3f}{ci}, within ±{SAME_BAND:.0%}): a silent fallback looks exactly like "
            "this — check the server's draft counters before publishing this arm.",
            "warning",
        )
    ]
