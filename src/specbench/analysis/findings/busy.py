"""BUSY_MACHINE: a cell that ran on an oversubscribed or stolen-from box.

Each cell records what the box looked like at its start and end (``cells.jsonl``
``machine_load``, written by :mod:`specbench.run.machineload`); a busy cell's timings measure the box
as much as the arm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from specbench.analysis.findings.family import RunFamily
from specbench.analysis.findings.gather import RunEvidence
from specbench.analysis.findings.model import Finding, Severity


class Code(StrEnum):
    BUSY_MACHINE = "BUSY_MACHINE"


SEVERITY = {Code.BUSY_MACHINE: Severity.WARNING}
ANCHOR = "busy-machine"

BUSY_FACTOR = 1.5  # 1-minute load above this many times the logical CPUs: the box was oversubscribed
STEAL_LIMIT = 0.10  # a hypervisor took at least this share of CPU time during the cell


def busy_reason(machine: Mapping[str, Any]) -> str | None:
    """Why one cell ran on a busy box, or None."""
    cpus = machine.get("cpus") or 0
    loads = [v for v in (machine.get("load_start"), machine.get("load_end")) if isinstance(v, float | int)]
    load = max(loads, default=0.0)
    steal = machine.get("steal_share")
    if cpus and load > BUSY_FACTOR * cpus:
        return f"load average {load:.1f} on {cpus} CPUs"
    if isinstance(steal, float | int) and steal >= STEAL_LIMIT:
        return f"{steal:.0%} of CPU time stolen by the hypervisor"
    return None


def busy_cells(cells: Sequence[Mapping[str, Any]], arm: str) -> list[str]:
    return [r for c in cells if c.get("arm") == arm and (r := busy_reason(c.get("machine_load") or {}))]


def check(ev: RunEvidence) -> list[Finding]:
    return busy_findings(ev.run.cells, ev.run.measured_arms)


def busy_findings(cells: Sequence[Mapping[str, Any]], arms: Sequence[str]) -> list[Finding]:
    """BUSY_MACHINE per arm that had a cell on an oversubscribed or stolen-from box."""
    out = []
    for arm in arms:
        reasons = busy_cells(cells, arm)
        total = sum(1 for c in cells if c.get("arm") == arm and c.get("machine_load"))
        if reasons:
            out.append(
                Finding(
                    Code.BUSY_MACHINE,
                    (arm,),
                    f"{arm}: the machine was busy during {len(reasons)} of {total} cells ({reasons[0]}); "
                    "other work competed for the cores, so its timings measure the box as much as the arm.",
                )
            )
    return out


FAMILY = RunFamily(Code, SEVERITY, ANCHOR, check)
