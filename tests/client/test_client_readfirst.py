"""The loop reads streams between its other callbacks (client/readfirst.py), and no collection
but the youngest runs while a streamer is open (stream.quiet_collector)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import time
from collections import deque

from specbench.client import readfirst
from specbench.client.readfirst import BUDGET_NS, ReadFirst, reads_first, unwatch, watch
from specbench.client.stream import quiet_collector


def _busy(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def _order_of_read(watched: bool) -> int:
    """How many of 20 queued callbacks, each longer than the budget, ran before a read that was
    waiting in its socket when they were queued."""
    order: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        a.setblocking(False)
        with a, b, reads_first(loop):

            def read() -> None:
                order.append("read")
                with contextlib.suppress(BlockingIOError):  # a second wake of a level-triggered poll
                    a.recv(16)

            loop.add_reader(a.fileno(), read)
            if watched:
                watch(loop, a.fileno())
            b.send(b"x")
            done = loop.create_future()

            def step(i: int) -> None:
                _busy(2 * BUDGET_NS)
                order.append(f"cb{i}")

            for i in range(20):
                loop.call_soon(step, i)
            loop.call_soon(done.set_result, None)
            await done
            await asyncio.sleep(0)
            loop.remove_reader(a.fileno())
            unwatch(loop, a.fileno())

    asyncio.run(main())
    return order.index("read")


def test_a_watched_read_runs_between_callbacks_not_after_the_turn() -> None:
    # The loop's own poll ran before the byte was sent; the first callback outlasts the budget,
    # so the queue polls before the second and runs the read there.
    assert _order_of_read(watched=True) <= 2
    # A socket nobody watches is read as asyncio reads it: after every callback of the turn.
    assert _order_of_read(watched=False) == 20


def test_the_queue_is_put_back_with_what_it_holds() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        before = loop._ready  # type: ignore[attr-defined]
        assert type(before) is deque
        with reads_first(loop) as queue, reads_first(loop) as again:
            assert isinstance(queue, ReadFirst) and again is queue
            assert loop._ready is queue  # type: ignore[attr-defined]
            loop.call_soon(lambda: None)
        after = loop._ready  # type: ignore[attr-defined]
        assert type(after) is deque and len(after) == 1  # the callback queued inside is kept
        assert loop not in readfirst._QUEUES

    asyncio.run(main())


def test_asyncio_still_has_the_hooks_it_uses() -> None:
    # A Python whose loop moved them fails here rather than quietly reading once per turn.
    loop = asyncio.new_event_loop()
    try:
        assert readfirst._hooks(loop)
    finally:
        loop.close()


def test_only_the_youngest_generation_is_collected_while_streaming() -> None:
    before = gc.get_threshold()
    with quiet_collector():
        young, middle, full = gc.get_threshold()
        assert young == before[0] and middle > 10**9 and full > 10**9
        assert gc.get_freeze_count() > 0
        with quiet_collector():  # a second streamer (pool worker and cell loop) shares it
            pass
        assert gc.get_threshold()[1] > 10**9
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
