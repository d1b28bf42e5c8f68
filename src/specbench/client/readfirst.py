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
anything else it finds is queued as the loop itself would queue it. A read then waits for at most
the budget and the one callback running, not for the whole turn.

The ready queue, the selector, ``_process_events`` and a handle's ``_run`` are private to asyncio
(the same from 3.6 to 3.13); a loop without them (uvloop, another platform's) is left as it is,
and tests/client/test_client_readfirst.py checks the hooks are in place.
"""

from __future__ import annotations

import asyncio
import selectors
import time
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# How long a streaming read may wait behind other callbacks before the loop looks again: well
# under a token's gap (2 ms at 500 tok/s), and a poll that finds nothing costs ~2 µs, so looking
# at most every 0.3 ms costs under 1 % of a core.
BUDGET_NS = 300_000
_EVENT_READ = selectors.EVENT_READ
_perf = time.perf_counter_ns


class ReadFirst(deque):  # type: ignore[type-arg]
    """The loop's ready queue, polling the selector between callbacks (see the module's doc)."""

    def __init__(self, items: Any, loop: Any) -> None:
        super().__init__(items)
        self.loop, self.selector = loop, loop._selector
        self.fds: set[int] = set()  # the streaming connections' sockets (watch)
        self.users = 0
        self.polled_ns = _perf()  # when this queue last polled (the loop's own polls: clock)
        self.clock: Any = None  # the loop's SelectClock, where there is one: its last poll
        self.runs = 0  # reads run between callbacks (for tests and benches)

    def popleft(self) -> Any:
        handle = super().popleft()
        now = _perf()
        clock = self.clock
        last = max(self.polled_ns, clock.t_ns if clock is not None else 0)
        if now - last > BUDGET_NS and self.fds:
            self.polled_ns = now
            self._poll()
        return handle

    def _poll(self) -> None:
        fds, others = self.fds, []
        for key, mask in self.selector.select(0):
            reader = key.data[0] if mask & _EVENT_READ else None
            if key.fd in fds and reader is not None and not reader._cancelled:
                self.runs += 1
                reader._run()  # a streaming read: a stamp and the bytes, run now
                if mask & ~_EVENT_READ:
                    others.append((key, mask & ~_EVENT_READ))
            else:
                others.append((key, mask))
        if others:
            self.loop._process_events(others)  # queued as the loop's own poll queues them


_QUEUES: weakref.WeakKeyDictionary[Any, ReadFirst] = weakref.WeakKeyDictionary()


def _hooks(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is asyncio's selector loop as this module knows it."""
    return (
        type(getattr(loop, "_ready", None)) in (deque, ReadFirst)
        and callable(getattr(getattr(loop, "_selector", None), "select", None))
        and callable(getattr(loop, "_process_events", None))
    )


@contextmanager
def reads_first(loop: asyncio.AbstractEventLoop, clock: Any = None) -> Iterator[ReadFirst | None]:
    """``loop``'s ready queue polls for streaming reads between callbacks while the block runs
    (nested and concurrent blocks share one); None on a loop without the hooks."""
    if not _hooks(loop):
        yield None
        return
    queue = _QUEUES.get(loop)
    if queue is None:
        queue = _QUEUES[loop] = ReadFirst(loop._ready, loop)  # type: ignore[attr-defined]
        loop._ready = queue  # type: ignore[attr-defined]  # the loop pops it by attribute each time
    queue.users += 1
    queue.clock = queue.clock or clock
    try:
        yield queue
    finally:
        queue.users -= 1
        if queue.users == 0:
            loop._ready = deque(queue)  # type: ignore[attr-defined]
            del _QUEUES[loop]


def watch(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Reads on ``fd`` (a streaming connection's socket) run as soon as a poll finds them."""
    queue = _QUEUES.get(loop)
    if queue is not None:
        queue.fds.add(fd)


def unwatch(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    queue = _QUEUES.get(loop)
    if queue is not None:
        queue.fds.discard(fd)
