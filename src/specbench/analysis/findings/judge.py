"""Every finding about a run, most serious first: what a reader must know before trusting a number.

:data:`FAMILIES` is the one list of checks. Each family runs once per run, per arm or per
operating point; consecutive families of one scope run together (per arm: every check of one
arm before the next arm), so the findings keep the order reports have always shown, and the
final sort by severity is stable.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import groupby

from specbench.analysis.findings import (
    acceptance,
    bimodal,
    busy,
    client,
    confound,
    measurement,
    outputs,
    speculation,
    stability,
    stalls,
    verdict,
    verifystep,
)
from specbench.analysis.findings.family import AnyFamily, ArmFamily, PointFamily, RunFamily
from specbench.analysis.findings.gather import RunEvidence, gather, points
from specbench.analysis.findings.model import Finding, by_severity
from specbench.analysis.rundata import RunData

FAMILIES: tuple[AnyFamily, ...] = (
    speculation.FAMILY,  # per arm configured to speculate: did it, and is its acceptance real
    acceptance.FAMILY,
    confound.FAMILY,  # the run: arms against the baseline, then what the records say
    outputs.FAMILY,
    measurement.FAMILY,
    busy.FAMILY,
    verifystep.FAMILY,
    client.FAMILY,
    stability.FAMILY,  # per operating point: the statistics, a sweep's levels never pooled
    stalls.FAMILY,
    bimodal.FAMILY,
    verdict.FAMILY,
)


def judge(run: RunData) -> list[Finding]:
    """Every finding, most serious first: what a reader must know before trusting a number."""
    ev = gather(run)
    out: list[Finding] = []
    for _, block in groupby(FAMILIES, key=type):
        out += _run(ev, list(block))
    return by_severity(out)


def _run(ev: RunEvidence, block: list[AnyFamily]) -> list[Finding]:
    """One block of consecutive families of one scope (``groupby`` by type: one type a block)."""
    run_checks = [f.check for f in block if isinstance(f, RunFamily)]
    arm_checks = [f.check for f in block if isinstance(f, ArmFamily)]
    point_checks = [f.check for f in block if isinstance(f, PointFamily)]
    if arm_checks:
        return [f for arm in ev.run.arms for c in arm_checks for f in c(ev, arm)]
    if point_checks:
        return [_at(f, p.name) for p in points(ev) for c in point_checks for f in c(p)]
    return [f for c in run_checks for f in c(ev)]


def _at(f: Finding, point: str) -> Finding:
    """``f`` computed at ``point`` where the run sweeps: its evidence says where (once)."""
    if not point:
        return f
    evidence = f.evidence if point in f.evidence else f"at {point}: {f.evidence}"
    return replace(f, evidence=evidence, point=point)
