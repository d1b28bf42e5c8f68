"""Records written by a thread, so no disk work runs on the event loop that stamps the streams.

An ``fsync`` per record on the loop (about 6 ms each on an ordinary disk) stalled every open
stream at once: their chunks queued and then drained in a burst, so the client measured itself.
Here a writer thread appends whatever is queued with one ``fsync`` per batch. Durability is
unchanged for everything but a hard kill in the milliseconds a record waits for its turn or a
batch is in flight:
:meth:`RecordWriter.close` (called in a ``finally``, so also on Ctrl-C or an error) waits until
every record handed over is on disk.

The records are serialized on the loop's own thread, one a turn, after what the turn already
holds (``_drain``): never in the call that hands one over, so a finished request's next request
goes out first. The writer thread once serialized them itself, a record at a time with the
interpreter lock handed back between; at 64 streams in flight the two threads traded the lock
every record (~0.1 ms of ``json.dumps`` each) on the client's one core, and a read waited behind
that trade for up to 2 ms with its thread off the CPU. Medians of 6- and 8-round runs at 64 in
flight, 2 ms a token (bench/client_schedule.py; issue #41): chunks read two in one 0.12-0.42 %
then, 0.08-0.20 % now (the C floor client 0.08-0.17 % in the same runs).
Where no loop runs (a caller outside one) a record is serialized as it is handed over.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from typing import TYPE_CHECKING

from specbench.store.schema import RequestRecord, record_line

if TYPE_CHECKING:
    from specbench.store.sink import RecordSink


class RecordWriter:
    """Hands records to a writer thread; ``append`` and ``close`` are called from one thread."""

    def __init__(self, store: RecordSink) -> None:
        self.store = store
        self._pending: deque[RequestRecord] = deque()  # handed over, not serialized yet
        self._drainer: asyncio.Task[None] | None = None
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()  # lines for the thread
        self._error: BaseException | None = None  # the thread's: a write failed
        self._bad: Exception | None = None  # the loop's: a record could not be serialized
        self._thread = threading.Thread(target=self._run, name="specbench-records", daemon=True)
        self._thread.start()

    def append(self, record: RequestRecord) -> None:
        if self._error is not None:
            raise self._error  # the disk failed: stop measuring rather than lose records silently
        if self._bad is not None:
            raise self._bad  # a record could not be serialized: as above
        self._pending.append(record)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: nothing to keep waiting
            self._serialize_pending()
            return
        drainer = self._drainer
        if drainer is None or drainer.done() or drainer.get_loop() is not loop:  # one per loop
            self._drainer = loop.create_task(self._drain())

    async def _drain(self) -> None:
        """Serialize the records handed over, one a turn of the loop, each after the callbacks
        that turn already holds (a request's next request among them)."""
        while self._pending:
            await asyncio.sleep(0)
            if self._pending:  # close() may have taken them meanwhile
                self._serialize_next()

    def _serialize_pending(self) -> None:
        while self._pending:
            self._serialize_next()

    def _serialize_next(self) -> None:
        """The oldest record handed over, as its line, to the thread. Taken off only once its
        line is made: a Ctrl-C in ``json.dumps`` leaves it for ``close``. One that cannot be
        serialized is dropped and its error kept, raised on the next append or close; the
        records around it are still written."""
        try:
            line = record_line(self._pending[0])
        except Exception as exc:
            self._pending.popleft()
            self._bad = self._bad or exc
            return
        self._pending.popleft()
        self._queue.put(line)

    def close(self) -> None:
        """Wait until every record handed over is written; re-raise a write failure. What the
        loop had not serialized yet (it may have ended first) is serialized here, in order; the
        thread writes what it was given even where that is cut short (a second Ctrl-C)."""
        try:
            self._serialize_pending()
        finally:
            self._queue.put(None)
            self._thread.join()
        if self._error is not None:
            raise self._error
        if self._bad is not None:
            raise self._bad

    def _run(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get())
            done = batch[-1] is None
            lines = [line for line in batch if line is not None]
            if lines and self._error is None:
                try:
                    self.store.append_lines(lines)
                except BaseException as exc:  # kept and re-raised on the loop's side
                    self._error = exc
