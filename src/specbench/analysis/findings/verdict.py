"""What the comparison with the baseline says: SPEC_LOSS (significantly slower), SAME_AS_BASELINE
(meant to speculate, nothing shows it drafted, and exactly the baseline's speed) and LOW_N where
too few launch pairs or values leave the verdict undetermined (the code of
:mod:`specbench.analysis.findings.stability`: too few samples, whichever check counts them).

SAME_AS_BASELINE: a speculating arm whose only evidence is its speed, and that speed is the baseline's.

An imported file without draft columns (vLLM's per-request output has none), or a server that
reports nothing about speculation, leaves one data-driven question: did the arm speculate at all?
When nothing says it drafted (no per-request draft counts, no counter deltas, no word from the
server either way) and its decode speed equals the baseline's, the arm cannot be told from a
silent fallback: the published 190-row CSV of issue 15 had exactly such an arm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import pandas as pd

from specbench.analysis import launches, stats
from specbench.analysis.evidence.acceptance import counter_drafts
from specbench.analysis.findings.family import PointFamily
from specbench.analysis.findings.gather import PointEvidence
from specbench.analysis.findings.model import Finding, Severity
from specbench.analysis.findings.stability import Code as StabilityCode
from specbench.analysis.stats import Comparison
from specbench.engines.base import Engine


class Code(StrEnum):
    SPEC_LOSS = "SPEC_LOSS"
    SAME_AS_BASELINE = "SAME_AS_BASELINE"


#: SPEC_LOSS is an error where its whole CI lies below ×LARGE_LOSS.
SEVERITY = {Code.SPEC_LOSS: Severity.WARNING, Code.SAME_AS_BASELINE: Severity.WARNING}
ANCHOR = "verdict"
LARGE_LOSS = 0.8  # CI upper bound below this: at least a 20 % slowdown, whatever the noise


def check(ev: PointEvidence) -> list[Finding]:
    """LOW_N per comparison without a verdict, then per arm SAME_AS_BASELINE and SPEC_LOSS."""
    run, cmps = ev.run, ev.comparisons
    out = low_n_findings(run.baseline, cmps)
    for arm, cmp in cmps.items():
        if run.speculates(arm):  # declared or configured: is its speed the only sign, and the baseline's?
            out += same_as_baseline(arm, run.df, run.cells, cmp, run.engine)
        if cmp.verdict == "slower":
            out.append(spec_loss(arm, run.baseline, cmp))
    return out


def spec_loss(arm: str, baseline: str, cmp: Comparison) -> Finding:
    return Finding(
        Code.SPEC_LOSS,
        (arm, baseline),
        f"{arm} is slower than {baseline}: decode speed ×{cmp.ratio:.3f} "
        f"({stats.ci_label(cmp)} CI {cmp.ci_low:.3f}–{cmp.ci_high:.3f}).",
        spec_loss_severity(cmp.ci_high),
    )


def spec_loss_severity(ci_high: float) -> Severity:
    """A significant slowdown is a warning; one whose whole CI lies below ×0.8 is an error, above a
    doubtful acceptance figure (warning) — a user publishing that arm publishes a loss."""
    return Severity.ERROR if ci_high < LARGE_LOSS else SEVERITY[Code.SPEC_LOSS]


def low_n_findings(baseline: str, cmps: Mapping[str, Comparison]) -> list[Finding]:
    """An arm paired with the baseline over fewer launch pairs than a verdict needs, or either of
    them with fewer than two usable values (issue 29: a baseline with one successful request):
    the verdict is undetermined, never an exception."""
    return [
        Finding(StabilityCode.LOW_N, (arm, baseline), _low_n_text(baseline, arm, c))
        for arm, c in cmps.items()
        if c.low_n
    ]


def _low_n_text(baseline: str, arm: str, c: Comparison) -> str:
    if c.too_few:
        return (
            f"{arm} vs {baseline}: {c.n_a} usable {c.metric} value(s) for {arm} and {c.n_b} for "
            f"{baseline}; a comparison needs ≥ 2 in each — undetermined, rerun the failed requests "
            "or raise repeats."
        )
    return (
        f"{arm} vs {baseline}: only {c.n_launches} launch pair(s); a verdict needs "
        f"≥ {launches.MIN_LAUNCHES} (the server launch is the unit of replication) — "
        "undetermined, raise repeats."
    )


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
            Code.SAME_AS_BASELINE,
            (arm, cmp.baseline),
            f"{arm} is meant to speculate, but nothing in the data shows it drafted (no per-request "
            f"draft counts, no server counters) and its decode speed equals {cmp.baseline}'s "
            f"(×{cmp.ratio:.3f}{ci}, within ±{SAME_BAND:.0%}): a silent fallback looks exactly like "
            "this — check the server's draft counters before publishing this arm.",
            SEVERITY[Code.SAME_AS_BASELINE],
        )
    ]


FAMILY = PointFamily(Code, SEVERITY, ANCHOR, check)
