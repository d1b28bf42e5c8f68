"""Parse streams as they stream, off the read path: the parse of a response that has ended is
then only its last few events.

A response's reads are kept raw (rawbody.py) and parsed into chunks after it ends. At 64 streams
that one server step ends together, 64 whole parses (~1 ms each) then queue on the loop, and
each stream's next request waits its turn: on average half the queue, 5-10 % of a 512 ms
stream (issue #41). So one follower per event loop wakes every ``PERIOD_S`` and, for each stream
in flight, brings its record up to date (``catch_up``: the chunks walked since) and parses what
is whole, a slice at a time, handing the loop back between slices (``parse_some``) so that no
socket waits long to be read. The read path itself is unchanged: a stamp and the bytes.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

# Wakes per second: few enough that its fixed cost per stream stays small (64 streams: ~3 % of
# a core), often enough that a stream's unparsed tail at its end is a few events.
PERIOD_S = 0.02


class Followed(Protocol):
    """A record in flight; the follower holds it by a weak reference between visits."""

    def catch_up(self) -> None: ...

    def parse_some(self) -> bool: ...


class _Follower:
    def __init__(self) -> None:
        self.active: dict[Followed, None] = {}  # in the order they started
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        try:
            while self.active:
                await asyncio.sleep(PERIOD_S)
                # The pass holds a record only while it parses it: a snapshot list held for the
                # whole pass kept every record that ended meanwhile alive until the pass was
                # over, and then freed them all in one go (64 records' reads, pieces and chunks:
                # 1.5-3.4 ms with every socket waiting, once per 64 streams ending together).
                # Weak references, so a record that ended is freed by its own task, as it ends.
                for ref in [weakref.ref(rec) for rec in self.active]:
                    rec = ref()
                    if rec is None or rec not in self.active:  # it ended meanwhile
                        continue
                    rec.catch_up()
                    while rec.parse_some():
                        await asyncio.sleep(0)
                    rec = None  # before handing the loop back: nothing here keeps it alive
                    await asyncio.sleep(0)
                rec = None
        finally:
            self.task = None


_FOLLOWERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Follower] = weakref.WeakKeyDictionary()


@contextmanager
def following(rec: Followed) -> Iterator[None]:
    """Keep ``rec`` parsed as it streams while the block runs."""
    loop = asyncio.get_running_loop()
    follower = _FOLLOWERS.get(loop)
    if follower is None:
        follower = _FOLLOWERS[loop] = _Follower()
    follower.active[rec] = None
    if follower.task is None:
        follower.task = loop.create_task(follower.run())
    try:
        yield
    finally:
        follower.active.pop(rec, None)
