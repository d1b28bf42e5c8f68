"""The client's own lag, per arm: how late its event loop woke while the arm's requests streamed.

While a cell's requests stream, :class:`~specbench.client.looplag.LoopLag` sleeps a fixed period
on the same event loop and records how late each wake-up came. A loop that wakes late stamps
chunks late too: when it falls behind, queued chunks drain in a burst, gaps shrink towards zero
and TTFT grows — the figures then describe the client, not the server. The lag counts when it is
large next to the arm's time per output token (TPOT, not the median ITL: a server that sends in
bursts has a median ITL near zero). The CLIENT_BEHIND finding says it
(:mod:`specbench.analysis.findings.client`); the stability and stream checks read it too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

LAG_FLOOR_MS = 2.0  # below this, lag is timer and scheduler noise on a shared machine
LAG_SHARE = 0.5  # poll stamps: lag p99 above half the arm's median TPOT distorts per-token timing
# Kernel receive stamps are right however late the loop reads; only a read later than the gap to
# the next chunk takes two chunks at once (one stamp). The median TPOT bounds that gap from below.
LAG_SHARE_KERNEL = 1.0


@dataclass(frozen=True)
class Lag:
    """One arm's worst cell: its ``client_lag`` (p99_ms, max_ms, stamps) with the cell's
    ``repeat``, and the arm's median TPOT (NaN: unknown)."""

    arm: str
    worst: dict[str, Any]
    tpot_ms: float


def lagging(cells: Sequence[Mapping[str, Any]], df: pd.DataFrame) -> list[Lag]:
    """The arms whose worst cell's loop-lag p99 is both above the noise floor and a sizeable share
    of the arm's median TPOT (its timing figures are partly the client's): half of it with poll
    stamps, all of it with the kernel's receive stamps. Sorted by arm."""
    worst: dict[str, dict[str, Any]] = {}
    for cell in cells:
        lag = cell.get("client_lag") or {}
        if lag.get("p99_ms") is not None and lag["p99_ms"] > worst.get(cell["arm"], {}).get("p99_ms", -1):
            worst[cell["arm"]] = {**lag, "repeat": cell.get("repeat")}
    out = []
    for arm, lag in sorted(worst.items()):
        tpot = df.loc[df["arm"] == arm, "tpot_ms"].median() if "tpot_ms" in df and not df.empty else np.nan
        share = LAG_SHARE_KERNEL if lag.get("stamps") == "kernel" else LAG_SHARE
        limit = max(LAG_FLOOR_MS, share * tpot) if np.isfinite(tpot) else LAG_FLOOR_MS
        if lag["p99_ms"] > limit:
            out.append(Lag(arm, lag, float(tpot)))
    return out


def behind(cells: Sequence[Mapping[str, Any]], df: pd.DataFrame) -> frozenset[str]:
    """The arms whose client fell behind (:func:`lagging`)."""
    return frozenset(lag.arm for lag in lagging(cells, df))
