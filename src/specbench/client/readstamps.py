"""Stamp each read when it arrives, in the transport, not when the reading coroutine resumes.

At many streams in flight one server step makes every socket readable at once; the event loop then
runs every socket's read callback, and only afterwards resumes the coroutines waiting on them, one
after another. A stamp taken in the coroutine therefore carries the queue of every other stream's
reads and wakeups before it (1.3-1.4 ms p99 gap error at 16-64 in flight). Here the connection's
protocol (aiohttp's ``ResponseHandler``) stamps a read in ``data_received``, before it is even
parsed. Until the client has the response it notes how many body bytes the response had after
each read, and the bytes that came with the headers are cut at those counts; from then on
(``drain_for``) it takes each read's body bytes off the response as they come, with their stamp,
so the client's coroutine wakes once, at the end of the body, instead of once per read (a task
step per read per stream, which the next poll waited behind). Each piece keeps its meaning: the
bytes one read brought, stamped with that read.

The stamp itself is the moment the event loop's selector last returned (``SelectClock``): every
read callback runs in the loop iteration that follows that poll, so the bytes that made the poll
find the read were in the socket by then (bytes landing between the poll and the recv ride with
them: microseconds later, or over a millisecond where the loop first reads many other sockets, so
a poll stamp can be that early), and reads that one poll found share its time instead of queueing
behind each other's parsing (64 reads take about a millisecond to process one after another).
Where the clock is not installed (a loop without a selector) the stamp is taken in
``data_received``.

Neither asyncio nor aiohttp offers a public hook for this: the loop's ``_selector``, the
connector's protocol factory (``_factory``) and the handler's current payload (``_payload``) are
private attributes, as are the reader's protocol (``_protocol``, for a body that came whole) and
the transport's socket (``TransportSocket._sock``). tests/client/test_client_stamps.py checks the hooks
are in place, so a library that moves them fails a test instead of quietly falling back to later
stamps.

Where the kernel offers it (Linux), a read's stamp is better still: the kernel's own receive time
of the read's last bytes (``SO_TIMESTAMPNS``, taken as the packet reaches the socket, before any
process runs), so a loop busy parsing a finished response or writing a record no longer delays
the stamps of the reads it finds afterwards (0.8-2.7 ms p99 gap error at 16-64 in flight with
poll stamps on a busy 2-core box; the poll stamp is only as early as the loop's last poll). A
read that took several of the server's writes at once carries the time the last of them arrived,
as a poll stamp does. The kernel starts stamping only a while after the first socket asks (up to
2.5 s seen on a 2-core VM) and stops when the last one closes; reads that came meanwhile carried no
receive time and took the poll's, which can be before bytes that landed while the loop read the
sockets ahead (1.3 ms early seen: a read stamped before the server sent it, issue #41). So a
connector first has stamping switched on for the process and waits until it works
(``kernel_stamping``), and a read that still comes without a receive time is stamped when read.

The kernel's stamps are read by :mod:`specbench.client.kernelstamps`; the clocks (the wall clock
the kernel stamps with, put on ``perf_counter``'s; the poll's time) are
:mod:`specbench.client.clocks`'. Once a response's headers say its body is an SSE stream in
chunks, its reads are kept raw and aiohttp sees them only when the body is whole
(:mod:`specbench.client.rawbody`): per read, a stamp and the bytes.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any, cast

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.streams import StreamReader

from specbench.client.clocks import CONVERSION_ERROR_NS, SelectClock, WallOffset, select_clock, spare_offset
from specbench.client.kernelstamps import ARRIVAL, KERNEL_STAMPS, kernel_stamping, kernel_stamps
from specbench.client.rawbody import RawBody, chunked_sse
from specbench.client.readfirst import unwatch, watch

__all__ = [
    "CONVERSION_ERROR_NS",
    "KERNEL_STAMPS",
    "SelectClock",
    "WallOffset",
    "kernel_stamping",
    "select_clock",
]

Marks = list[tuple[int, int]]  # (perf_counter_ns at the read, body bytes received after it)
Sink = list[tuple[int, bytes]]
Kept = tuple[StreamReader, int, Sink, RawBody]  # a raw body's response, head stamp, sink and body
Drained = tuple[int, Sink, Callable[[], None]]
_perf = time.perf_counter_ns
_real = time.time_ns
_LAST_CHUNK = b"0\r\n\r\n"
_BROKEN = "Response payload is not completed: invalid chunk framing"
_HEAD_MAX = 65536  # a response head longer than this is not held back (aiohttp's limits apply)


class StampingHandler(ResponseHandler):
    """A ``ResponseHandler`` that stamps every read: a chunked SSE body kept raw read by read
    (rawbody.py), any other response through aiohttp's parser with one mark per read."""

    def __init__(
        self,
        *args: Any,
        clock: SelectClock | None = None,
        tally: Counter[str] | None = None,
        clamps: Counter[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.clock, self.tally, self.clamps = clock, tally, clamps
        self.kernel: socket.socket | None = None  # the socket, where its reads carry receive times
        self.floor_ns = 0  # no read on this connection arrived before this: its request, its last read
        self.marked: StreamReader | None = None
        self.marks: Marks = []
        self.head_ns = 0  # the stamp of the read that brought the marked response's headers
        self.draining: StreamReader | None = None
        self.sink: Sink = []
        self._taking = False
        # The raw path (rawbody.py): the response head held until whole (None: not holding),
        # then the body kept read by read (``_current`` its response); the responses not yet
        # handed over by ``drain`` (a body can come whole, and the connection serve the next
        # request, before its caller looks).
        self._head: bytes | None = None
        self._body: RawBody | None = None
        self._current: Kept | None = None
        self._kept: deque[Kept] = deque(maxlen=4)
        self._idle: asyncio.TimerHandle | None = None
        self._fd = -1
        self._later: Sink = []  # reads stamped, waiting for their turn (data_received)
        self._in_later = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # This module's KERNEL_STAMPS, so that switching it off here (a test, bench/client_overhead.py
        # as on another platform) switches every connection to poll stamps.
        self.kernel = kernel_stamps(transport) if KERNEL_STAMPS else None
        if self.tally is not None:
            self.tally["kernel" if self.kernel is not None else "poll"] += 1
        # Its reads run as soon as a poll finds them (readfirst.py), where the kernel stamps them:
        # a read stamped with the poll that found it keeps the loop's own poll.
        self._fd = self.kernel.fileno() if self.kernel is not None else -1
        if self._fd >= 0:
            watch(self._loop, self._fd)

    def set_response_params(self, **kwargs: Any) -> None:
        # aiohttp calls this just before it sends a request: no byte of its response came earlier.
        self.floor_ns = max(self.floor_ns, _perf())
        super().set_response_params(**kwargs)
        self._body = self._current = None  # a reused connection starts clean
        self._head = None if kwargs.get("skip_payload") else b""

    def data_received(self, data: bytes) -> None:
        self.floor_ns = t_ns = self._arrival()
        body = self._body
        if body is not None and not self._later and body.keep(t_ns, data):
            return  # the hot path: a stamp and the bytes
        if self._in_later or not (data or self._later):
            # aiohttp, handed a read below, handing one back; or resuming its paused parser
            # (``data_received(b"")``), which must run before the socket is read again: as it comes.
            self._process(t_ns, data)
            return
        # Anything more (a head for aiohttp to parse, a body's end, any other response) takes
        # its own turn of the loop, after the other reads a poll found (readfirst.py): 64 ends
        # or heads that one server step brings would otherwise be parsed in one go, ~5 ms with
        # the other streams' next reads waiting. Its stamp is taken; the order is kept.
        self._later.append((t_ns, data))
        if len(self._later) == 1:
            self._loop.call_soon(self._run_later)

    def _run_later(self) -> None:
        later, self._later = self._later, []
        self._in_later = True
        try:
            for t_ns, data in later:
                self._process(t_ns, data)
        except Exception as exc:
            # As where the transport calls data_received itself: the connection fails with it
            # (aiohttp fails the response), rather than the loop's handler logging it.
            fatal = getattr(self.transport, "_fatal_error", None)
            if fatal is None:
                raise
            fatal(exc, "Fatal error: protocol.data_received() call failed.")
        finally:
            self._in_later = False

    def eof_received(self) -> None:
        self._run_later()  # the reads before the end, before the end
        super().eof_received()

    def _process(self, t_ns: int, data: bytes) -> None:
        """One read, stamped ``t_ns``, to where it belongs: a raw body, a held head, aiohttp."""
        body = self._body
        if body is not None:
            if body.add(t_ns, data):
                self._end_body()
            return
        if self._head is not None and data:
            self._head_read(t_ns, data)
            return
        self._parsed(t_ns, data)

    def _head_read(self, t_ns: int, data: bytes) -> None:
        """Hold the response's first bytes until its head is whole; then keep a chunked SSE body
        raw, and give aiohttp the head (and anything else, all of it) to parse."""
        buf = self._head + data if self._head else data
        end = buf.find(b"\r\n\r\n")
        if end < 0 and len(buf) <= _HEAD_MAX:
            self._head = buf
            return
        self._head = None
        head = buf[: end + 4]
        if end < 0 or not chunked_sse(head):
            self._parsed(t_ns, buf)
            return
        self._parsed(t_ns, head)
        payload = self._payload
        if not isinstance(payload, StreamReader) or payload.is_eof() or payload.exception() is not None:
            if len(buf) > end + 4:  # aiohttp did not take the head as expected: it gets the rest
                self._parsed(t_ns, buf[end + 4 :])
            return
        self._start_body(payload, t_ns)
        body = self._body
        if body is not None and len(buf) > end + 4 and body.add(t_ns, buf[end + 4 :]):
            self._end_body()

    def _start_body(self, payload: StreamReader, head_ns: int) -> None:
        self._body = RawBody()
        self._current = (payload, head_ns, [], self._body)
        self._kept.append(self._current)
        self.marked, self.marks = None, []  # drain finds a raw body in _kept: no marks to hold
        # aiohttp's read timeout is re-armed per read it sees; this one is checked lazily instead
        # (a timer per stream, not a timer-heap push per read).
        self._drop_timeout()
        if self.read_timeout:
            self._idle = self._loop.call_later(self.read_timeout, self._check_idle)

    def _check_idle(self) -> None:
        timeout = self.read_timeout
        self._idle = None
        if self._body is None or not timeout:
            return
        idle = (_perf() - self.floor_ns) / 1e9
        if idle < timeout:
            self._idle = self._loop.call_later(timeout - idle, self._check_idle)
            return
        self._end_body()  # what came is kept (its whole chunks) ...
        self._on_read_timeout()  # ... and the response fails as aiohttp's own timeout fails it

    def _end_body(self) -> None:
        """The raw body is whole, or cut short: its pieces into the response's sink, then aiohttp
        told: a whole body ends its response (the last chunk alone: the data is in the pieces,
        and decoded there too it would cost as much again), broken chunk framing fails it (and
        closes the connection), and a body cut short gets nothing (the connection's loss or the
        timeout fails it)."""
        body, self._body = self._body, None
        current, self._current = self._current, None
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        if body is None or current is None:
            return
        payload, _, sink, _ = current
        sink.extend(body.take())
        if body.whole and body.framed:
            super().data_received(_LAST_CHUNK)
        elif body.whole:  # aiohttp's parser, given these bytes, fails but never ends the payload
            payload.set_exception(aiohttp.ClientPayloadError(_BROKEN))
            if self.transport is not None:
                self.transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        try:
            self._run_later()  # what came before the loss is processed before it
        finally:
            if self._fd >= 0:  # before asyncio closes the socket, whose number can then be reused
                unwatch(self._loop, self._fd)
        self._end_body()  # what came is kept before aiohttp fails the response (a body cut short)
        super().connection_lost(exc)
        # A response read through aiohttp's parser and handed over: its caller holds the sink,
        # and nothing more comes. Let go of it, as of a raw body (drain).
        self.draining, self.sink = None, []

    def _parsed(self, t_ns: int, data: bytes) -> None:
        """aiohttp's own path: the read goes through its parser, marked (or drained) with its stamp."""
        before = self._payload
        super().data_received(data)
        # A read can start a new response (its headers) or end the connection (a parse error
        # clears the payload); the bytes it fed belong to whichever payload is current after it.
        payload = self._payload or before
        if payload is None or not isinstance(payload, StreamReader):
            return
        if payload is self.draining:
            self._take(payload, t_ns)
            return
        if payload is not self.marked:  # a new response on this connection: a new list
            self.marked, self.marks, self.head_ns = payload, [], t_ns
        self.marks.append((t_ns, payload.total_bytes))

    def _arrival(self) -> int:
        """When this read's bytes arrived: on a connection the kernel stamps, its receive time (now,
        never early, for a read that came without one); elsewhere the poll that found the read,
        else now (before parsing, so that is not in it). Never before the connection's floor (its
        request, its last read)."""
        arrival = ARRIVAL
        if self.kernel is not None and arrival.sock is self.kernel:
            arrival.sock = None  # taken: a later call without a read (aiohttp resuming) is no read
            stamp = self._on_perf(arrival.real_ns) if arrival.real_ns else None
            if stamp is None:
                # No receive time (the kernel not stamping yet): the poll's time can be before
                # bytes that landed while the loop read the sockets ahead of this one (-1.3 ms
                # seen), so the read's own time, late but never early.
                self._count("unstamped" if not arrival.real_ns else "no_offset")
                return _perf()
            return stamp
        clock = self.clock
        return max((clock.t_ns if clock is not None else 0) or _perf(), self.floor_ns)

    def _on_perf(self, real_ns: int) -> int | None:
        """The kernel's receive time ``real_ns`` on ``perf_counter``'s clock, kept between the
        connection's floor and now (the read itself: its bytes came before it); now where every
        time it can be is impossible (counted); None where the clocks gave no tight reading."""
        offset = self.clock.offset if self.clock is not None else spare_offset()
        # A reading after the read, whose bytes came before it: a step of the wall clock since
        # the last reading is seen before they are converted (with one taken before the read,
        # bytes that landed after a step would be off by the whole step).
        before, real, now = _perf(), _real(), _perf()
        if not offset.note(before, real, now) and not offset.sample():
            return None
        times = offset.to_perf(real_ns)
        floor, slack = self.floor_ns, CONVERSION_ERROR_NS
        if len(times) == 1 and floor - slack <= (t := times[0]) <= now + slack:
            return min(max(t, floor), now)  # no step near and within the bounds: the common case
        return self._settle(times, floor, now)

    def _settle(self, times: list[int], floor: int, now: int) -> int:
        """The stamp of a read whose kernel time can be several times (a step of the wall clock)
        or only impossible ones, counted: the latest possible one, else now; never early."""
        slack = CONVERSION_ERROR_NS
        fits = [t for t in times if floor - slack <= t <= now + slack]
        if not fits:
            self._count("late" if min(times) > now else "early")
            return now
        if max(fits) - min(fits) > slack:  # a step leaves both: the later is never early
            self._count("ambiguous")
        return min(max(max(fits), floor), now)

    def _count(self, what: str) -> None:
        if self.clamps is not None:
            self.clamps[what] += 1

    def _take(self, payload: StreamReader, t_ns: int) -> None:
        """Move the payload's buffered bytes into the sink. Taking them can resume aiohttp's
        parser, which calls ``data_received`` again from inside ``read_nowait``: that inner call
        leaves the bytes to this loop rather than read the buffer being read."""
        if self._taking:
            return
        self._taking = True
        try:
            # An exception on the payload would be raised by read_nowait; the reader sees it.
            while payload.exception() is None and (body := payload.read_nowait()):
                self.sink.append((t_ns, body))
        finally:
            self._taking = False

    def drain(self, payload: StreamReader) -> Drained | None:
        """When ``payload``'s headers arrived, the list its body arrives in read by read as
        ``(perf_counter_ns, bytes)``, and a call that brings that list up to date: a body kept
        raw fills it when called and when whole; otherwise from now on the payload's bytes are
        taken off it read by read (what came before cut at the marks) and the call does nothing.
        None where this connection is not receiving ``payload`` any more, or it failed.

        A response is let go of once handed over (the caller holds the sink and the call): a raw
        body's at once, the marks of one read through aiohttp's parser at once and the response
        itself when the connection is lost. So a closed connection whose responses were drained
        is no cycle (the response's reader refers to its protocol), which only a collection
        frees, and none runs while streams are read (``stream.quiet_collector``): a cell whose
        server closed every connection kept every response's reads until it ended."""
        for entry in self._kept:
            kept, head_ns, sink, body = entry
            if kept is payload:
                self._kept.remove(entry)
                return head_ns, sink, functools.partial(_pull, body, sink)
        if payload is not self.marked or payload.exception() is not None:
            return None
        self.draining, self.sink = payload, []
        self._take(payload, _perf())
        self.sink[:] = cut(self.sink, self.marks, 0)
        self.marked, self.marks = None, []  # taken from here on, read by read: no marks needed
        return self.head_ns, self.sink, _no_pull


class StampingConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` whose connections are ``StampingHandler`` protocols, stamping with
    ``clock`` where given."""

    def __init__(self, *args: Any, clock: SelectClock | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if KERNEL_STAMPS:
            kernel_stamping()  # before any request: their first reads carry receive times too
        self.tally: Counter[str] = Counter()  # connections by what stamps their reads
        # Reads of kernel-stamping connections not stamped with the kernel's time as it came
        # (StampingHandler._arrival): "ambiguous" (either side of a step of the wall clock, the
        # later kept), "early", "late" (impossible), "unstamped" (no receive time), "no_offset"
        # (no tight reading of the clocks): all but the first stamped when read, never early.
        self.clamps: Counter[str] = Counter()
        factory = functools.partial(
            StampingHandler, loop=self._loop, clock=clock, tally=self.tally, clamps=self.clamps
        )
        self._factory = cast("functools.partial[ResponseHandler]", factory)

    def stamps(self) -> str:
        """What stamped the reads of the connections made so far: "kernel", "poll", "mixed"
        (some of each) or "none" (no connection yet)."""
        return combined_stamps([kind for kind, n in self.tally.items() if n])


def stamps_of(session: Any) -> str:
    """What stamped the reads of ``session``'s connections (``StampingConnector.stamps``);
    "coroutine" for a session that stamps as its coroutine reads (another connector)."""
    connector = getattr(session, "connector", None)
    return connector.stamps() if isinstance(connector, StampingConnector) else "coroutine"


def clamps_of(session: Any) -> dict[str, int]:
    """How many reads of ``session``'s connections were not stamped with the kernel's receive time
    as it came, by why (``StampingConnector.clamps``); empty where none or another connector."""
    connector = getattr(session, "connector", None)
    return dict(+connector.clamps) if isinstance(connector, StampingConnector) else {}


def combined_stamps(sources: list[str]) -> str:
    """One word for the stamps of several connections or sessions (client worker processes)."""
    kinds = {s for s in sources if s != "none"}
    return kinds.pop() if len(kinds) == 1 else "mixed" if kinds else "none"


def _pull(body: RawBody, sink: Sink) -> None:
    sink.extend(body.take())


def _no_pull() -> None:
    pass


def drain_for(resp: aiohttp.ClientResponse) -> Drained | None:
    """When ``resp``'s headers arrived, the list its body will arrive in, read by read, both with
    absolute stamps, and the call that brings the list up to date (``StampingHandler.drain``); the
    list is complete once ``resp.content.wait_eof()`` returns. None where
    its connection does not stamp (another connector) or has already begun another response: read
    it then, stamped as read."""
    conn = resp.connection
    # A body that came whole before the caller looked has given its connection back to the pool;
    # its reader still knows the protocol (private), whose kept body or marks still hold unless
    # reused.
    proto = conn.protocol if conn is not None else getattr(resp.content, "_protocol", None)
    if not isinstance(proto, StampingHandler):
        return None
    return proto.drain(resp.content)


def cut(pieces: list[tuple[int, bytes]], marks: Marks, t0: int) -> list[tuple[int, bytes]]:
    """Re-cut the body read as ``pieces`` at the marks: one piece per read that added body bytes,
    stamped with that read (ns since ``t0``). Bytes past the last mark (none unless the marks
    stopped early) keep the stamps they were read with."""
    blob = b"".join(p for _, p in pieces)
    out, start = [], 0
    for t_ns, total in marks:
        end = min(total, len(blob))
        if end > start:
            out.append((t_ns - t0, blob[start:end]))
            start = end
    if start < len(blob):
        done = 0
        for t_read, p in pieces:  # keep the read-time stamps of the uncovered tail
            done += len(p)
            if done > start:
                out.append((t_read, p[max(0, len(p) - (done - start)) :]))
                start = done
    return out
