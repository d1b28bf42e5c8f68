"""An estimate says how busy it assumes the machine is (issue 44: "≈ 1:26–1:51" for a run that
took 23:12 on a loaded machine).

The plan's rates are a quiet machine's (the model-size basis) or an earlier run's, made at that
run's load. Both are scaled by the load measured now, as processor sharing: ``threads`` engine
threads beside other work keeping ``busy`` of ``cores`` cores busy get ``cores / (busy + threads)``
of the cores they ask for once they outnumber them, so the time scales by ``(busy + threads) /
cores`` (at least 1). An earlier run's own factor comes from the 1-minute load its cells recorded
(``machine_load``), which counted its engine's threads as well. It is a floor, not a forecast:
llama.cpp's threads wait for each other after every operation, so a thread without a core can cost
more than its share (docs/faults.md: 5× at ``-t 2`` with one of two cores busy); the run says so
after its first launch when the pace is off by more than 2× (:mod:`specbench.run.pace`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from specbench.matrix.config import Matrix
from specbench.run.machineload import threads_arg

UNSCALED = 0.05  # a factor within 5 % of 1 is left alone: the sample is no finer than that


@dataclass(frozen=True)
class LoadScale:
    """The factor an estimate is multiplied by and the sentence that says why."""

    factor: float
    text: str


def engine_threads(matrix: Matrix, cores: int) -> int:
    """The most engine threads an arm asks for (``-t``); llama.cpp's default takes every core."""
    asked = []
    for arm in matrix.arms:
        value = threads_arg(matrix.arm_args(arm))
        try:
            asked.append(int(value) if value is not None and int(value) > 0 else cores)
        except ValueError:  # not a number: the launch fails on it anyway
            asked.append(cores)
    return max(asked, default=cores)


def share_factor(busy: float, threads: float, cores: int) -> float:
    """Processor sharing: how much longer ``threads`` busy threads take beside ``busy`` cores of
    other work than on a quiet machine (1: they all find a core)."""
    return max(1.0, (busy + threads) / max(cores, 1))


def load_then(run: Path) -> tuple[float, int] | None:
    """(mean 1-minute load, CPUs) over the cells of an earlier run (start and end of each); None
    where its cells recorded none (older runs, unreadable files: the estimate is a courtesy)."""
    loads, cpus = [], 0
    try:
        lines = (run / "cells.jsonl").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        try:
            load = json.loads(line).get("machine_load") or {}
            values = [float(load[k]) for k in ("load_start", "load_end") if load.get(k) is not None]
            cpus = int(load.get("cpus") or cpus)
        except (ValueError, TypeError, AttributeError):
            continue
        loads += [v for v in values if math.isfinite(v)]
    return (sum(loads) / len(loads), cpus) if loads and cpus else None


def load_scale(
    room: tuple[int, float], threads: int, basis: str | None = None, then: tuple[float, int] | None = None
) -> LoadScale:
    """The factor for the load now (``room``: cores, busy cores) against the basis's: the earlier
    run ``basis`` at its recorded load ``then`` (unknown: a quiet machine), or, with no ``basis``,
    the quiet machine the model-size rates describe."""
    cores, busy = room
    now = share_factor(busy, threads, cores)
    said = f"machine now {busy:.1f} of {cores} cores busy with other work, the arms ask for {threads} threads"
    before = 1.0
    if basis is not None and then is not None:
        before = share_factor(then[0], 0.0, then[1])  # its load counted its engine's threads
        said += f"; {basis} ran at load {then[0]:.1f} on {then[1]} cores"
    elif basis is not None:
        said += f"; {basis} recorded no load (taken as quiet)"
    factor = now / before
    if abs(factor - 1) <= UNSCALED:
        return LoadScale(1.0, f"{said}: not scaled")
    return LoadScale(
        factor, f"{said}: scaled ×{factor:.1f} (processor sharing; more if threads outnumber free cores)"
    )
