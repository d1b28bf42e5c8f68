"""Reads before everything else: the loop looks for readable streams between callbacks, not only
once per turn, and a streaming read found then runs at once.

asyncio's loop polls its sockets once per turn and then runs every callback that was ready at the
start of the turn. At 64 streams a turn can hold the reads of one server step, a few responses'
ends (aiohttp's parser, the future that wakes the request), the next requests' sends and a
follower slice (follow.py): milliseconds in all, while the next step's bytes wait in the sockets.
A socket not read before the server's next write coalesces two chunks into one read: the kernel
keeps one receive time for the bytes it merged (the later one), so one gap reads twice its length
and the next reads zero, whatever the stamp (issue #41: 0.977 of the schedule but a 1.4 ms gap
p99 error at 64 in flight, 2 ms a token, against a compiled floor client's 0.005 ms).

So while a streamer is open the loop's ready queue (``loop._ready``, a deque the loop pops one
callback at a time from) is one that, whenever ``BUDGET_NS`` has passed since the selector last
returned, polls it without waiting before handing out the next callback: the reads of streaming
connections (``watch``) it finds run there and then (a stamp and the bytes, microseconds each);
anything else waits for the loop's own poll, as before. A read then waits for at most the budget
and the one callback running, not for the whole turn. Only connections the kernel stamps are
watched: a read stamped with the poll that found it (other platforms) keeps the loop's own poll,
as a later poll would stamp it later.

The ready queue, the selector and a handle's ``_run`` are private to asyncio (the same from 3.6 to
3.13); a loop without them (uvloop, Windows' proactor) is left as it is,
and tests/client/test_client_readfirst.py checks the hooks are in place.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# How long a streaming read may wait behind other callbacks before the loop looks again: well
# under a token's gap (2 ms at 500 tok/s), so a pause of the machine's still leaves the read time
# before the server's next write; a poll that finds nothing costs ~2 µs, so looking at most every
# 0.15 ms costs at most ~2 % of a core (no change in CPU per token measured). Measured at 64 in
# flight, 2 ms a token (bench/client_schedule.py, 4 rounds each): chunks read two in one 0.31 %
# at 0.3 ms, 0.13-0.14 % at 0.15 ms, 0.16 % at 0.1 ms (the C floor client 0.08-0.15 %).
BUDGET_NS = 150_000
_EVENT_READ = selectors.EVENT_READ
_perf = time.perf_counter_ns


class ReadFirst(deque):  # type: ignore[type-arg]
    """The loop's ready queue, polling the selector between callbacks (see the module's doc).
    Installed once per loop (``reads_first``) and kept: with no streaming socket watched it
    hands out callbacks as asyncio's own queue does."""

    def __init__(self, selector: Any) -> None:
        super().__init__()
        self.selector = selector
        self.fds: set[int] = set()  # the streaming connections' sockets (watch)
        self.users = 0
        self.polled_ns = _perf()  # when this queue last polled (the loop's own polls: clock)
        self.clock: Any = None  # the loop's SelectClock while a streamer is open: its last poll
        self._old: deque[Any] = deque()  # the queue this one replaced (adopt)

    def adopt(self, old: deque[Any]) -> None:
        """Take over ``old``, the loop's queue this one replaced: what it holds now, and whatever
        another thread appends to it later (``call_soon_threadsafe`` that looked the queue up
        before the swap), each time the loop counts what is ready."""
        self._old = old
        self._take_old()

    def _take_old(self) -> None:
        old = self._old
        while old:
            self.append(old.popleft())

    def __len__(self) -> int:  # the loop counts the ready callbacks once a turn, and tests it
        if self._old:
            self._take_old()
        return super().__len__()

    def popleft(self) -> Any:
        handle = super().popleft()
        if self.fds:
            now = _perf()
            clock = self.clock
            if now - max(self.polled_ns, clock.t_ns if clock is not None else 0) > BUDGET_NS:
                self.polled_ns = now
                self._poll()
        return handle

    def _poll(self) -> None:
        """Run the watched sockets' reads a poll finds now. Nothing else is taken: the loop's own
        poll reports it again (level-triggered), and a callback the loop has already queued is
        not queued twice."""
        fds = self.fds
        for key, mask in self.selector.select(0):
            if mask & _EVENT_READ and key.fd in fds:
                reader = key.data[0]
                if reader is not None and not reader._cancelled:
                    # A streaming read: a stamp and the bytes. Where the loop had already queued
                    # it, that callback then finds nothing to read and returns.
                    reader._run()


def _hooks(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is asyncio's selector loop as this module knows it."""
    return (
        isinstance(loop, asyncio.selector_events.BaseSelectorEventLoop)
        and type(getattr(loop, "_ready", None)) in (deque, ReadFirst)
        and callable(getattr(getattr(loop, "_selector", None), "select", None))
    )


def _queue(loop: asyncio.AbstractEventLoop) -> ReadFirst | None:
    queue = getattr(loop, "_ready", None)
    return queue if isinstance(queue, ReadFirst) else None


@contextmanager
def reads_first(loop: asyncio.AbstractEventLoop, clock: Any = None) -> Iterator[ReadFirst | None]:
    """``loop``'s ready queue polls for streaming reads between callbacks (those ``watch``
    names) while the block runs; nested and concurrent blocks share one. None on a loop without
    the hooks. The queue stays installed after the block: taken out, a callback another thread
    appended to it meanwhile would be lost."""
    if not _hooks(loop):
        yield None
        return
    queue = _queue(loop)
    if queue is None:
        queue = ReadFirst(loop._selector)  # type: ignore[attr-defined]
        old, loop._ready = loop._ready, queue  # type: ignore[attr-defined]  # popped by attribute
        queue.adopt(old)
    queue.users += 1
    queue.clock = queue.clock or clock
    try:
        yield queue
    finally:
        queue.users -= 1
        if queue.users == 0:
            queue.clock = None  # its selector clock is taken off when the last streamer closes


def watch(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Reads on ``fd`` (a streaming connection's socket) run as soon as a poll finds them."""
    queue = _queue(loop)
    if queue is not None:
        queue.fds.add(fd)


def unwatch(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    queue = _queue(loop)
    if queue is not None:
        queue.fds.discard(fd)
