"""The loop reads streams between its other callbacks (client/readfirst.py), and no collection
runs while a streamer is open (stream.quiet_collector)."""

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


def _reads_behind_busy_callbacks(watched: bool) -> tuple[int, int]:
    """Where, among 20 queued callbacks each longer than the budget, a read ran that was waiting
    in its socket when they were queued; and how many times the reader of another socket with a
    byte waiting, never watched, ran meanwhile."""
    order: list[str] = []
    other_runs = [0]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        c, d = socket.socketpair()
        a.setblocking(False)
        with a, b, c, d, reads_first(loop):

            def read() -> None:
                order.append("read")
                with contextlib.suppress(BlockingIOError):  # a second wake of a level-triggered poll
                    a.recv(16)

            def other() -> None:
                other_runs[0] += 1

            loop.add_reader(a.fileno(), read)
            loop.add_reader(c.fileno(), other)  # never read, never watched: ready all along
            if watched:
                watch(loop, a.fileno())
            b.send(b"x")
            d.send(b"y")
            done = loop.create_future()

            def step(i: int) -> None:
                _busy(2 * BUDGET_NS)
                order.append(f"cb{i}")

            for i in range(20):
                loop.call_soon(step, i)
            loop.call_soon(done.set_result, None)
            await done
            loop.remove_reader(c.fileno())
            await asyncio.sleep(0)
            loop.remove_reader(a.fileno())
            unwatch(loop, a.fileno())

    asyncio.run(main())
    return order.index("read"), other_runs[0]


def test_a_watched_read_runs_between_callbacks_not_after_the_turn() -> None:
    # The loop's own poll ran before the bytes were sent; the first callback outlasts the budget,
    # so the queue polls before the second and runs the read there.
    at, others = _reads_behind_busy_callbacks(watched=True)
    assert at <= 2
    # Another socket's reader is left to the loop's own poll: run once per turn, not once more
    # per poll between callbacks (the 20 callbacks are one turn; the read of the loop's own poll
    # after them is the second).
    assert others <= 2
    # A socket nobody watches is read as asyncio reads it: after every callback of the turn.
    assert _reads_behind_busy_callbacks(watched=False)[0] == 20


def test_the_queue_stays_and_takes_what_the_old_one_is_given() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        before = loop._ready  # type: ignore[attr-defined]
        assert type(before) is deque
        with reads_first(loop) as queue, reads_first(loop) as again:
            assert isinstance(queue, ReadFirst) and again is queue
            assert loop._ready is queue  # type: ignore[attr-defined]
        assert loop._ready is queue and queue.users == 0 and queue.clock is None  # type: ignore[attr-defined]
        # Another thread's call_soon_threadsafe that looked the queue up before it was replaced
        # appends to the old one: the loop still runs it.
        ran = loop.create_future()
        before.append(asyncio.Handle(ran.set_result, (True,), loop))
        assert await asyncio.wait_for(ran, 5)

    asyncio.run(main())


def test_asyncio_still_has_the_hooks_it_uses() -> None:
    # A Python whose loop moved them fails here rather than quietly reading once per turn.
    loop = asyncio.new_event_loop()
    try:
        assert readfirst._hooks(loop)
    finally:
        loop.close()


def test_nothing_is_collected_while_streaming_and_the_collector_comes_back_as_it_was() -> None:
    before = gc.get_threshold()
    assert gc.isenabled()
    with quiet_collector():
        assert not gc.isenabled()
        # Turned on by anything else meanwhile, only the youngest generation runs.
        young, middle, full = gc.get_threshold()
        assert young == before[0] and middle > 10**9 and full > 10**9
        assert gc.get_freeze_count() > 0
        with quiet_collector():  # a second streamer (pool worker and cell loop) shares it
            pass
        assert not gc.isenabled() and gc.get_threshold()[1] > 10**9
    assert gc.isenabled() and gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    gc.disable()  # a process that had it off keeps it off
    try:
        with quiet_collector():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
