"""The clocks a read is stamped with: the kernel's receive time put on ``perf_counter``'s clock
(``WallOffset``), and the moment the event loop's selector last returned (``SelectClock``).

The kernel's clock is the wall clock (CLOCK_REALTIME); ``perf_counter`` is CLOCK_MONOTONIC. NTP's
slewing moves both alike (clock_gettime(2)), so the wall clock minus ``perf_counter`` only moves
when the wall clock is stepped (clock_settime, a VM's clock set after a pause or a restore, a leap
second). ``WallOffset`` keeps that difference from readings of both clocks back to back (at the
start, at each poll and after each read): a reading whose two ``perf_counter`` reads are over 2 µs
apart was split by the scheduler and is dropped, the tightest so far is kept (~0.15 µs wide), and
one that disagrees with it by more than half their widths summed starts a new stretch: a step. The
stated bound: a kernel stamp is put on ``perf_counter``'s clock to within ``CONVERSION_ERROR_NS``
(3 µs). Converted with the latest reading alone, bytes that came in before a step and were read
after it (a loop blocked across the step) would be off by the whole step, early by as much where
the clock was put forward. Such bytes can be either side of the step; the read's bounds choose
where they can, else the later time is kept (never earlier than the truth, late by at most the
step; counted as ``ambiguous``). The bounds: a read's bytes came before the read itself and not
before its request went out or the connection's previous read. A kernel stamp that can only be
outside them by more than the bound is impossible, and a user would publish it: the read is stamped
when it was read instead (late, never early), and counted (``early``, ``late``;
``StampingConnector.clamps``, kept with the cell's client lag as ``stamp_clamps``).
"""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_perf = time.perf_counter_ns
_real = time.time_ns

# Two clock reads further apart than this were split by the scheduler (35-43 µs seen on a busy
# 2-core box): such a reading says little about the offset and is dropped.
_TIGHT_NS = 2_000
# A reading's offset is off by at most half its width (1 µs). A new reading within half their
# widths summed (2 µs) of the kept one is of the same stretch, so the kept one is within 2 + 1 µs
# of the truth at every reading; further off, the wall clock was stepped (WallOffset.note).
CONVERSION_ERROR_NS = 3 * _TIGHT_NS // 2
_EPOCHS = 4  # stretches between steps kept: bytes older than three steps are rarer than steps


class _Epoch:
    """A stretch of time over which the wall clock minus ``perf_counter`` held (no step)."""

    __slots__ = ("err_ns", "last_ns", "off_ns", "seen_ns", "since_ns")

    def __init__(self, off_ns: int, err_ns: int, since_ns: int, seen_ns: int) -> None:
        self.off_ns, self.err_ns = off_ns, err_ns  # the tightest reading's offset and its width
        self.since_ns = since_ns  # the step that began it came after this (perf_counter_ns) ...
        self.seen_ns = seen_ns  # ... and before this: its first reading
        self.last_ns = seen_ns  # its latest reading: a next step comes after it


class WallOffset:
    """The wall clock minus ``perf_counter`` (ns), from readings of both back to back (``note``),
    by stretches between steps of the wall clock (the last few kept), to put the kernel's receive
    times on ``perf_counter``'s clock (``to_perf``) to within ``CONVERSION_ERROR_NS``."""

    def __init__(self) -> None:
        self.epochs: deque[_Epoch] = deque(maxlen=_EPOCHS)

    def sample(self, tries: int = 16) -> bool:
        """Read until one reading is tight (one in a few is split on a busy box, not all of them);
        False where none was."""
        return any(self.note(_perf(), _real(), _perf()) for _ in range(tries))

    def note(self, before: int, real: int, after: int) -> bool:
        """Take one reading: ``perf_counter_ns``, the wall clock, ``perf_counter_ns``, read in that
        order. False where it was split (dropped)."""
        width = after - before
        if width > _TIGHT_NS:
            return False
        off = real - ((before + after) >> 1)  # the wall clock was read within width/2 of the middle
        epochs = self.epochs
        cur = epochs[-1] if epochs else None
        # Two readings of one stretch agree within half their widths summed; further apart, the
        # wall clock was stepped between them.
        if cur is None or 2 * abs(off - cur.off_ns) > cur.err_ns + width:
            cur = _Epoch(off, width, cur.last_ns if cur else -(2**63), after)
            epochs.append(cur)
        elif width < cur.err_ns:
            cur.off_ns, cur.err_ns = off, width
        cur.last_ns = before
        return True

    def to_perf(self, real_ns: int) -> list[int]:
        """The times on ``perf_counter``'s clock the wall-clock time ``real_ns`` can be: one, or,
        where a step of the wall clock leaves it ambiguous, one per stretch it falls in (bytes
        that came in around the step); none before any tight reading."""
        epochs = self.epochs
        if len(epochs) < 2:  # no step seen: the one time (none before any reading)
            return [real_ns - epochs[0].off_ns] if epochs else []
        fits, until, slack = [], 2**63, CONVERSION_ERROR_NS
        for epoch in reversed(epochs):
            t = real_ns - epoch.off_ns
            if epoch.since_ns - slack < t <= until + slack:
                fits.append(t)
            until = epoch.seen_ns
        return fits or [real_ns - epoch.off_ns for epoch in epochs]  # older than every stretch kept


class SelectClock:
    """``perf_counter_ns`` when the loop's selector last returned (0 once taken off), and the wall
    clock minus it (``offset``, read at the start, at each poll and after each kernel-stamped read,
    to put kernel stamps on the same clock). One per selector, shared by every session open on that
    loop (``select_clock``), so sessions that close in any order never leave one reading a clock
    that stopped."""

    def __init__(self, selector: Any) -> None:
        self.t_ns, self.offset, self.users, self._selector = 0, WallOffset(), 0, selector
        # Read from the start, before any request: a step before the first response's bytes are
        # read then shows as one, not as the offset they were stamped with.
        self.offset.sample()
        inner, self._before = selector.select, selector.__dict__.get("select")
        note = self.offset.note

        def select(timeout: float | None = None) -> Any:
            events = inner(timeout)
            self.t_ns = t_ns = _perf()
            note(t_ns, _real(), _perf())  # a reading per poll: a step is placed to within a poll
            return events

        selector.select = select

    def remove(self) -> None:
        if self._before is None:
            del self._selector.select  # the instance attribute: the class's method shows again
        else:
            self._selector.select = self._before
        self.t_ns = 0


@functools.cache
def spare_offset() -> WallOffset:
    """The offset of reads on a loop without a selector clock."""
    return WallOffset()


_CLOCKS: weakref.WeakKeyDictionary[Any, SelectClock] = weakref.WeakKeyDictionary()


@contextmanager
def select_clock(loop: asyncio.AbstractEventLoop) -> Iterator[SelectClock | None]:
    """The clock of ``loop``'s selector while the block runs; None on a loop without one."""
    selector = getattr(loop, "_selector", None)
    if selector is None or not callable(getattr(selector, "select", None)):
        yield None
        return
    clock = _CLOCKS.get(selector)
    if clock is None:
        clock = _CLOCKS[selector] = SelectClock(selector)
    clock.users += 1
    try:
        yield clock
    finally:
        clock.users -= 1
        if clock.users == 0:
            clock.remove()
            del _CLOCKS[selector]
