"""The machine is part of the evidence: load, CPUs, steal and the engine's threads per cell.

A baseline whose decode rate has two modes on a box with load 8–13 on 2 cores is the machine,
not the workload. Each cell records what the box looked like at its start and end
(``cells.jsonl`` ``machine_load``); :mod:`specbench.analysis.busy` turns a busy cell into a finding.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil


def _load() -> float:
    try:
        return float(os.getloadavg()[0])
    except OSError:  # not offered on this platform
        return float("nan")


def _steal() -> tuple[float, float] | None:
    """(steal seconds, total seconds) of all CPUs; None where the kernel does not report steal."""
    times = psutil.cpu_times()
    steal = getattr(times, "steal", None)
    return (float(steal), float(sum(times))) if steal is not None else None


@dataclass
class MachineLoad:
    """Started before a cell's requests, finished after them."""

    load_start: float = field(default_factory=_load)
    steal_start: tuple[float, float] | None = field(default_factory=_steal)

    def finish(self, pid: int | None, threads_arg: str | None) -> dict[str, Any]:
        end = _steal()
        steal = None
        if self.steal_start and end and end[1] > self.steal_start[1]:
            steal = (end[0] - self.steal_start[0]) / (end[1] - self.steal_start[1])
        return {
            "cpus": os.cpu_count(),
            "physical_cpus": psutil.cpu_count(logical=False),
            "load_start": self.load_start,
            "load_end": _load(),
            "steal_share": steal,
            "engine_threads": threads_arg or "engine default",
            "engine_os_threads": _os_threads(pid),
        }


def _os_threads(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        return int(psutil.Process(pid).num_threads())
    except (psutil.Error, OSError):
        return None


def threads_arg(args: Sequence[str]) -> str | None:
    """The thread count an arm's flags give the engine (llama.cpp ``-t`` / ``--threads``)."""
    for i, arg in enumerate(args[:-1]):
        if arg in ("-t", "--threads"):
            return args[i + 1]
    return None
