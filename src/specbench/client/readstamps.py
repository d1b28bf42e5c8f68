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
find the read were in the socket by then (bytes landing between the poll and the recv, microseconds
later, ride with them), and reads that one poll found share its time instead of queueing behind each other's
parsing (64 reads take about a millisecond to process one after another). Where the clock is not
installed (a loop without a selector) the stamp is taken in ``data_received``.

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
as a poll stamp does. The kernel clock is the wall clock; it is put on ``perf_counter``'s clock by
reading both back to back at each poll.
"""

from __future__ import annotations

import asyncio
import functools
import platform
import socket
import struct
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.streams import StreamReader

Marks = list[tuple[int, int]]  # (perf_counter_ns at the read, body bytes received after it)
_perf = time.perf_counter_ns


_real = time.time_ns

# Linux's SO_TIMESTAMPNS (== SCM_TIMESTAMPNS) where the generic socket numbers apply; the socket
# module does not name it. Alpha, MIPS, PA-RISC and SPARC number it otherwise: poll stamps there.
_SO_TIMESTAMPNS = 35
_GENERIC = {"x86_64", "amd64", "aarch64", "arm64", "riscv64", "s390x", "ppc64le", "loongarch64"}
KERNEL_STAMPS = sys.platform == "linux" and platform.machine().lower() in _GENERIC and sys.maxsize > 2**32
_ANC_SIZE = socket.CMSG_SPACE(16) if KERNEL_STAMPS else 0  # one struct timespec (two int64)
_timespec = struct.Struct("qq").unpack_from


class _Arrival(threading.local):
    """The kernel's receive time (wall clock, ns) of the last bytes this thread's last read took
    (0 where the read carried none), and the socket read. A loop's read callback calls ``recv``
    and then the protocol's ``data_received`` back to back, so a protocol takes the stamp only
    when it is its own socket's (a TLS layer or aiohttp may hand bytes over later)."""

    real_ns = 0
    sock: socket.socket | None = None


_ARRIVAL = _Arrival()


class KernelStampSocket(socket.socket):
    """A socket whose reads also keep the kernel's receive time (``_ARRIVAL``). Same layout as
    ``socket.socket``, so an open socket's class can be switched (``kernel_stamps``)."""

    __slots__ = ()

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, anc, _, _ = self.recvmsg(bufsize, _ANC_SIZE, flags)
        arrival = _ARRIVAL
        arrival.real_ns, arrival.sock = _stamp(anc), self
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:  # SSL transports
        view = memoryview(buffer)
        n, anc, _, _ = self.recvmsg_into([view[:nbytes] if nbytes else view], _ANC_SIZE, flags)
        arrival = _ARRIVAL
        arrival.real_ns, arrival.sock = _stamp(anc), self
        return n


def _stamp(anc: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = _timespec(data)
            return int(sec) * 1_000_000_000 + int(nsec)
    return 0


def kernel_stamps(transport: Any) -> socket.socket | None:
    """Have ``transport``'s socket keep the kernel's receive time of each read, and return it;
    None where it cannot (another platform or loop, a socket asyncio does not hand out as a plain
    ``socket.socket``)."""
    if not KERNEL_STAMPS:
        return None
    wrapped = transport.get_extra_info("socket")
    sock = getattr(wrapped, "_sock", wrapped)  # asyncio hands out a TransportSocket around it
    if type(sock) is KernelStampSocket:  # a second protocol on the same socket (TLS via a proxy)
        return sock
    if type(sock) is not socket.socket:
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return None
    sock.__class__ = KernelStampSocket
    return sock


_TIGHT_NS = 2_000  # two clock reads further apart than this were split by the scheduler


def real_offset() -> int:
    """The wall clock minus ``perf_counter`` (ns), from the tightest of a few back-to-back reads:
    a process preempted between two reads would otherwise shift every kernel stamp by the pause
    (35-43 µs seen on a busy 2-core box)."""
    best = None
    for _ in range(5):
        before, real, after = _perf(), _real(), _perf()
        if best is None or after - before < best[0]:
            best = (after - before, real - ((before + after) >> 1))
    assert best is not None
    return best[1]


class SelectClock:
    """``perf_counter_ns`` when the loop's selector last returned (0 once taken off), and the wall
    clock minus it then (``real_off``, to put kernel stamps on the same clock). One per selector,
    shared by every session open on that loop (``select_clock``), so sessions that close in any
    order never leave one reading a clock that stopped."""

    def __init__(self, selector: Any) -> None:
        self.t_ns, self.real_off, self.users, self._selector = 0, real_offset(), 0, selector
        inner, self._before = selector.select, selector.__dict__.get("select")

        def select(timeout: float | None = None) -> Any:
            events = inner(timeout)
            self.t_ns = t_ns = _perf()
            # Follows a step of the wall clock; a reading the scheduler split is not taken.
            real, after = _real(), _perf()
            if after - t_ns < _TIGHT_NS:
                self.real_off = real - ((t_ns + after) >> 1)
            return events

        selector.select = select

    def remove(self) -> None:
        if self._before is None:
            del self._selector.select  # the instance attribute: the class's method shows again
        else:
            self._selector.select = self._before
        self.t_ns = 0


_CLOCKS: weakref.WeakKeyDictionary[Any, SelectClock] = weakref.WeakKeyDictionary()


@contextmanager
def select_clock(loop: asyncio.AbstractEventLoop) -> Iterator[SelectClock | None]:
    """The clock of ``loop``'s selector while the block runs; None on a loop without one."""
    selector = getattr(loop, "_selector", None)
    if selector is None or not callable(getattr(selector, "select", None)):
        yield None
        return
    clock = _CLOCKS.get(selector)
    if clock is None:
        clock = _CLOCKS[selector] = SelectClock(selector)
    clock.users += 1
    try:
        yield clock
    finally:
        clock.users -= 1
        if clock.users == 0:
            clock.remove()
            del _CLOCKS[selector]


class StampingHandler(ResponseHandler):
    """A ``ResponseHandler`` that keeps, for the response being received, one mark per read."""

    def __init__(
        self, *args: Any, clock: SelectClock | None = None, tally: Counter[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.clock, self.tally = clock, tally
        self.kernel: socket.socket | None = None  # the socket, where its reads carry receive times
        self.marked: StreamReader | None = None
        self.marks: Marks = []
        self.head_ns = 0  # the stamp of the read that brought the marked response's headers
        self.draining: StreamReader | None = None
        self.sink: list[tuple[int, bytes]] = []
        self._taking = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.kernel = kernel_stamps(transport)
        if self.tally is not None:
            self.tally["kernel" if self.kernel is not None else "poll"] += 1

    def data_received(self, data: bytes) -> None:
        t_ns = self._arrival()
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
        """When this read's bytes arrived: the kernel's receive time where the socket keeps it,
        else the poll that found the read, else now (before parsing, so that is not in it)."""
        clock = self.clock
        arrival = _ARRIVAL
        if self.kernel is not None and arrival.sock is self.kernel and (real := arrival.real_ns):
            return real - (clock.real_off if clock is not None and clock.t_ns else real_offset())
        return (clock.t_ns if clock is not None else 0) or _perf()

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

    def drain(self, payload: StreamReader) -> list[tuple[int, bytes]] | None:
        """From now on take ``payload``'s bytes off it read by read into the returned list as
        ``(perf_counter_ns, bytes)``; what came before is cut at the marks. None where this
        connection is not receiving ``payload`` any more, or it failed."""
        if payload is not self.marked or payload.exception() is not None:
            return None
        self.draining, self.sink = payload, []
        self._take(payload, _perf())
        self.sink[:] = cut(self.sink, self.marks, 0)
        return self.sink


class StampingConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` whose connections are ``StampingHandler`` protocols, stamping with
    ``clock`` where given."""

    def __init__(self, *args: Any, clock: SelectClock | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally: Counter[str] = Counter()  # connections by what stamps their reads
        factory = functools.partial(StampingHandler, loop=self._loop, clock=clock, tally=self.tally)
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


def combined_stamps(sources: list[str]) -> str:
    """One word for the stamps of several connections or sessions (client worker processes)."""
    kinds = {s for s in sources if s != "none"}
    return kinds.pop() if len(kinds) == 1 else "mixed" if kinds else "none"


def drain_for(resp: aiohttp.ClientResponse) -> tuple[int, list[tuple[int, bytes]]] | None:
    """When ``resp``'s headers arrived and the list its body will arrive in, read by read, both
    with absolute stamps; the list is complete once ``resp.content.wait_eof()`` returns. None where
    its connection does not stamp (another connector) or has already begun another response: read
    it then, stamped as read."""
    conn = resp.connection
    # A body that came whole before the caller looked has given its connection back to the pool;
    # its reader still knows the protocol (private), whose marks still hold unless reused.
    proto = conn.protocol if conn is not None else getattr(resp.content, "_protocol", None)
    if not isinstance(proto, StampingHandler) or (sink := proto.drain(resp.content)) is None:
        return None
    return proto.head_ns, sink


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
