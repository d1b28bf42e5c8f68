"""The answer first (issue 28.1): per workload, what to ship — or "keep speculation off" — with its
speedup and the interval its verdict used, and where the answer differs by kind of prompt, the
per-category answer with why (acceptance and drafted tokens there).

It only reads what the analysis already computed (the decision, the Holm-adjusted comparisons,
the per-category speedups), so the top line can never disagree with the tables below it. The
words are the report's (:mod:`specbench.report.answer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from specbench.analysis import stats
from specbench.analysis.decision import Decision
from specbench.analysis.tables.measures import MEASURES


@dataclass(frozen=True)
class CategoryAnswer:
    """One category's speedup of the arm the answer discusses, and the drafting behind it."""

    category: str
    speedup: float
    ci_low: float
    ci_high: float
    verdict: str
    drafted: float
    accepted: float


@dataclass(frozen=True)
class MeasureCell:
    """The discussed arm's comparison on a measure other than the one that decided."""

    measure: str
    label: str
    speedup: float
    ci_low: float
    ci_high: float
    verdict: str


@dataclass(frozen=True)
class Answer:
    """What to do for one workload. ``ship`` is the recommended arm (None: keep speculation off);
    ``arm`` the arm the numbers are about (the shipped one, else the best candidate); ``advice``
    the per-category consequence ("don't use it for json"), "" when the categories agree."""

    workload: str
    ship: str | None
    arm: str | None
    speedup: float
    ci_low: float
    ci_high: float
    verdict: str
    error_rate: str
    reason: str
    categories: list[CategoryAnswer] = field(default_factory=list)
    advice: str = ""
    measure: str = "decode"  # the label of the measure that decided
    beside: list[MeasureCell] = field(default_factory=list)


def answer(
    decision: Decision,
    cmps: dict[str, stats.Comparison],
    speedups: pd.DataFrame,
    baseline: str,
    beside: dict[str, dict[str, stats.Comparison]] | None = None,
) -> Answer:
    """The answer of one operating point from its decision, its arms' comparisons on the measure
    that decided, its per-category speedups (:func:`specbench.analysis.tables.frames.category_speedups`)
    and ``beside``: measure → arm → comparison on the other measures, shown next to it."""
    arm = decision.arm or _candidate(cmps, speedups)
    c = cmps.get(arm) if arm is not None else None
    label = MEASURES[decision.measure].label
    if c is None:
        nan = math.nan
        return Answer(decision.workload, None, None, nan, nan, nan, "", "", decision.reason, measure=label)
    cats = _categories(speedups, c.arm) if decision.measure == "decode" else []
    words = {_word(x.verdict) for x in cats}
    differ = len(cats) >= 2 and (len(words) > 1 or words != {_word(stats.verdict_text(c))})
    return Answer(
        decision.workload, decision.arm, c.arm, c.ratio, c.ci_low, c.ci_high, stats.verdict_text(c),
        stats.error_rate_text(c), decision.reason, cats if differ else [],
        category_advice(c.arm, cats, decision.arm is not None) if differ else "", label,
        _beside(c.arm, beside or {}),
    )  # fmt: skip


def _beside(arm: str, beside: dict[str, dict[str, stats.Comparison]]) -> list[MeasureCell]:
    out = []
    for measure, cmps in beside.items():
        c = cmps.get(arm)
        if c is not None and math.isfinite(c.ratio):
            m = MEASURES[measure]
            out.append(MeasureCell(measure, m.label, c.ratio, c.ci_low, c.ci_high, stats.verdict_text(c)))
    return out


def _word(verdict: str) -> str:
    return verdict.split(" (", 1)[0]


def _candidate(cmps: dict[str, stats.Comparison], speedups: pd.DataFrame) -> str | None:
    """Without a recommendation: the arm that wins on the most categories (where the workload's
    answer may hide a per-category one), else the largest overall speedup (the decision's)."""
    if not cmps:
        return None
    wins: dict[str, int] = {}
    for r in speedups.to_dict("records") if len(speedups) else []:
        if _word(str(r["verdict"])) == "faster" and r["arm"] in cmps:
            wins[str(r["arm"])] = wins.get(str(r["arm"]), 0) + 1
    finite = [a for a in cmps if math.isfinite(cmps[a].ratio)] or list(cmps)
    return max(finite, key=lambda a: (wins.get(a, 0), cmps[a].ratio if math.isfinite(cmps[a].ratio) else 0.0))


def _categories(speedups: pd.DataFrame, arm: str) -> list[CategoryAnswer]:
    rows = speedups[speedups["arm"] == arm].to_dict("records") if len(speedups) else []
    return [
        CategoryAnswer(
            str(r["category"]),
            float(r["speedup"]),
            float(r["ci_low"]),
            float(r["ci_high"]),
            str(r["verdict"]),
            float(r["drafted"]),
            float(r["accepted"]),
        )
        for r in rows
    ]


def category_advice(arm: str, cats: list[CategoryAnswer], shipped: bool) -> str:
    slower = [c.category for c in cats if _word(c.verdict) == "slower"]
    faster = [c.category for c in cats if _word(c.verdict) == "faster"]
    parts = []
    if slower:
        parts.append(f"don't use {arm} for {', '.join(slower)} prompts (slower there)")
    if faster and not shipped:
        parts.append(f"{arm} is faster on {', '.join(faster)} prompts only: consider it for those")
    open_ = [c.category for c in cats if _word(c.verdict) not in ("faster", "slower", "equivalent")]
    if open_:  # named, never read as "none is settled" while others are
        parts.append(f"{', '.join(open_)}: not settled yet (more launches would tell)")
    return "; ".join(parts)
