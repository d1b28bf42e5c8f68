"""Which arm of a round was launched first: what the order-balanced estimator groups launch pairs by.

The launch-level estimator (:func:`specbench.analysis.launches.fit`) weights the two orders of a
launch pair — the arm's server first, or the baseline's — equally, so that a machine favouring
the first (or second) launch of a round reads as no speedup. Plain ABBA tied that order to the
repeat's parity; the counterbalanced order (:mod:`specbench.run.order`) does not, so the order is
read from what the run recorded, per round:

1. the manifest's ``order`` (``rounds``: the arms of round r in launch order), written before any
   cell runs;
2. else the cells' ``started_at`` (cells.jsonl), earliest attempt of each (arm, repeat) — a tune's
   race and any executor that orders its own rounds;
3. else nothing, and the estimator falls back to the repeat's parity (runs from before the
   counterbalanced order, imported runs).

The result travels as a column of the request frame (:data:`~specbench.analysis.launches.POSITION`),
since every speedup is computed from that frame.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from numbers import Integral
from typing import Any

import pandas as pd

from specbench.analysis.launches import POSITION
from specbench.analysis.metrics import frame
from specbench.store.record import Record

Positions = dict[tuple[str, int], int]  # (arm, repeat) → place in its round, 0 = launched first


def positions(manifest: Mapping[str, Any], cells: Sequence[Mapping[str, Any]]) -> Positions:
    """Each (arm, repeat)'s place in its round: the stored order where it covers the round, else
    the cells' start times; rounds neither covers are absent."""
    out: Positions = {}
    stored = _stored_rounds(manifest)
    for repeat, order in _started_rounds(cells).items():
        if repeat not in stored:
            out.update({(arm, repeat): i for i, arm in enumerate(order)})
    for repeat, order in stored.items():
        out.update({(arm, repeat): i for i, arm in enumerate(order)})
    return out


def _stored_rounds(manifest: Mapping[str, Any]) -> dict[int, list[str]]:
    """The manifest's ``order.rounds`` by repeat (round r is repeat r: runorder plans them so)."""
    order = manifest.get("order")
    rounds = order.get("rounds") if isinstance(order, Mapping) else None
    if not isinstance(rounds, list):
        return {}
    return {
        r: [str(a) for a in arms]
        for r, arms in enumerate(rounds)
        if isinstance(arms, list) and len(set(map(str, arms))) == len(arms)
    }


def _started_rounds(cells: Sequence[Mapping[str, Any]]) -> dict[int, list[str]]:
    """Per repeat, the arms by the start of their first served attempt; a round where two arms
    started at the same instant is left out (no order to read)."""
    first: dict[tuple[str, int], datetime] = {}
    for cell in cells:
        start, arm, repeat = _when(cell.get("started_at")), cell.get("arm"), cell.get("repeat")
        if start is None or not isinstance(arm, str) or not isinstance(repeat, int) or cell.get("lost"):
            continue
        key = (arm, repeat)
        first[key] = min(first.get(key, start), start)
    rounds: dict[int, list[tuple[datetime, str]]] = {}
    for (arm, repeat), start in first.items():
        rounds.setdefault(repeat, []).append((start, arm))
    return {
        r: [arm for _, arm in sorted(starts)]
        for r, starts in rounds.items()
        if len({s for s, _ in starts}) == len(starts)
    }


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)  # naive: ours are UTC, comparable


def with_positions(df: pd.DataFrame, where: Positions) -> pd.DataFrame:
    """``df`` with :data:`POSITION` (NaN where the round's order is unknown)."""
    out = df.copy()
    out[POSITION] = [
        float(where.get((str(arm), int(r)), math.nan)) if _is_int(r) else math.nan
        for arm, r in zip(df["arm"], df["repeat"], strict=True)
    ]
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) or (isinstance(value, float) and value.is_integer())


def ordered_frame(
    records: Sequence[Record | Mapping[str, Any]],
    manifest: Mapping[str, Any],
    cells: Sequence[Mapping[str, Any]],
) -> pd.DataFrame:
    """:func:`specbench.analysis.metrics.frame` of ``records`` (records, or lines read here) with
    each row's launch position:
    the frame every speedup of a run is computed from (the report's and ``repeats: auto``'s)."""
    return with_positions(frame(records), positions(manifest, cells))
