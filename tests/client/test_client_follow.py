"""The follower (client/follow.py): streams parsed as they stream, and no record kept alive by it."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable

from specbench.client.follow import following


class _Rec:
    """A followed record that counts the follower's visits and can run a hook on one; its first
    visit has three slices to parse, each noting ``clock`` (turns of the loop so far)."""

    def __init__(self, hook: Callable[[], None] | None = None, clock: list[int] | None = None) -> None:
        self.hook, self.visits, self.slices, self.clock = hook, 0, 3, clock or [0]
        self.sliced_at: list[int] = []

    def catch_up(self) -> None:
        self.visits += 1
        if self.hook is not None:
            self.hook()

    def parse_some(self) -> bool:
        self.slices -= 1
        if self.slices >= 0:
            self.sliced_at.append(self.clock[0])
        return self.slices > 0


async def _follow(rec: _Rec, done: asyncio.Event) -> None:
    with following(rec):
        await done.wait()


async def _until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "the follower never came"
        await asyncio.sleep(0.005)


async def _ticking(clock: list[int], stop: asyncio.Event) -> None:
    """Counts the loop's turns: one step a turn while the follower parses."""
    while not stop.is_set():
        clock[0] += 1
        await asyncio.sleep(0)


def test_a_streaming_record_is_parsed_while_it_streams_and_not_after() -> None:
    async def scenario() -> tuple[int, int, list[int]]:
        clock, stop, done = [0], asyncio.Event(), asyncio.Event()
        rec = _Rec(clock=clock)
        ticker = asyncio.create_task(_ticking(clock, stop))
        task = asyncio.create_task(_follow(rec, done))
        await _until(lambda: rec.visits >= 2)
        done.set()
        await task
        visits = rec.visits
        await asyncio.sleep(0.1)  # five periods: an ended record is not visited again
        stop.set()
        await ticker
        return visits, rec.visits, rec.sliced_at

    visits_at_end, visits_later, sliced_at = asyncio.run(scenario())
    assert visits_later == visits_at_end
    # Every slice of a visit is parsed, the loop handed back between them (other tasks ran).
    assert len(sliced_at) == 3 and sliced_at[0] < sliced_at[1] < sliced_at[2]


def test_a_record_that_ends_during_a_pass_is_freed_before_the_pass_ends() -> None:
    """A pass that kept its snapshot of the records for its whole length freed every record
    that ended meanwhile at once when it finished (1.5-3.4 ms at 64 streams, issue #41)."""

    async def scenario() -> bool | None:
        seen: dict[str, bool] = {}
        first_done, other = asyncio.Event(), asyncio.Event()
        first = _Rec()
        first_ref = weakref.ref(first)
        tasks = [asyncio.create_task(_follow(first, first_done))]
        del first  # only its task holds it now, and the follower while it visits it
        # The second record's visit ends the first stream; the third looks whether it is gone.
        tasks.append(asyncio.create_task(_follow(_Rec(hook=first_done.set), other)))
        tasks.append(
            asyncio.create_task(
                _follow(_Rec(hook=lambda: seen.setdefault("alive", first_ref() is not None)), other)
            )
        )
        await _until(lambda: "alive" in seen)
        other.set()
        await asyncio.gather(*tasks)
        return seen.get("alive")

    assert asyncio.run(scenario()) is False


def test_a_record_that_ends_before_the_pass_reaches_it_is_freed_by_its_own_task() -> None:
    """The pass holds the records ahead of it weakly: one that ends before its visit is freed
    as its own task ends, not in a follower step that frees every such record together."""

    async def scenario() -> bool:
        died_in: list[asyncio.Task[object] | None] = []
        second_done, rest = asyncio.Event(), asyncio.Event()
        tasks = [asyncio.create_task(_follow(_Rec(hook=second_done.set), rest))]  # ends the second
        second = _Rec()
        ref = weakref.ref(second, lambda _: died_in.append(asyncio.current_task()))
        tasks.append(asyncio.create_task(_follow(second, second_done)))
        del second
        tasks.append(asyncio.create_task(_follow(_Rec(), rest)))
        await _until(lambda: bool(died_in))
        rest.set()
        await asyncio.gather(*tasks)
        return ref() is None and died_in[0] is tasks[1]

    assert asyncio.run(scenario())
