"""``analyse``: everything a report shows, computed once from a loaded run.

:class:`Analysis` is what every output renders — the console summary, report.md, report.html,
findings.json, summary.csv and the plots — so each format shows the same numbers and none of
them computes a statistic or a check of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from specbench.analysis import stats
from specbench.analysis.answer import Answer, answer
from specbench.analysis.decision import Decision, decision_table, nameable, with_findings
from specbench.analysis.findings.judge import judge
from specbench.analysis.findings.model import Finding, at_point
from specbench.analysis.points import Point
from specbench.analysis.predicted.arms import RunTheory, theory_or_reason
from specbench.analysis.rundata import (
    RunData,
    arm_summary,
    comparisons,
    detail_frame,
    for_point,
    load_run,
    workload_names,
)
from specbench.analysis.tables import crossover, frames, measures, sweeps
from specbench.analysis.tables.goodput import Goodput, goodput_tables

NO_DIR = "the run was analysed without its run directory (model and device unknown)"


@dataclass(frozen=True)
class Analysis:
    """One run's conclusions and the numbers behind them (frames hold numbers, not display text).

    ``categories`` covers the whole run when it has one operating point; with several (workloads,
    or a sweep's levels), each point's own is in ``workload_categories``, keyed by point name (a
    category mix differs between them). ``summary`` has one row per arm, and per point where the
    run sweeps (``point`` names it); ``comparisons`` is empty then — a number pooled over a sweep's
    levels is never the answer — and ``operating_points`` holds every (arm, point, measure)
    comparison. ``machines`` is None unless the run was merged from two or more machines.
    ``theory`` is the prediction, or the one-line reason there is none."""

    run: RunData
    run_dir: Path | None
    findings: list[Finding]
    decisions: list[Decision]
    summary: pd.DataFrame
    comparisons: dict[str, stats.Comparison]
    by_workload: pd.DataFrame
    workloads: list[str]
    crossovers: pd.DataFrame
    winners: pd.DataFrame
    crossover_lengths: dict[str, float | None]
    length_model: dict[str, tuple[float, float]]
    categories: frames.Categories
    workload_categories: dict[str, frames.Categories]
    acceptance: pd.DataFrame
    positions: pd.DataFrame
    equivalence: pd.DataFrame
    divergences: pd.DataFrame
    machines: pd.DataFrame | None
    detail: pd.DataFrame
    decode_cis: dict[tuple[str, str], dict[str, frames.MedianCI]]
    prompts: pd.DataFrame
    goodput: Goodput
    theory: RunTheory | str = field(default=NO_DIR)
    answers: list[Answer] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    operating_points: pd.DataFrame = field(default_factory=pd.DataFrame)
    sweeps: list[sweeps.Sweep] = field(default_factory=list)


def analyse(run: RunData, run_dir: Path | None = None) -> Analysis:
    """Every finding, decision and table of ``run``; ``run_dir`` (where it was loaded from) lets
    the theory read the model and the device."""
    found = judge(run)
    names = [p.name for p in run.points]
    detail = detail_frame(run)
    several = len(names) > 1
    equivalence = frames.equivalence_frame(run)
    decisions = decision_table(run, found=found)
    cats = frames.Categories(pd.DataFrame(), pd.DataFrame(columns=frames.SPEEDUP_COLUMNS), [])
    cats = cats if several else frames.categories(run)
    per_point = {p: frames.categories(for_point(run, p)) for p in names} if several else {}
    table = sweeps.comparison_frame(run)
    return Analysis(
        run=run,
        run_dir=run_dir,
        findings=found,
        decisions=decisions,
        summary=with_findings(_summary(run), found, run.baseline),
        comparisons={} if run.sweeps else comparisons(run),
        by_workload=with_findings(frames.summary_frame(run), found, run.baseline),
        workloads=workload_names(run) if run.sweeps else names,
        crossovers=crossover.crossover_frame(run),
        winners=crossover.winners_frame(run),
        crossover_lengths=_lengths(run, detail),
        length_model=_length_model(run, detail),
        categories=cats,
        workload_categories=per_point,
        acceptance=frames.acceptance_frame(run),
        positions=frames.position_frame(run),
        equivalence=equivalence,
        divergences=pd.DataFrame() if equivalence.empty else frames.divergence_examples(run),
        machines=frames.machine_frame(detail, run.baseline, run.measured_arms) if _merged(detail) else None,
        detail=detail,
        decode_cis=frames.decode_cis(detail, run.measured_arms),
        prompts=frames.rendered_prompts(run),
        goodput=goodput_tables(run),
        theory=_theory(run, run_dir),
        answers=_answers(run, decisions, cats, per_point, found),
        points=run.points,
        operating_points=table,
        sweeps=sweeps.sweeps(run, table),
    )


def _summary(run: RunData) -> pd.DataFrame:
    """One row per arm; where the run sweeps, per arm at each point (never pooled over levels)."""
    if not run.sweeps:
        # One point: named. Several workloads without a sweep: the rows pool them, as before, so
        # they name no point.
        return arm_summary(run).assign(point=run.points[0].name if len(run.points) == 1 else "")
    parts = [arm_summary(for_point(run, p.name)).assign(point=p.name) for p in run.points]
    return pd.concat(parts, ignore_index=True)


def _answers(
    run: RunData,
    decisions: list[Decision],
    cats: frames.Categories,
    per_workload: dict[str, frames.Categories],
    found: list[Finding],
) -> list[Answer]:
    """Each operating point's answer, naming only arms the decision may name: one that an error
    finding excludes (CONFOUND, SILENT_FALLBACK, ...) or that does not speculate is never "the
    best"; beside it, the arm's other measures at that point."""
    out = []
    for d in decisions:
        cmps = measures.comparisons(run, d.measure).get(d.workload, {})
        beside = {
            m: measures.comparisons(run, m).get(d.workload, {}) for m in measures.SHOWN if m != d.measure
        }
        speedups = per_workload.get(d.workload, cats).speedups
        here = at_point(found, d.workload)
        out.append(answer(d, nameable(run, cmps, here), speedups, run.baseline, beside))
    return out


def analyse_dir(run_dir: Path) -> Analysis:
    """:func:`analyse` of the run directory ``run_dir``; StoreError if it is not one."""
    return analyse(load_run(run_dir), run_dir)


def _merged(detail: pd.DataFrame) -> bool:
    return bool(detail["machine"].nunique() >= 2)


def _lengths(run: RunData, detail: pd.DataFrame) -> dict[str, float | None]:
    """L* per arm over the whole run, for the speedup-vs-length plot: only with a length sweep."""
    if detail["max_tokens"].dropna().nunique() < 2:
        return {}
    return crossover.crossovers(run)


def _theory(run: RunData, run_dir: Path | None) -> RunTheory | str:
    """The prediction, or why there is none: a theory bug must not take the analysis down."""
    if run_dir is None:
        return NO_DIR
    try:
        return theory_or_reason(run_dir, run)
    except Exception as err:
        return f"the theory section failed ({type(err).__name__}: {err})"


def _length_model(run: RunData, detail: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Arm → (median prefill ms, median decode tok/s) over the whole run: the prefill + L/r curve
    the speedup-vs-length plot draws; only with a length sweep."""
    if detail["max_tokens"].dropna().nunique() < 2:
        return {}
    return {arm: crossover.arm_medians(detail, arm) for arm in run.measured_arms}
