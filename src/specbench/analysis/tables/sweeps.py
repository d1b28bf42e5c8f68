"""A sweep's answer: every arm's verdict level by level, and where its sign flips (issue 40).

The per-point answers say what to ship at each level; this says it along the sweep, as the
people who tune speculation put it — "a draft model pays up to 8 in flight and costs 13 % at 64:
keep it off above 8". A crossover is bracketed by the two measured levels it lies between, never
interpolated: the levels between them were not measured.

:func:`comparison_frame` is every (point, arm, measure) comparison of a run in one table, the
rows findings.json carries and the speedup-vs-level plot draws.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from specbench.analysis import stats
from specbench.analysis.launches import MIN_LAUNCHES
from specbench.analysis.points import Point
from specbench.analysis.rundata import RunData
from specbench.analysis.tables import measures

COLUMNS = [
    "workload", "point", "level_kind", "level", "level_label", "arm", "measure", "decides", "ratio",
    "ci_low", "ci_high", "confidence", "verdict", "verdict_text", "launches", "family", "error_rate",
]  # fmt: skip


def _measures_of(run: RunData) -> list[str]:
    """The measures a run is compared on: each shown one, and any objective beyond them."""
    objectives = {measures.objective_of(run, p.workload, p) for p in run.points}
    return [*measures.SHOWN, *sorted(objectives - set(measures.SHOWN))]


def comparison_frame(run: RunData) -> pd.DataFrame:
    """One row per (point, arm, measure): the arm's comparison with the baseline there, with the
    interval its verdict used; ``decides`` marks the point's objective."""
    rows: list[dict[str, Any]] = []
    for measure in _measures_of(run):
        by_point = measures.comparisons(run, measure)
        for p in run.points:
            decides = measures.objective_of(run, p.workload, p) == measure
            for arm, c in by_point.get(p.name, {}).items():
                rows.append(_row(p, arm, measure, decides, c))
    return pd.DataFrame(rows, columns=COLUMNS)


def _row(p: Point, arm: str, measure: str, decides: bool, c: stats.Comparison) -> dict[str, Any]:
    level = p.level
    return {
        "workload": p.workload, "point": p.name, "level_kind": level.kind if level else "",
        "level": level.value if level else math.nan, "level_label": p.label, "arm": arm,
        "measure": measure, "decides": decides, "ratio": c.ratio, "ci_low": c.ci_low, "ci_high": c.ci_high,
        "confidence": c.confidence, "verdict": c.verdict, "verdict_text": stats.verdict_text(c),
        "launches": c.n_launches, "family": c.family, "error_rate": stats.error_rate_text(c),
    }  # fmt: skip


@dataclass(frozen=True)
class ArmAlong:
    """One arm along a sweep: its verdict words by level and where it stops paying."""

    arm: str
    levels: list[tuple[str, str]]  # (level label, verdict word)
    crossover: tuple[str, str] | None = None  # the two levels the sign flips between, if it does
    named: bool = False  # named phases (scenarios): no order, so no crossover; on for / off for


@dataclass(frozen=True)
class Sweep:
    """A workload swept over two or more operating points: the deciding measure's verdicts of
    each arm along it (``arms``) and the family they were read in."""

    workload: str
    measure: str
    arms: list[ArmAlong] = field(default_factory=list)
    family: str = ""


def _crossover(levels: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The last level where the arm was better and the first worse one after it (None: never)."""
    decided = [(label, w) for label, w in levels if w in ("faster", "slower")]
    for (a, wa), (b, wb) in itertools.pairwise(decided):
        if wa == "faster" and wb == "slower":
            return a, b
    return None


def sweeps(run: RunData, table: pd.DataFrame) -> list[Sweep]:
    """One :class:`Sweep` per workload with two or more points, on its deciding measure."""
    out = []
    for workload in dict.fromkeys(p.workload for p in run.points):
        mine = [p for p in run.points if p.workload == workload]
        if len(mine) < 2 or table.empty:
            continue
        rows = table[(table["workload"] == workload) & table["decides"]]  # each point's own objective
        deciding = list(dict.fromkeys(rows["measure"]))
        measure = deciding[0] if len(deciding) == 1 else "mixed"
        arms = [a for a in run.measured_arms if a != run.baseline and (rows["arm"] == a).any()]
        along = [_along(rows, arm, mine) for arm in arms]
        out.append(Sweep(workload, measure, along, _family(rows, 1 - run.confidence)))
    return out


def _family(rows: pd.DataFrame, alpha: float) -> str:
    """The family the verdicts were read in; none where no comparison could reach one (LOW_N)."""
    decidable = rows[rows["launches"] >= MIN_LAUNCHES]
    if decidable.empty:
        return f"no verdict at any level: fewer than {MIN_LAUNCHES} launch pairs"
    n = int(decidable["family"].max())
    many = "one comparison" if n == 1 else f"one family of {n} comparisons"
    return f"{many}: ≤ {alpha * 100:.3g} % chance of any false verdict among them"


def _along(rows: pd.DataFrame, arm: str, mine: list[Point]) -> ArmAlong:
    own = {str(r["point"]): str(r["verdict"]) for r in rows[rows["arm"] == arm].to_dict("records")}
    levels = [(p.label, own[p.name]) for p in mine if p.name in own]
    named = any(p.level is None or p.level.kind == "phase" for p in mine)
    return ArmAlong(arm, levels, None if named else _crossover(levels), named)
