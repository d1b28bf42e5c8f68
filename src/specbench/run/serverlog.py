"""Reading a launched server's log at the right moment.

A server writes a request's acceptance line *after* it sent the last token, so a cell's log read
right after its last response can miss that line (llama.cpp: timings 0.667 = /metrics 0.667 but a
log missing the last request read 41/55 = 0.745). :func:`settle` waits, briefly and boundedly,
until the lines the engine promised for the finished requests are there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

SETTLE_TIMEOUT_S = 10.0
POLL_S = 0.05


def read_from(log: Path, offset: int) -> str:
    if not log.exists():
        return ""
    with log.open(errors="replace") as fh:
        fh.seek(offset)
        return fh.read()


async def settle(
    log: Path, offset: int, is_line: Callable[[str], bool], expected: int, timeout: float = SETTLE_TIMEOUT_S
) -> tuple[int, int]:
    """Wait until ``log`` holds ``expected`` matching lines after ``offset`` (or ``timeout``).
    Returns (lines found, log size at that moment: where the next window starts)."""
    deadline = time.monotonic() + timeout
    while True:
        text = read_from(log, offset)
        found = sum(1 for ln in text.splitlines() if is_line(ln))
        if found >= expected or time.monotonic() >= deadline:
            return found, offset + len(text.encode())
        await asyncio.sleep(POLL_S)
