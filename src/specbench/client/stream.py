"""Async streaming client for ``/v1/chat/completions``.

It only records: a ``perf_counter_ns`` stamp and the raw delta for every SSE event, the final
usage and engine timings, and errors as data. It never computes statistics — metrics.py does,
from these raw records, so every number can be recomputed later.

The hot path does as little as it can, because at high concurrency a slow client measures itself
(its queued chunks drain in bursts, so gaps shrink and TTFT grows): while a response streams, each
read off the socket is only stamped and kept as raw bytes (rawbody.py: not even the HTTP chunk
framing is decoded then); SSE framing and JSON are parsed off the read path, by the loop's
follower as the stream goes (follow.py) and the rest once it ends. The transport is aiohttp (its
C HTTP parser for heads and non-SSE bodies), through :mod:`specbench.transport` as every other
request: a pure-Python stack (httpx → httpcore → h11) cost 1.5–3.2× the CPU per
token in bench/client_overhead.py. The test fakes stream through this same path, over loopback.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import aiohttp

from specbench import transport
from specbench.client.follow import following
from specbench.client.readfirst import reads_first
from specbench.client.readstamps import StampingConnector, drain_for, select_clock
from specbench.store.schema import Chunk

Pieces = list[tuple[int, bytes]]  # (ns since send, raw bytes read off the socket)
Session = aiohttp.ClientSession
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE = re.compile(rb"\r\n|\n|\r")
_BREAK = re.compile(rb"[\r\n]")
# SSE events parsed per turn of the loop (one json.loads for them all): ~100 us, so no stream's
# stamp waits longer behind a finished one's parse.
_SLICE = 32
_FINAL = ("usage", "timings", "system_fingerprint", "model", "metrics")  # kept from the last event with each
INCOMPLETE = "IncompleteStream"  # error type of a stream that ended without its end


def chat_body(
    messages: list[dict[str, str]], max_tokens: int, temperature: float, seed: int, extras: dict[str, Any]
) -> dict[str, Any]:
    """A streaming request with every sampling field explicit (servers' defaults differ)."""
    return {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "top_p": 1.0,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extras,
    }


@asynccontextmanager
async def open_streamer(
    timeout: float, concurrency: int, headers: dict[str, str] | None = None
) -> AsyncIterator[aiohttp.ClientSession]:
    """The session measured requests stream through: one keep-alive connection per request in
    flight (a default pool stops at 100), loopback-friendly (no proxy or .netrc lookups)."""
    # Its connections stamp each read as it arrives (readstamps.py), not when a coroutine resumes,
    # and the loop reads them between its other callbacks (readfirst.py).
    loop = asyncio.get_running_loop()
    with select_clock(loop) as clock, reads_first(loop, clock), quiet_collector():
        # keepalive_timeout: drop an idle connection before the server does (cpp-httplib: 5 s), so a
        # request is rarely sent on a socket the server is closing.
        connector = StampingConnector(
            limit=max(concurrency, 1) + 4,
            limit_per_host=0,
            ttl_dns_cache=None,
            keepalive_timeout=1.0,
            clock=clock,
        )
        async with transport.session(connector, timeout, headers) as session:
            yield session


class _Streamers:
    """Streamers open in this process, and the collector's state before the first."""

    lock = threading.Lock()
    open = 0
    thresholds: tuple[int, int, int] = (700, 10, 10)
    enabled = True


_NEVER = 2**31 - 1


@contextmanager
def quiet_collector() -> Iterator[None]:
    """No collection while streams are read. A collection walks every object of the generations
    it collects with the loop stopped, and a pause longer than a token's gap leaves two chunks in
    one read. At 64 in flight, 2 ms a token (issue #41): full collections took 7-10 ms even with
    what existed before the requests set aside (``gc.freeze``), the middle generation 1-3 ms. The
    youngest alone grows with the run: CPython counts allocations minus deallocations, so the
    records and bodies a finished request frees let the young list grow past its threshold of
    700 (to 15-20k objects after 6 s of 1,280 requests), and its collections grew from ~0.5 to
    3-7 ms, found nothing (every one of ~1,900 collected 0 objects) and caused four in five of the
    reads that took two chunks (0.42 % of chunks with it, 0.09 % without; the C floor 0.07 %).
    The streaming path makes no cycles per request (the garbage left at the end was the same
    after 256 and 640 requests at 64 in flight; a connection lets go of a response once it is
    handed over, so one the server closed is no cycle either, its responses drained), so one
    made while streaming, by an error's traceback say, waits until the last streamer closes (a
    cell's end), when the collector comes back as it was. Should anything turn the collector on
    meanwhile, only the youngest generation runs (the thresholds) and what existed before the
    requests is set aside (``gc.freeze``)."""
    with _Streamers.lock:  # loops in several threads (an executor's) share the process's collector
        if _Streamers.open == 0:
            gc.freeze()  # what exists before the requests: never walked while they stream
            _Streamers.thresholds = young, _, _ = gc.get_threshold()
            _Streamers.enabled = gc.isenabled()
            gc.set_threshold(young, _NEVER, _NEVER)
            gc.disable()
        _Streamers.open += 1
    try:
        yield
    finally:
        with _Streamers.lock:
            _Streamers.open -= 1
            if _Streamers.open == 0:
                gc.set_threshold(*_Streamers.thresholds)
                if _Streamers.enabled:
                    gc.enable()
                gc.unfreeze()


def _delta_row(t_ns: int, choice: dict[str, Any], tokens: int | None) -> Chunk:
    """One chunk (written as the JSON list ``[t_ns, content, reasoning, tool_calls,
    finish_reason, tokens]``); ``tokens`` is the server's running count of generated tokens sent
    with the chunk (vLLM's ``continuous_usage_stats``, llama.cpp's ``timings_per_token``), None
    when it sends none. Records before schema 2 have the first five fields only."""
    delta = choice.get("delta") or {}
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    content, calls, finish = delta.get("content"), delta.get("tool_calls"), choice.get("finish_reason")
    return Chunk._make((t_ns, content, reasoning, calls, finish, tokens))  # half Chunk(...)'s cost


def _running_count(obj: dict[str, Any]) -> int | None:
    usage, timings = obj.get("usage") or {}, obj.get("timings") or {}
    value = usage.get("completion_tokens", timings.get("predicted_n"))
    return int(value) if isinstance(value, (int, float)) else None


def iter_events(pieces: Pieces) -> Iterator[tuple[int, str]]:
    """``(stamp, data)`` for every complete SSE event, stamped with the read that completed it
    (the moment a client could first have seen it). Comment and non-data lines are skipped."""
    return iter(split_events(pieces, b"")[0])


def split_events(pieces: Pieces, carry: bytes) -> tuple[list[tuple[int, str]], bytes]:
    """The complete events of ``carry`` (bytes left over by the last call) followed by
    ``pieces`` (as ``iter_events``), and the bytes after the last of them."""
    blob = carry + b"".join(p for _, p in pieces)
    ends = list(itertools.accumulate((len(p) for _, p in pieces), initial=len(carry)))[1:]
    if b"\r" in blob:  # CR or CRLF line ends: the general reading
        bounds = [(m.start(), m.end()) for m in _EVENT_END.finditer(blob)]
    else:  # LF only (every server measured): bytes.split finds the same ends, at C speed
        bounds, at = [], 0
        for event in blob.split(b"\n\n")[:-1]:
            at += len(event)
            bounds.append((at, at + 2))
            at += 2
    events, start, piece = [], 0, 0
    for stop, end in bounds:
        event, start = blob[start:stop], end
        if event.startswith(b"data: ") and not _BREAK.search(event):  # one data line: most events
            data = event[6:]
        else:
            lines = [ln[5:].removeprefix(b" ") for ln in _LINE.split(event) if ln.startswith(b"data:")]
            if not lines:
                continue
            data = b"\n".join(lines)
        while ends[piece] < end:  # events come in order: the read that completed this one
            piece += 1
        events.append((pieces[piece][0], data.decode(errors="replace")))
    return events, blob[start:]


def sse_events(pieces: Pieces) -> list[tuple[int, str]]:
    return list(iter_events(pieces))


class Recorder:
    """Accumulates one response; a plain object so partial results survive an error."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter_ns()
        self.t_headers: int | None = None
        self.t_end: int | None = None
        self.pieces: Pieces = []
        self.error: dict[str, Any] | None = None
        self.retried: str | None = None
        self.chunks: list[Chunk] = []
        self.final: dict[str, Any] = {}
        # The parse so far (parse_some): pieces split into events, the bytes of an event not yet
        # whole, events not yet taken, a JSON error (kept for the end: a transport error wins).
        self._split, self._carry = 0, b""
        self._pending: list[tuple[int, str]] = []
        self._json_error: dict[str, Any] | None = None
        self._sink: Pieces = []
        self._pull: Callable[[], None] = _nothing
        self._sunk = 0

    def _take(self, t_ns: int, data: str) -> None:
        """One SSE event into the record's chunks (or its final fields)."""
        if data.strip() == "[DONE]":
            self.final["t_done_ns"] = t_ns
        else:
            self._take_obj(t_ns, json.loads(data))

    def _take_obj(self, t_ns: int, obj: Any) -> None:
        get = obj.get
        count = _running_count(obj) if "usage" in obj or "timings" in obj else None
        if choices := get("choices"):
            append = self.chunks.append
            for choice in choices:
                append(_delta_row(t_ns, choice, count))
        final = self.final
        for key in _FINAL:
            if (value := get(key)) is not None:
                final[key] = value

    def _take_all(self, events: list[tuple[int, str]]) -> None:
        """Several events, their JSON decoded in one call (a JSON array of their data). Where one
        event is not exactly one JSON value (the array is then invalid or miscounted) each is
        decoded alone, as before: the events ahead of a bad one are kept, and the error names
        its own JSON."""
        done = [data.strip() == "[DONE]" for _, data in events]
        datas = [data for (_, data), end in zip(events, done, strict=True) if not end]
        try:
            objs = json.loads("[" + ",".join(datas) + "]")
        except json.JSONDecodeError:
            objs = None
        if not isinstance(objs, list) or len(objs) != len(datas) or None in objs:
            for t_ns, data in events:
                self._take(t_ns, data)
            return
        values = iter(objs)
        for (t_ns, _), end in zip(events, done, strict=True):
            if end:
                self.final["t_done_ns"] = t_ns
            else:
                self._take_obj(t_ns, next(values))

    def follow(self, sink: Pieces, pull: Callable[[], None]) -> None:
        """Take the body from ``sink`` (absolute stamps), which ``pull`` brings up to date."""
        self._sink, self._pull, self._sunk = sink, pull, 0

    def catch_up(self) -> None:
        """The pieces the followed sink holds by now, on this request's clock."""
        self._pull()
        sink, t0 = self._sink, self.t0
        self.pieces += [(t_ns - t0, data) for t_ns, data in sink[self._sunk :]]
        self._sunk = len(sink)

    def parse_some(self) -> bool:
        """Parse at most a slice of the events kept so far (of pieces not split yet, whole events
        only); True while more are waiting. One call never yields, so the stream's own final
        parse and the follower (follow.py) can take turns on one record."""
        if self._json_error is not None:
            return False
        if self._split < len(self.pieces):
            events, self._carry = split_events(self.pieces[self._split :], self._carry)
            self._split = len(self.pieces)
            self._pending += events
        batch, self._pending = self._pending[:_SLICE], self._pending[_SLICE:]
        try:
            self._take_all(batch)
        except (json.JSONDecodeError, AttributeError, TypeError) as exc:  # what follows is not parsed
            # An event that is not JSON, or JSON that is not an object with "choices" as a list
            # of objects: an error of the record, as every protocol failure is (the follower must
            # not die of it, and a run did before).
            self._json_error = {"type": type(exc).__name__, "message": str(exc)[:500]}
            return False
        return bool(self._pending)

    async def parse(self) -> None:
        """Parse what is left of the kept pieces a slice at a time, handing the loop back between
        slices: requests that end together (one server step ends them all) would otherwise each
        hold the loop for a whole parse while the other streams' reads wait to be stamped."""
        await asyncio.sleep(0)  # first let the reads that are ready now be stamped
        while self.parse_some():
            await asyncio.sleep(0)
        self.error = self.error or self._json_error
        self._check_end()

    def _check_end(self) -> None:
        """A whole stream ends with ``[DONE]`` or a finish reason (llama.cpp, vLLM and SGLang send
        both). One that just stops, closed cleanly mid-generation, is an error like a cut stream:
        counted as a success it entered TTFT and e2e with a generation that never finished."""
        if self.error is not None or "t_done_ns" in self.final:
            return
        if not any(chunk.finish_reason for chunk in self.chunks):
            self.error = {"type": INCOMPLETE, "message": "the stream ended without [DONE] or a finish reason"}

    def result(self) -> dict[str, Any]:
        t_end = self.t_end if self.t_end is not None else time.perf_counter_ns() - self.t0
        return {
            "t_headers_ns": self.t_headers,
            "t_end_ns": t_end,
            "chunks": self.chunks,
            **self.final,
            **({"retried": self.retried} if self.retried else {}),  # sent twice: a stale connection
            "error": self.error,
        }


def _error(exc: BaseException, timeout: float) -> dict[str, Any]:
    # A timeout says what happened (aiohttp's name a socket read), in the wording earlier records
    # carry, so old and new runs read alike.
    timed_out = transport.timed_out(exc)
    message = f"no response within {timeout:g} s" if timed_out else str(exc) or type(exc).__name__
    return {"type": type(exc).__name__, "message": message[:500]}


async def _refused(
    rec: Recorder, status: int, content_type: str | None, read: Callable[[], Awaitable[bytes]]
) -> bool:
    """Record why a response is not a stream to time (an HTTP error, another content type); False
    when it is one."""
    if status != 200:
        text = (await read()).decode(errors="replace")
        rec.error = {"type": "http_status", "status": status, "message": text[:500]}
        return True
    if "text/event-stream" not in (content_type or ""):
        # Same type name as the httpx-sse error earlier records carry, so old and new runs group alike.
        rec.error = {"type": "SSEError", "message": f"expected text/event-stream, got {content_type!r}"}
        return True
    return False


async def stream_chat(session: Session, url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """POST ``body`` and record the stream. Never raises for HTTP or protocol failures."""
    rec = Recorder()
    await stream_into(session, url, body, timeout, rec)
    await rec.parse()  # the follower (follow.py) has parsed all but the last few events
    return rec.result()


async def stream_into(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout: float, rec: Recorder
) -> None:
    for attempt in range(2):
        try:
            await _aiohttp_once(session, url, body, rec)
            return
        except transport.FAILURES as exc:
            # A stale pooled connection (transport.stale): send once more on a fresh connection,
            # timed from the new send. Anything else is data.
            if attempt == 0 and transport.stale(exc, rec.t_headers is not None or bool(rec.pieces)):
                rec.t0, rec.retried = time.perf_counter_ns(), "stale connection"
                continue
            rec.error = _error(exc, timeout)
        return


async def _aiohttp_once(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], rec: Recorder
) -> None:
    perf, t0, keep = time.perf_counter_ns, rec.t0, rec.pieces.append
    async with session.post(url, json=body) as resp:
        rec.t_headers = perf() - t0
        if await _refused(rec, resp.status, resp.headers.get("content-type"), resp.read):
            return
        drained = drain_for(resp)  # the connection hands over each read, stamped at arrival
        if drained is None:  # not a stamping connection, or it has moved on to another response
            async for data in resp.content.iter_any():
                keep((perf() - t0, data))  # the whole per-read cost: a stamp and a reference
            rec.t_end = perf() - t0
            return
        head_ns, sink, pull = drained
        rec.t_headers = head_ns - t0  # when they arrived, on the clock the chunks are stamped with
        rec.follow(sink, pull)
        try:
            with following(rec):  # parsed as it streams, off the read path (follow.py)
                await resp.content.wait_eof()  # one wakeup per response, not one per read
        finally:  # also on an error: what arrived is kept
            rec.catch_up()
        # The stream ended when its last bytes arrived, not when this coroutine woke.
        rec.t_end = rec.pieces[-1][0] if rec.pieces else perf() - t0


def _nothing() -> None:
    pass
