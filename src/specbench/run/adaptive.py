"""Adaptive repeats (``repeats: auto``): launches continue only for arms still undetermined.

After every launch pair from the third on, each arm still running is compared with the baseline
(decode tok/s, the launch-level mixed model of :mod:`specbench.analysis.launches`) at a *nominal*
confidence 1 − α′ chosen so that looking after every launch keeps the chance of any false
faster/slower verdict at α = 5 % overall: a Pocock-type group-sequential boundary (the same α′ at
every look), calibrated by simulating the t statistics of i.i.d. normal launch means under no
effect for exactly the looks this run can make (3 … max_repeats); α is the matrix's ``alpha``
(default 0.05). An arm stops when its verdict is
faster, slower or equivalent, or when the budget (max_repeats, max_minutes) runs out; the baseline
runs in every launch pair any arm still needs, in the run's counterbalanced order
(:mod:`specbench.run.order`). Looks run between rounds, when no server is up: nothing of the
analysis overlaps a measured cell. Decisions go to the
manifest (``adaptive``), so ``--resume`` skips arms already decided and continues the rest.

With several arms, each look reads the verdicts exactly as the report will: every non-baseline
arm vs the baseline, one Holm family at α′ (:mod:`specbench.analysis.multiplicity`), from the same
frame (:func:`specbench.analysis.launchorder.ordered_frame`). An arm stops only on its
Holm-adjusted verdict, so a verdict the console announces is the one the report prints: an
arm's comparison is frozen once it stops (no launch of its own is added), and Holm's decisions
only grow as the other arms' evidence does (Holm's adjusted p-values are monotone in every
comparison's own).

This module wraps an executor; the runner is untouched.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from specbench.analysis import launchorder, multiplicity, points, stats
from specbench.analysis.launches import MIN_LAUNCHES
from specbench.analysis.sequential import nominal_alpha
from specbench.executors.local import LocalExecutor
from specbench.matrix.config import Cell

if TYPE_CHECKING:
    from specbench.executors.base import CellJob, Executor

METRIC = "decode_tok_s"
RULE = (
    "Pocock group-sequential boundary: after each launch pair from the third on, verdict at nominal "
    "confidence 1 − α′, α′ calibrated (20 000 simulated A/A sequences of t statistics) so that the "
    "chance of any false faster/slower over all looks is α (the matrix's alpha, default 0.05)"
)


@dataclass
class AdaptiveExecutor:
    """Runs the planned cells launch pair by launch pair through ``inner`` (local, Ray), dropping
    arms whose verdict is settled."""

    inner: Executor | None = None
    kind: str = "adaptive"

    def run_cells(self, cells: Sequence[Cell], runner: CellJob) -> None:
        inner = self.inner or LocalExecutor()
        m = runner.matrix
        state = self._state(runner)
        started, spent = time.monotonic(), float(state.get("minutes", 0.0))
        repeats = sorted({c.repeat for c in cells})
        for repeat in repeats:
            stopped = state["arms"]
            active = [a for a in m.arms if a != m.baseline and a not in stopped]
            if not active:
                break
            minutes = spent + (time.monotonic() - started) / 60
            if m.max_minutes is not None and minutes >= m.max_minutes:
                for arm in active:
                    self._stop(runner, state, arm, repeat, "budget", f"max_minutes {m.max_minutes:g} reached")
                break
            todo = [c for c in cells if c.repeat == repeat and (c.arm in active or c.arm == m.baseline)]
            inner.run_cells(todo, runner)
            state["minutes"] = spent + (time.monotonic() - started) / 60
            self._look(runner, state, active, repeat + 1, last=repeat == repeats[-1])
        runner.store.update_manifest(adaptive=state)

    def _state(self, runner: CellJob) -> dict[str, Any]:
        """The manifest's adaptive record (kept across --resume), with this run's rule."""
        state: dict[str, Any] = dict(runner.store.manifest().get("adaptive") or {})
        state.update(
            rule=RULE,
            alpha=runner.matrix.alpha,
            nominal_alpha=nominal_alpha(runner.matrix.repeats, runner.matrix.alpha),
            max_repeats=runner.matrix.repeats,
            max_minutes=runner.matrix.max_minutes,
            metric=METRIC,
        )
        state.setdefault("arms", {})
        runner.store.update_manifest(adaptive=state)
        return state

    def _look(self, runner: CellJob, state: dict[str, Any], active: list[str], n: int, last: bool) -> None:
        """After launch pair ``n``: stop every arm whose verdict is settled (or whose budget ended)."""
        if n < MIN_LAUNCHES:
            return
        base = runner.matrix.baseline
        found = verdicts(observed(runner), runner.matrix.arms, base, state["nominal_alpha"])
        for arm in active:
            if runner.arm_failed(arm) or runner.arm_failed(base):
                self._stop(runner, state, arm, n, "failed", "the arm or the baseline failed")
                continue
            c = found[arm]
            if c.verdict != "undetermined":
                self._stop(runner, state, arm, n, c.verdict, _evidence(c), c)
            elif last:
                self._stop(runner, state, arm, n, "budget", f"max_repeats {n} reached: {_evidence(c)}", c)

    def _stop(
        self,
        runner: CellJob,
        state: dict[str, Any],
        arm: str,
        n: int,
        why: str,
        evidence: str,
        c: stats.Comparison | None = None,
    ) -> None:
        verdict = c.verdict if c is not None else "undetermined"
        state["arms"][arm] = {"launches": n, "stopped": why, "verdict": verdict, "evidence": evidence}
        runner.store.update_manifest(adaptive=state)
        runner.observe(
            "decided", {"arm": arm, "launches": n, "verdict": verdict, "why": why, "evidence": evidence}
        )


def observed(runner: CellJob) -> pd.DataFrame:
    """The run's requests so far, as the report reads them (with each launch's place in its round)."""
    store = runner.store
    return launchorder.ordered_frame(store.records(), store.manifest(), store.cells())


def verdicts(
    df: pd.DataFrame, arms: Iterable[str], baseline: str, alpha: float
) -> dict[str, stats.Comparison]:
    """Every non-baseline arm vs ``baseline`` on :data:`METRIC`, one family at ``alpha`` (Holm,
    with the categories when the run has several: :func:`specbench.analysis.multiplicity.judge`):
    the report's reading (:func:`specbench.analysis.rundata.comparisons` at confidence 1 − α′).
    Arms without data are in it too, but undecidable, so they do not widen anyone's interval.
    A sweep is judged level by level, as the report does (issue 40): an arm is decided only once
    it is at every level, so its comparison here is its first undecided level's, else its last."""
    arms = list(arms)
    if df.empty:
        return multiplicity.judge(df, arms, baseline, METRIC, alpha)[0]
    df = points.with_points(df, list(dict.fromkeys(df["workload"].astype(str))))
    if df[points.POINT].nunique() <= 1:
        return multiplicity.judge(df, arms, baseline, METRIC, alpha)[0]
    judged = multiplicity.judge_points(df, arms, baseline, METRIC, alpha, points.POINT)[0]
    out: dict[str, stats.Comparison] = {}
    for (arm, _), c in judged.items():
        if out.get(arm) is None or out[arm].verdict != "undetermined":
            out[arm] = c
    # An arm with no data yet has no level to judge: LOW_N, as judge() would say.
    empty = df.iloc[:0]
    return {a: out.get(a) or stats.speedup(empty, a, baseline, METRIC) for a in arms if a != baseline}


def _evidence(c: stats.Comparison) -> str:
    return f"×{c.ratio:.3f} ({stats.ci_label(c)} CI {c.ci_low:.3f}–{c.ci_high:.3f}), {stats.verdict_text(c)}"


class _AdaptiveLocal(AdaptiveExecutor, LocalExecutor):
    """Adaptive over the local executor: still a LocalExecutor to the runner, which probes this
    machine for the theory only when cells are served here."""


def executor_for(adaptive: bool, inner: Executor | None) -> Executor | None:
    """``inner`` wrapped for a ``repeats: auto`` matrix, else unchanged."""
    if not adaptive:
        return inner
    return (
        _AdaptiveLocal(inner)
        if inner is None or isinstance(inner, LocalExecutor)
        else AdaptiveExecutor(inner)
    )
