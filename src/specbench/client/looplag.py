"""The client's own event-loop lag, measured while a cell's requests stream.

While a cell's requests stream, :class:`LoopLag` sleeps a fixed period on the same event loop
and records how late each wake-up came; the cell keeps the summary (``cells.jsonl``
``client_lag``). :mod:`specbench.analysis.clientlag` turns a large lag into CLIENT_BEHIND.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

PERIOD_S = 0.01  # 100 wake-ups a second: a few µs of CPU, fine enough to see a stall


class LoopLag:
    """Measure wake-up lag of the running loop between :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self.lags_ns: list[int] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        period_ns = int(PERIOD_S * 1e9)
        while True:
            t0 = time.perf_counter_ns()
            await asyncio.sleep(PERIOD_S)
            self.lags_ns.append(max(0, time.perf_counter_ns() - t0 - period_ns))

    async def stop(self) -> dict[str, Any]:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        lags = np.asarray(self.lags_ns, dtype=float) / 1e6
        if lags.size == 0:
            return {"period_ms": PERIOD_S * 1e3, "n": 0}
        return {
            "period_ms": PERIOD_S * 1e3,
            "n": int(lags.size),
            "p50_ms": float(np.percentile(lags, 50)),
            "p99_ms": float(np.percentile(lags, 99)),
            "max_ms": float(lags.max()),
        }
