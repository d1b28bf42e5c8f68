"""The machine is part of the evidence: load, CPUs, steal and the engine's threads per cell.

A baseline whose decode rate has two modes on a box with load 8–13 on 2 cores is the machine,
not the workload. Each cell records what the box looked like at its start and end
(``cells.jsonl`` ``machine_load``); :mod:`specbench.analysis.busy` turns a busy cell into a finding.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

CPU_SAMPLE_S = 0.5  # long enough to see a steady job, short beside the plan's own probes


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


def cpu_room(sample_s: float = CPU_SAMPLE_S) -> tuple[int, float]:
    """(cores this process may run on, how many of them other work keeps busy now): the affinity
    mask, not the machine's count (a container's cpuset), and those cores' use over ``sample_s``
    seconds while specbench itself waits. Not the 1-minute load average: it lags a minute behind
    a job that starts or ends, and still counts the engine of a run that has just finished."""
    percent = psutil.cpu_percent(interval=sample_s, percpu=True)
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every CPU is ours
    allowed = affinity(0) if affinity is not None else range(len(percent))
    mine = [p for i, p in enumerate(percent) if i in allowed] or percent
    return len(mine), sum(mine) / 100


def threads_warning(flag: str, threads: int, cores: int, busy: float) -> str | None:
    """A warning when ``threads`` engine threads find fewer cores free of other work.
    llama.cpp's threads meet at a barrier after every operation, so one thread waiting for a core
    stalls all of them: on 2 cores a 52 MB lab model decoded 520 tok/s at -t 2 and 101 at -t 4,
    and with one core kept busy 271 at -t 1 and 90 at -t 2 (half a core busy: -t 2 still won,
    395 to 325). Free cores are rounded half up: "about N free"."""
    room = max(1, math.floor(cores - busy + 0.5))
    if threads <= room:
        return None
    return (
        f"{flag} {threads} asks for {threads} threads; this machine has {cores} cores, about "
        f"{busy:.1f} busy: decode may be several times slower; use {flag} {room}"
    )


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
