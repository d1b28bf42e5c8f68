"""Stalled requests: a paused engine, not a slow one — and what they do to modes and categories.

On a busy box the scheduler can stop the engine for a second in the middle of a request: one
gap between two token chunks is many times the request's usual gap. Such a request's decode rate
measures the pause; a few of them make an arm look bimodal, make whichever category they fell in
look slow, and drag the geometric-mean speedup. They are named (STALLED), and the bimodality
and category checks run without them so that a pause never reads as a per-category effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from specbench import machine
from specbench.analysis import bimodality, stats
from specbench.analysis.finding import Finding
from specbench.analysis.metrics import NS_PER_MS
from specbench.schema import RequestRecord, chunks

STALL_FACTOR = 20.0  # a gap this many times the request's median step gap is a pause, not a step
STALL_MIN_MS = 250.0  # and at least this long: a fast model's 1 ms → 25 ms hiccup is no stall
# llama.cpp streams the tokens a speculative step accepted as separate chunks microseconds apart:
# gaps below this share of the mean gap are tokens of one step, not steps. Without this the
# "usual gap" of an n-gram arm is a within-burst 0.05 ms and every ≥ 250 ms verification round on a
# busy box reads as a pause (gemma3-270m ngram-simple: rounds of 125–141 ms, one of 270 ms).
BURST_SHARE = 0.1


Rows = Sequence[Mapping[str, Any]]


def stall_ms(rec: RequestRecord | Mapping[str, Any]) -> float:
    """The longest gap between token chunks when it is a stall (else 0.0): compared with the
    request's usual gap between decoding steps, bursts of one step's tokens left out."""
    times = [c.t_ns for c in chunks(rec) if c.carries_token or c.finish_reason]
    if len(times) < 3:
        return 0.0
    gaps = np.diff(np.asarray(times, dtype=np.float64)) / NS_PER_MS
    steps = gaps[gaps >= BURST_SHARE * gaps.mean()]
    longest, usual = float(gaps.max()), float(np.median(steps))
    return longest if longest >= STALL_MIN_MS and longest >= STALL_FACTOR * max(usual, 1e-9) else 0.0


def stalled(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, Any], float]:
    """(arm, seq) → stall length in ms, for every measured request that stalled."""
    out = {}
    for rec in records:
        if rec.get("error") is None and not rec.get("warmup") and (ms := stall_ms(rec)) > 0:
            out[(str(rec.get("arm")), rec.get("seq"))] = ms
    return out


def without_stalls(df: pd.DataFrame, records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The request frame less its stalled requests."""
    keys = stalled(records)
    if not keys or "seq" not in df.columns:
        return df
    hit = [(str(a), s) in keys for a, s in zip(df["arm"], df["seq"], strict=True)]
    return df[~np.asarray(hit, dtype=bool)]


def _without_line(df: pd.DataFrame, records: Rows, arm: str, baseline: str) -> str:
    """ " Speedup ×a with them, ×b without" for an arm compared with the baseline, else ""."""
    if arm == baseline or baseline not in set(df["arm"]):
        return ""
    try:
        with_ = stats.speedup(df, arm, baseline).ratio
        without = stats.speedup(without_stalls(df, records), arm, baseline).ratio
    except ValueError:  # too few requests left on a side
        return ""
    return f" Speedup over {baseline}: ×{with_:.2f} with them, ×{without:.2f} without."


def stall_findings(records: Rows, arms: Sequence[str], df: pd.DataFrame, baseline: str) -> list[Finding]:
    """STALLED per arm with stalled requests: how many, how long, and the speedup without them."""
    keys = stalled(records)
    out = []
    for arm in arms:
        pauses = sorted(ms for (a, _), ms in keys.items() if a == arm)
        if not pauses:
            continue
        total = sum(
            1 for r in records if r.get("arm") == arm and r.get("error") is None and not r.get("warmup")
        )
        span = (
            f"{pauses[0] / 1000:.1f} s"
            if len(pauses) == 1
            else f"{pauses[0] / 1000:.1f}–{pauses[-1] / 1000:.1f} s"
        )
        out.append(
            Finding(
                "STALLED",
                (arm,),
                f"{arm}: {len(pauses)} of {total} requests stalled (one gap of {span}, ≥ {STALL_FACTOR:.0f}× "
                "the request's usual gap): the engine was paused, not decoding; these requests drag its "
                "mean and speedup down and are left out of the bimodality and category checks."
                + _without_line(df, records, arm, baseline),
            )
        )
    return out


def bimodal_findings(
    df: pd.DataFrame,
    records: Sequence[Mapping[str, Any]],
    cells: Sequence[Mapping[str, Any]],
    arms: Sequence[str],
) -> list[Finding]:
    """BIMODAL per arm whose decode rate has two modes once stalled requests are left out."""
    clean = without_stalls(df, records)
    out = []
    for arm in arms:
        bimodal = bimodality.bimodality(clean.loc[clean["arm"] == arm, "decode_tok_s"].to_numpy())
        if not bimodal.bimodal:
            continue
        modes = " and ".join(f"{m:.1f}" for m in bimodal.modes)
        busy = machine.busy_cells(cells, arm)
        why = (
            f"the machine was busy during {len(busy)} of its cells ({busy[0]}): the modes may be the "
            "load, not the workload"
            if busy
            else "see the per-category breakdown"
        )
        msg = f"{arm}: decode tok/s has two modes ({modes}); the mean describes neither — {why}."
        out.append(Finding("BIMODAL", (arm,), msg))
    return out
