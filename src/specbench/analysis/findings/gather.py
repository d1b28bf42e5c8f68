"""The evidence the checks share, gathered once: per run, then per operating point.

Each check reads the run through these, so what several of them ask (an arm's acceptance
sources, which clients fell behind, which arms speculate, the comparisons at a point) is computed
once and is the same answer for all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from specbench.analysis.evidence import lag
from specbench.analysis.evidence.acceptance import Source
from specbench.analysis.rundata import RunData, acceptance_sources, comparisons, for_point
from specbench.analysis.stats import Comparison


@dataclass(frozen=True)
class RunEvidence:
    """The whole run. ``patterns``: the engine's log lines that say speculation failed;
    ``client_behind``: the arms whose client's event loop fell behind (CLIENT_BEHIND)."""

    run: RunData
    patterns: tuple[str, ...]
    client_behind: frozenset[str]

    def sources(self, arm: str) -> dict[str, Source]:
        """The arm's acceptance from every source, as the tables show it (computed once per run)."""
        return acceptance_sources(self.run, arm)


@dataclass(frozen=True)
class PointEvidence:
    """One operating point (the whole run where it does not sweep): the run's requests there,
    the arms configured or declared to speculate (only their silent servers may draft), and
    each measured arm's comparison with the baseline there."""

    run: RunData
    name: str  # "" where the run does not sweep
    client_behind: frozenset[str]
    speculating: frozenset[str]
    comparisons: dict[str, Comparison]


def gather(run: RunData) -> RunEvidence:
    return RunEvidence(run, tuple(run.engine.fallback_patterns()), lag.behind(run.cells, run.df))


def points(ev: RunEvidence) -> Iterator[PointEvidence]:
    """Each operating point's evidence where the run sweeps, else the run's as one (issue 40: the
    requests of one level finish together, so pooled levels read as DRIFT and as two modes);
    nothing where the run measured nothing."""
    run = ev.run
    if run.df.empty:
        return
    if not run.sweeps:
        yield _point(run, "", ev.client_behind)
        return
    for p in run.points:
        yield _point(for_point(run, p.name), p.name, ev.client_behind)


def _point(run: RunData, name: str, behind: frozenset[str]) -> PointEvidence:
    speculating = frozenset(a for a in run.arms if run.speculates(a))
    return PointEvidence(run, name, behind, speculating, comparisons(run))
