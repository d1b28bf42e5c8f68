"""The measures serving is judged by, each a paired comparison per operating point (issue 40).

Users of llama.cpp, vLLM and SGLang report speculation per operating point and by what serving
is judged by — "+24 % throughput and −56 % TTFT at 16 concurrent" — not by one per-request decode
rate. Each measure here is one small unit: its formula, unit and direction.

* ``decode`` is per request (the paired, launch-level mixed model of :mod:`launches`, with the
  request-level ``e2e`` as its guard, as before);
* the others are one value per launch and point — throughput (the point's output tokens over its
  wall time, first send to last end), TTFT and e2e at p50 and p99, goodput (requests/s meeting
  every SLO, :mod:`goodput`) — and compare as one log-ratio per launch pair: the launch pair is the
  unit of replication, so fewer than three pairs give no verdict (LOW_N), never a guess.

A sweep's arms at every point form one Holm family per measure (as the decode family does), so no
measure's verdicts at a sweep's levels claim more than α between them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis import multiplicity, points, stats
from specbench.analysis.launches import POSITION
from specbench.analysis.rundata import ByPoint, RunData, point_comparisons
from specbench.analysis.tables.goodput import launch_goodput, slo_of
from specbench.matrix.config import SLOSpec
from specbench.workloads.suites import SUITES


@dataclass(frozen=True)
class Measure:
    """One measure: ``column`` in the request frame (per request) or the launch table (per
    launch), its direction and unit, and the formula a report prints."""

    name: str
    column: str
    label: str
    unit: str
    higher_is_better: bool
    per_launch: bool
    formula: str


MEASURES: dict[str, Measure] = {
    m.name: m
    for m in (
        Measure("decode", "decode_tok_s", "decode", "tok/s", True, False,
                "per-request decode rate, paired by prompt inside launch pairs"),
        Measure("throughput", "throughput_tok_s", "throughput", "tok/s", True, True,
                "output tokens of the point's completed requests / its wall time (first send to "
                "last end), per launch"),
        Measure("ttft_p50", "ttft_p50_ms", "TTFT p50", "ms", False, True,
                "median TTFT of the point's requests, per launch"),
        Measure("ttft_p99", "ttft_p99_ms", "TTFT p99", "ms", False, True, "99th-percentile TTFT, per launch"),
        Measure("e2e_p50", "e2e_p50_ms", "e2e p50", "ms", False, True, "median send-to-end time, per launch"),
        Measure("e2e_p99", "e2e_p99_ms", "e2e p99", "ms", False, True,
                "99th-percentile send-to-end time, per launch"),
        Measure("goodput", "goodput_req_s", "goodput", "req/s", True, True,
                "requests/s meeting every SLO over the point's wall time, per launch"),
        Measure("e2e", "e2e_ms", "wall clock", "ms", False, False,
                "per-request send-to-end time, paired by prompt"),
    )
}  # fmt: skip

#: What a measure that decides is guarded by: an arm it calls faster is not recommended where its
#: guard is significantly worse (decode's wall-clock guard, throughput's tail TTFT).
GUARDS: dict[str, str | None] = {
    "decode": "e2e",
    "throughput": "ttft_p99",
    "goodput": None,
    "ttft_p50": None,
    "ttft_p99": None,
    "e2e_p50": None,
    "e2e_p99": None,
}
#: Shown beside the deciding measure in every answer.
SHOWN = ("throughput", "ttft_p50", "ttft_p99", "e2e_p50", "e2e_p99", "decode")
LAUNCH_COLUMNS = ["arm", "workload", points.POINT, "repeat", POSITION, "requests", "throughput_tok_s",
                  "ttft_p50_ms", "ttft_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "goodput_req_s"]  # fmt: skip


def verdict_word(verdict: str, measure: str) -> str:
    """The verdict as said of ``measure``: decode is "faster" or "slower", any other measure (a
    throughput, a latency) "better" or "worse" — a ×1.2 TTFT reads "better", not "faster"."""
    word = verdict.split(" (", 1)[0]
    if measure == "decode":
        return verdict
    return {"faster": "better", "slower": "worse"}.get(word, word)


def launch_table(run: RunData) -> pd.DataFrame:
    """One row per (arm, point, launch): the per-launch measures of :data:`MEASURES`."""
    key = ("launch_table", "")
    if key in run._fits:
        return run._fits[key]  # type: ignore[no-any-return]
    # Throughput is goodput without SLOs: every completed request's tokens over the point's wall
    # time (first send to last end), one value per launch (analysis/tables/goodput.py).
    throughput = _per_launch(run, "goodput_tok_s", None)
    good = _per_launch(run, "goodput_req_s", slo_of(run.manifest))
    rows = []
    for (arm, point, repeat), sub in run.df.groupby(["arm", points.POINT, "repeat"], sort=False):
        key3 = (str(arm), str(point), int(str(repeat)))
        ttft, e2e = sub["ttft_ms"].to_numpy(np.float64), sub["e2e_ms"].to_numpy(np.float64)
        rows.append({
            "arm": arm, "workload": sub["workload"].iloc[0], points.POINT: point, "repeat": repeat,
            POSITION: sub[POSITION].iloc[0] if POSITION in sub else math.nan, "requests": len(sub),
            "throughput_tok_s": throughput.get(key3, math.nan),
            "ttft_p50_ms": _pct(ttft, 50), "ttft_p99_ms": _pct(ttft, 99),
            "e2e_p50_ms": _pct(e2e, 50), "e2e_p99_ms": _pct(e2e, 99),
            "goodput_req_s": good.get(key3, math.nan),
        })  # fmt: skip
    run._fits[key] = pd.DataFrame(rows, columns=LAUNCH_COLUMNS)
    return run._fits[key]  # type: ignore[no-any-return]


def _pct(values: np.ndarray[Any, Any], q: float) -> float:
    finite = values[np.isfinite(values)]
    return float(np.percentile(finite, q)) if finite.size else math.nan


def _per_launch(run: RunData, column: str, slo: SLOSpec | None) -> dict[tuple[str, str, int], float]:
    """(arm, point, repeat) → ``column`` of :func:`~specbench.analysis.tables.goodput.launch_goodput`
    against ``slo`` (None: every completed request counts)."""
    table = launch_goodput(run.records, slo)
    where = {(p.workload, ph): p.name for p in run.points for ph in p.phases}
    out = {}
    for row in table.to_dict("records"):
        point = where.get((str(row["workload"]), str(row["phase"])))
        if point is not None:
            out[(str(row["arm"]), point, int(row["repeat"]))] = float(row[column])
    return out


def comparisons(run: RunData, measure: str) -> ByPoint:
    """Point → arm → the arm's comparison with the baseline on ``measure`` at that point; a
    sweep's points are one family per measure (Holm), a workload without a sweep its own."""
    m = MEASURES[measure]
    if not m.per_launch:
        return point_comparisons(run, m.column)
    key = ("measure", measure)
    if key not in run._fits:
        run._fits[key] = _launch_families(run, m)
    return {p: dict(c) for p, c in run._fits[key].items()}


def _launch_families(run: RunData, m: Measure) -> ByPoint:
    table = launch_table(run).assign(prompt_id="launch")
    out: ByPoint = {p.name: {} for p in run.points}
    if run.baseline not in run.measured_arms:
        return out
    alpha = 1 - run.confidence
    for workload in dict.fromkeys(p.workload for p in run.points):
        sub = table[table["workload"] == workload]
        keys = [
            (str(a), str(p))
            for p, g in sub.groupby(points.POINT, sort=False)
            for a in run.measured_arms
            if a != run.baseline and (g["arm"] == a).any()
        ]
        by_point = {str(p): g for p, g in sub.groupby(points.POINT, sort=False)}

        for (arm, point), c in multiplicity.holm(keys, _fitter(by_point, run.baseline, m), alpha).items():
            out[point][arm] = c
    return out


def _fitter(
    by_point: dict[str, pd.DataFrame], baseline: str, m: Measure
) -> Callable[[tuple[str, str], float], stats.Comparison]:
    """The launch-level comparison of (arm, point) at a confidence level, for Holm."""

    def fit(key: tuple[str, str], level: float) -> stats.Comparison:
        frame, hib = by_point[key[1]], m.higher_is_better
        return stats.speedup(frame, key[0], baseline, m.column, higher_is_better=hib, confidence=level)

    return fit


def objective_of(run: RunData, workload: str, point: points.Point | None = None) -> str:
    """The measure that decides ``workload``'s answer (at ``point``): the matrix's ``objective``
    for it, else its suite's default (batch-1 suites decode, concurrent ones throughput, rate
    sweeps goodput); a phase named after a suite (the scenarios suite's) takes that suite's."""
    spec = _workload_spec(run, workload)
    chosen = spec.get("objective")
    if chosen:
        return str(chosen)
    named = point.level.label if point is not None and point.level is not None else ""
    suite = SUITES.get(named) or SUITES.get(str(spec.get("suite") or ""))
    return suite.objective if suite is not None else "decode"


def _workload_spec(run: RunData, workload: str) -> dict[str, Any]:
    matrix = run.manifest.get("matrix") or {}
    specs = list(matrix.get("workloads") or []) or [matrix.get("workload") or {}]
    for spec in specs:
        if str(spec.get("name") or spec.get("suite")) == workload or len(specs) == 1:
            return dict(spec)
    return {}
