"""Operating points: the unit every comparison stays inside (issue 40).

Speculation's sign flips with the load: a draft model measured ×1.12 at 1 request in flight and
×0.87 at 64 on one GPU, and one number pooled over the two levels was true at neither. So a sweep
— concurrency levels, output lengths, request rates, the cache suite's two phases — is several
operating points, each judged on its own requests, and a workload without a sweep is one.

A request's point is its workload and its phase (the runner runs one phase per sweep level and
stamps it on the record: ``c8``, ``len500``, ``r2``); records without a phase (imported, old)
fall back to the level in their prompt id (``…@c8``), as the suites name them. A workload whose
requests share one phase is one point named after the workload, so a run without a sweep is
analysed exactly as before; a sweep's points are named ``<workload> @ <level>`` and ordered by
level.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from specbench.store.record import Record

#: The request frame's column naming each request's operating point.
POINT = "point"
#: The frame column holding the request's phase (the level it was sent at).
PHASE = "phase"
MAIN = "main"  # the phase of a workload without a sweep

_LEVEL = re.compile(
    r"^(?:(?P<c>c)(?P<cv>\d+)|(?P<len>len)(?P<lv>\d+)|(?P<r>r)(?P<rv>\d+(?:\.\d+)?(?:e[+-]?\d+)?))$"
)
_SUFFIX = re.compile(r"@(c\d+|len\d+|r\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?:#\d+)?$")


@dataclass(frozen=True)
class Level:
    """Where in a sweep a phase sits: ``kind`` concurrency / length / rate (a number ``value``,
    the axis of the speedup-vs-level plot) or phase (a named phase, ``value`` NaN)."""

    kind: str
    value: float
    label: str


@dataclass(frozen=True)
class Point:
    """One operating point: ``name`` keys every per-point table (the workload's name when the
    workload is one point), ``level`` is None for a workload without a sweep."""

    name: str
    workload: str
    phases: tuple[str, ...]
    level: Level | None

    @property
    def label(self) -> str:
        """How the point reads after its workload: "8 in flight", or the workload's name."""
        return self.level.label if self.level is not None else self.workload


def level_of(phase: str | None) -> Level | None:
    """The sweep level a phase name carries (``c8``, ``len500``, ``r2``, ``natural/c8``); a named
    phase (``identical``) is a level of kind "phase"; None for the main phase or none."""
    last = (phase or "").rsplit("/", 1)[-1]
    if not last or last == MAIN:
        return None
    m = _LEVEL.match(last)
    if m is None:
        return Level("phase", math.nan, last)
    if m["c"]:
        n = int(m["cv"])
        return Level("concurrency", float(n), f"{n} in flight")
    if m["len"]:
        n = int(m["lv"])
        return Level("length", float(n), f"{n} tokens out")
    rate = float(m["rv"])
    return Level("rate", rate, f"{rate:g} req/s")


def phase_of(rec: Record) -> str:
    """The record's phase; for a record without one (or the main one: an import, a synthetic
    record), the level its prompt id names, else main."""
    return phase_named(rec.phase, rec.prompt_id)


def phase_named(phase: Any, prompt_id: Any) -> str:
    """:func:`phase_of` of a frame row's phase and prompt id."""
    if phase and phase != MAIN:
        return str(phase)
    m = _SUFFIX.search(str(prompt_id or ""))
    return m.group(1) if m else MAIN


def _sort_key(level: Level | None, first_seen: int) -> tuple[float, int]:
    value = level.value if level is not None and not math.isnan(level.value) else math.inf
    return value, first_seen


def points_of(df: pd.DataFrame, workloads: Sequence[str]) -> list[Point]:
    """The operating points of a request frame with :data:`PHASE` and ``workload`` columns, in
    ``workloads`` order, each workload's levels by value (named phases as first seen)."""
    if df.empty:
        return []
    pairs = df[["workload", PHASE]].astype(str).drop_duplicates()
    out: list[Point] = []
    for workload in workloads:
        phases = [str(p) for p in pairs.loc[pairs["workload"] == workload, PHASE]]
        levels = {p: level_of(p) for p in phases}
        if len({lv for lv in levels.values()}) <= 1:
            out.append(Point(workload, workload, tuple(phases), None))
            continue
        order = sorted(phases, key=lambda p: _sort_key(levels[p], phases.index(p)))
        out += [_point(workload, p, levels[p]) for p in order]
    return out


def _point(workload: str, phase: str, level: Level | None) -> Point:
    label = level.label if level is not None else phase
    return Point(f"{workload} @ {label}", workload, (phase,), level)


def with_points(df: pd.DataFrame, workloads: Sequence[str]) -> pd.DataFrame:
    """``df`` with each row's :data:`PHASE` filled (:func:`phase_of`) and its :data:`POINT`."""
    phase = df[PHASE] if PHASE in df else pd.Series([None] * len(df), index=df.index)
    filled = [phase_named(ph, pid) for ph, pid in zip(phase, df["prompt_id"], strict=True)]
    out = df.assign(**{PHASE: filled})
    name = {(p.workload, ph): p.name for p in points_of(out, workloads) for ph in p.phases}
    keys = zip(out["workload"].astype(str), out[PHASE].astype(str), strict=True)
    out[POINT] = [name.get(k, k[0]) for k in keys]
    return out


def several(points: Sequence[Point], workload: str) -> bool:
    """Whether ``workload`` is a sweep of two or more points."""
    return sum(1 for p in points if p.workload == workload) > 1
