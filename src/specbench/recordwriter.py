"""Records written by a thread, so no disk work runs on the event loop that stamps the streams.

An ``fsync`` per record on the loop (about 6 ms each on an ordinary disk) stalled every open
stream at once: their chunks queued and then drained in a burst, so the client measured itself.
Here the loop only enqueues a completed record; a writer thread drains whatever is queued and
appends it with one ``fsync`` per batch. Durability is unchanged for everything but a hard kill
in the few milliseconds a batch is in flight: :meth:`RecordWriter.close` (called in a ``finally``,
so also on Ctrl-C or an error) waits until every queued record is on disk.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING

from specbench.schema import RequestRecord

if TYPE_CHECKING:
    from specbench.cellwork import RecordSink


class RecordWriter:
    def __init__(self, store: RecordSink) -> None:
        self.store = store
        self._queue: queue.SimpleQueue[RequestRecord | None] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="specbench-records", daemon=True)
        self._thread.start()

    def append(self, record: RequestRecord) -> None:
        if self._error is not None:
            raise self._error  # the disk failed: stop measuring rather than lose records silently
        self._queue.put(record)

    def close(self) -> None:
        """Wait until every record handed over is written; re-raise a write failure."""
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get())
            done = batch[-1] is None
            records = [r for r in batch if r is not None]
            if records and self._error is None:
                try:
                    self.store.append_records(records)
                except BaseException as exc:  # kept and re-raised on the loop's side
                    self._error = exc
