"""Records written by a thread, so no disk work runs on the event loop that stamps the streams.

An ``fsync`` per record on the loop (about 6 ms each on an ordinary disk) stalled every open
stream at once: their chunks queued and then drained in a burst, so the client measured itself.
Here the loop only enqueues a completed record; a writer thread drains whatever is queued and
appends it with one ``fsync`` per batch, serializing one record at a time so the loop's thread
is never kept off the GIL for more than one record's ``json.dumps``. Durability is unchanged for
everything but a hard kill in the few milliseconds a batch is in flight:
:meth:`RecordWriter.close` (called in a ``finally``, so also on Ctrl-C or an error) waits until
every queued record is on disk.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

from specbench.store.schema import RequestRecord, record_line

if TYPE_CHECKING:
    from specbench.store.sink import RecordSink

_HAND_OVER_S = 50e-6  # long enough for a thread waiting on the GIL to wake and take it


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
                    self.store.append_lines(self._serialize(records))
                except BaseException as exc:  # kept and re-raised on the loop's side
                    self._error = exc

    @staticmethod
    def _serialize(records: list[RequestRecord]) -> list[str]:
        """One record at a time, handing the GIL back after each: ``json.dumps`` (~0.1 ms for
        a 256-chunk record) never lets go of it, and the loop, woken by a read, would otherwise
        wait for the whole batch before it could stamp that read."""
        lines = []
        for record in records:
            lines.append(record_line(record))
            # Not sleep(0): released and retaken at once, the GIL rarely reaches the waiting thread.
            time.sleep(_HAND_OVER_S)
        return lines
