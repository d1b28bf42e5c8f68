"""Open-loop load: requests sent on a precomputed, seeded arrival schedule.

A closed loop (N in flight, the next sent when one finishes) lets a slow server slow its own
load; serving users face arrivals that do not wait. Inter-arrival gaps are gamma-distributed with
shape ``burstiness`` and mean ``1 / rate`` — shape 1 is a Poisson process, below 1 burstier, above
1 more regular (the convention of ``vllm bench serve --burstiness``) — with an optional linear
ramp of the rate from near zero over the first ``ramp_up_s`` seconds. The schedule is drawn once
per (seed, repeat, phase), identical for every arm, and stored in the run directory; each record
keeps its scheduled offset and how late it was actually sent (``lateness_ms``: a free slot under
the concurrency cap, or a client that fell behind).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from specbench.store.safeio import write_atomic

T = TypeVar("T")


def schedule(
    n: int, rate: float, burstiness: float = 1.0, seed: int = 0, ramp_up_s: float = 0.0
) -> list[float]:
    """Send offsets in seconds from the phase start for ``n`` requests."""
    if n <= 0:
        return []
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    gaps[0] = 0.0  # the first request goes at once
    offsets = np.cumsum(gaps)
    if ramp_up_s > 0:
        offsets = _ramp(offsets, ramp_up_s)
    return [float(x) for x in offsets]


def _ramp(offsets: np.ndarray, ramp_up_s: float) -> np.ndarray:
    """Stretch time so the rate grows linearly from 0 to full over ``ramp_up_s``: unit-rate time
    u maps to wall time t with u = t²/(2R) for t < R, and u = t − R/2 after."""
    half = ramp_up_s / 2.0
    return np.where(offsets < half, np.sqrt(2.0 * ramp_up_s * offsets), offsets + half)


def save_schedule(root: Path, name: str, info: dict[str, Any]) -> str:
    """Keep the schedule beside the records (``schedules/<name>.json``), so a run can be replayed."""
    folder = root / "schedules"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    write_atomic(path, json.dumps(info))  # a full disk is exit 5
    return f"schedules/{name}.json"


async def open_loop(
    items: Sequence[T],
    offsets: Sequence[float],
    cap: int,
    send: Callable[[T, dict[str, Any]], Awaitable[None]],
) -> None:
    """Send ``items[i]`` at ``offsets[i]`` with at most ``cap`` in flight; ``send`` gets the
    timing fields for its record: ``scheduled_s``, ``lateness_ms``, ``cap_wait_ms``."""
    limit = asyncio.Semaphore(cap)
    start = time.perf_counter()

    async def one(item: T, offset: float) -> None:
        await asyncio.sleep(max(0.0, start + offset - time.perf_counter()))
        waited = time.perf_counter()
        async with limit:
            now = time.perf_counter()
            timing = {
                "scheduled_s": offset,
                "lateness_ms": (now - start - offset) * 1e3,
                "cap_wait_ms": (now - waited) * 1e3,
            }
            await send(item, timing)

    await asyncio.gather(*(one(item, off) for item, off in zip(items, offsets, strict=True)))
