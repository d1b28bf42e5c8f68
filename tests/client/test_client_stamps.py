"""Reads stamped at arrival (readstamps.py), against bench/stream_server.py (the real yardstick
server, its own process, stamping every chunk with its send time on the shared monotonic clock)."""

from __future__ import annotations

import asyncio
import random
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from specbench.client import clocks, kernelstamps, readstamps
from specbench.client.readstamps import CONVERSION_ERROR_NS, StampingConnector, WallOffset, cut, select_clock
from specbench.client.stream import Recorder, chat_body, open_streamer, stream_into

STREAMS = 8
_SENT = re.compile(rb"@(\d+)")


Clamps = Counter[str] | None


def _stream_with_a_stall(url: str) -> tuple[list[Recorder], tuple[int, int], Clamps]:
    """STREAMS streams at once; once they flow, the loop is blocked for 50 ms (as a GC pause or
    another job would), so every stream's next chunks wait in its socket. Returns the records,
    the stall's start and end, and the reads not stamped with the kernel's receive time as it
    came, by why (None where the connections were not stamping ones)."""

    async def go() -> tuple[list[Recorder], tuple[int, int], Clamps]:
        body = chat_body([{"role": "user", "content": "hi"}], 200, 0.0, 0, {"ignore_eos": True})
        async with open_streamer(30, STREAMS) as session:
            recs = [Recorder() for _ in range(STREAMS)]
            tasks = [asyncio.create_task(stream_into(session, url, body, 30, r)) for r in recs]
            while any(r.t_headers is None for r in recs):  # every stream flowing (a busy box is slow)
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.02)
            stall_start = time.perf_counter_ns()
            time.sleep(0.05)  # the stall: nothing on the loop runs, bytes pile up in the sockets
            stall_end = time.perf_counter_ns()
            await asyncio.gather(*tasks)
            connector = session.connector
        return (
            recs,
            (stall_start, stall_end),
            connector.clamps if isinstance(connector, StampingConnector) else None,
        )

    return asyncio.run(go())


def _reads(rec: Recorder) -> list[tuple[int, list[int]]]:
    """Each read as (its stamp on the shared clock, the server's send times of the events in it)."""
    assert rec.error is None and rec.pieces
    return [(rec.t0 + t, [int(x) for x in _SENT.findall(data)]) for t, data in rec.pieces]


def _event(text: str) -> bytes:
    payload = b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % text.encode()
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _held_response(
    got: threading.Event, hold: threading.Event, sent: threading.Event
) -> tuple[str, list[int]]:
    """A one-shot HTTP server (a thread) that sets ``got`` once it has a streamed chat request and
    answers only once ``hold`` is set: headers and an event, then 2 ms later a second event and
    the end, then sets ``sent``. Returns its URL and the list its send times (perf_counter_ns,
    before each write) go into."""
    listener = socket.create_server(("127.0.0.1", 0))
    times: list[int] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            size = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(body) < size:
                body += conn.recv(65536)
            got.set()
            hold.wait()
            times.append(time.perf_counter_ns())
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n" + _event("a"))  # fmt: skip
            time.sleep(0.002)
            times.append(time.perf_counter_ns())
            conn.sendall(_event("b") + _event("[DONE]") + b"0\r\n\r\n")
            sent.set()
            conn.recv(1)  # until the client closes

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions", times


Reads = list[tuple[int, bytes]]


def _read_while_the_loop_is_blocked(
    once_sent: Callable[[], None] = lambda: None,
) -> tuple[list[Reads], list[list[int]], int]:
    """Two responses arrive whole while the loop is blocked (as by a GC pause or a long parse;
    ``once_sent`` runs once they are in): each one's reads, each server's send times and when
    the loop ran again."""
    hold, got, sent = (
        threading.Event(),
        [threading.Event(), threading.Event()],
        [threading.Event(), threading.Event()],
    )
    servers = [_held_response(g, hold, done) for g, done in zip(got, sent, strict=True)]

    async def go() -> tuple[list[Reads], int]:
        body = chat_body([{"role": "user", "content": "hi"}], 2, 0.0, 0, {})
        async with open_streamer(30, 2) as session:
            recs = [Recorder(), Recorder()]
            tasks = [
                asyncio.create_task(stream_into(session, url, body, 30, rec))
                for (url, _), rec in zip(servers, recs, strict=True)
            ]
            while not all(g.is_set() for g in got):  # both requests out (a busy box is slow)
                await asyncio.sleep(0.01)
            hold.set()
            for done in sent:  # the stall: the loop runs nothing until both servers have sent it all
                assert done.wait(30)
            once_sent()
            time.sleep(0.005)
            stall_end = time.perf_counter_ns()
            await asyncio.gather(*tasks)
        assert all(rec.error is None for rec in recs)
        # The stream's end is the last read's arrival (as vLLM's bench counts a request's latency
        # to its last chunk), not when the coroutine woke after the stall.
        assert all(rec.t_end == rec.pieces[-1][0] for rec in recs)
        return [[(rec.t0 + t, data) for t, data in rec.pieces] for rec in recs], stall_end

    reads, stall_end = asyncio.run(go())
    return reads, [times for _, times in servers], stall_end


@pytest.mark.skipif(not readstamps.KERNEL_STAMPS, reason="no kernel receive stamps on this platform")
def test_a_read_carries_the_kernels_receive_time_not_when_the_busy_loop_found_it() -> None:
    reads, times, stall_end = _read_while_the_loop_is_blocked()
    for response, (_, sent_b) in zip(reads, times, strict=True):
        stamp = next(t for t, data in response if b'"b"' in data)
        # Its last bytes (event b) reached the socket after b was sent and before the loop ran
        # again: the stamp says so. Stamped when the loop found the read, it would be after
        # stall_end.
        assert sent_b - CONVERSION_ERROR_NS <= stamp < stall_end


def test_without_kernel_stamps_a_read_is_stamped_when_the_loop_finds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(readstamps, "KERNEL_STAMPS", False)  # other platforms: the poll stamp
    reads, _, stall_end = _read_while_the_loop_is_blocked()
    stamps = {t for response in reads for t, _ in response}
    # Both responses waited in their sockets; the first poll after the stall found both, so their
    # reads carry that one poll's time. Stamped as each coroutine resumed, they would differ; so
    # would they if an asyncio or aiohttp release moved the private hooks readstamps.py uses.
    assert len(stamps) == 1 and stamps.pop() >= stall_end


def _assert_causal_and_ordered(recs: list[Recorder]) -> None:
    for rec in recs:
        reads = _reads(rec)
        stamps = [stamp for stamp, _ in reads]
        assert stamps == sorted(stamps)
        # A read is stamped when its last bytes arrived, so at or after the server sent the last
        # event in it (the server writes each event in one write, stamped just before), give or
        # take the conversion's stated bound.
        for stamp, sent in reads:
            assert not sent or stamp >= max(sent) - CONVERSION_ERROR_NS, (
                stamp - max(sent),
                stamp - min(sent),
                len(sent),
            )


@pytest.mark.skipif(not readstamps.KERNEL_STAMPS, reason="no kernel receive stamps on this platform")
def test_kernel_stamps_are_causal_and_ordered_on_a_live_stream(stream_server: str) -> None:
    recs, _, clamps = _stream_with_a_stall(stream_server)
    assert clamps is not None
    _assert_causal_and_ordered(recs)


def _wall_offset_now() -> int:
    offset = WallOffset()
    offset.sample()
    (epoch,) = offset.epochs
    return epoch.off_ns


@pytest.mark.skipif(not readstamps.KERNEL_STAMPS, reason="no kernel receive stamps on this platform")
@pytest.mark.parametrize("step_ns", [466_000, -466_000])
def test_a_wall_clock_stepped_while_the_loop_was_blocked_leaves_kernel_stamps_causal(
    monkeypatch: pytest.MonkeyPatch, step_ns: int
) -> None:
    """The wall clock (the kernel's and ours alike) is stepped once both responses are in and
    before the loop runs again: the kernel stamped their bytes before the step, they are read
    after it. Converted with the latest reading alone, a step forward made them early by the
    step (-460 µs)."""
    base, step_at = _wall_offset_now(), [2**63]
    real, kernel = time.time_ns, kernelstamps._stamp

    def stepped_real() -> int:
        return real() + (step_ns if time.perf_counter_ns() >= step_at[0] else 0)

    def stepped_kernel(anc: list[tuple[int, int, bytes]]) -> int:
        stamp = kernel(anc)
        return stamp + step_ns if stamp and stamp - base >= step_at[0] else stamp

    monkeypatch.setattr(readstamps, "_real", stepped_real)  # the reading after each read
    monkeypatch.setattr(clocks, "_real", stepped_real)  # the reading at each poll
    monkeypatch.setattr(kernelstamps, "_stamp", stepped_kernel)
    reads, times, stall_end = _read_while_the_loop_is_blocked(
        lambda: step_at.__setitem__(0, time.perf_counter_ns())
    )
    for response, (_, sent_b) in zip(reads, times, strict=True):
        stamp = next(t for t, data in response if b'"b"' in data)
        assert sent_b - CONVERSION_ERROR_NS <= stamp < stall_end


@pytest.mark.skipif(not readstamps.KERNEL_STAMPS, reason="no kernel receive stamps on this platform")
@pytest.mark.parametrize(("skew_ns", "what"), [(100_000_000, "late"), (-100_000_000, "early")])
def test_an_impossible_kernel_stamp_is_not_emitted(
    stream_server: str, monkeypatch: pytest.MonkeyPatch, skew_ns: int, what: str
) -> None:
    """A kernel clock 100 ms off ours (a conversion gone wrong) would stamp reads after they were
    read, or before their request or the read before them (100 ms: longer than any read here
    waits, the stall's included): they are stamped when they were read instead, and counted."""
    kernel = kernelstamps._stamp
    monkeypatch.setattr(kernelstamps, "_stamp", lambda anc: (stamp := kernel(anc)) and stamp + skew_ns)
    recs, _, clamps = _stream_with_a_stall(stream_server)
    assert clamps is not None and clamps[what] > 0
    _assert_causal_and_ordered(recs)


@pytest.mark.skipif(not readstamps.KERNEL_STAMPS, reason="no kernel receive stamps on this platform")
def test_the_kernel_stamps_loopback_reads_once_a_connector_is_made() -> None:
    assert readstamps.kernel_stamping()


@pytest.mark.skipif(not readstamps.KERNEL_STAMPS, reason="no kernel receive stamps on this platform")
def test_a_read_the_kernel_gave_no_receive_time_is_stamped_when_read(
    stream_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As before the kernel starts stamping (issue #41): the poll's time could be before bytes that
    landed while the loop read the sockets ahead of this one (1.3 ms seen)."""
    assert readstamps.kernel_stamping()  # its probe first, while the receive times still show
    monkeypatch.setattr(kernelstamps, "_stamp", lambda anc: 0)
    recs, _, clamps = _stream_with_a_stall(stream_server)
    assert clamps is not None and clamps["unstamped"] > 0
    _assert_causal_and_ordered(recs)


def _fed(gap_ns: int, step_at: int, step_ns: int, until: int) -> tuple[WallOffset, Callable[[int], int]]:
    """A WallOffset fed a reading every ``gap_ns`` (each 50-2000 ns wide, the wall clock read
    anywhere inside) up to ``until``, of a wall clock stepped by ``step_ns`` at ``step_at``; and
    the wall clock minus perf_counter at a given time."""
    rng, offset = random.Random(41), WallOffset()

    def wall_minus_perf(t: int) -> int:
        return 1_700_000_000_000_000_000 + (step_ns if t >= step_at else 0)

    for at in range(0, until, gap_ns):
        width = rng.randrange(50, 2_000)
        read = at + rng.randrange(width + 1)
        assert offset.note(at, read + wall_minus_perf(read), at + width)
    return offset, wall_minus_perf


@pytest.mark.parametrize("gap_ns", [1_000_000, 50_000_000])  # a poll a ms, a loop blocked 50 ms
@pytest.mark.parametrize("step_ns", [466_000, -466_000, 1_500, 3_000_000_000, -40_000_000])
def test_a_kernel_time_across_a_step_of_the_wall_clock_is_never_early(gap_ns: int, step_ns: int) -> None:
    step_at, until = 10 * gap_ns + gap_ns // 3, 20 * gap_ns
    offset, wall_minus_perf = _fed(gap_ns, step_at, step_ns, until)
    for arrived in range(gap_ns, until, gap_ns // 7):  # kernel times read after every reading
        times = offset.to_perf(arrived + wall_minus_perf(arrived))
        assert max(times) >= arrived - CONVERSION_ERROR_NS  # the later is never early
        assert any(abs(t - arrived) <= CONVERSION_ERROR_NS for t in times)  # the truth is one of them
        if abs(arrived - step_at) > gap_ns + abs(step_ns):  # away from the step: the one time
            assert len(times) == 1 and abs(times[0] - arrived) <= CONVERSION_ERROR_NS
    # Converted with the latest reading alone, bytes that came just before a step forward read early.
    if step_ns > CONVERSION_ERROR_NS:
        before = step_at - 1
        assert before + wall_minus_perf(before) - wall_minus_perf(until) < before - CONVERSION_ERROR_NS


def test_a_split_reading_is_dropped_and_the_tightest_kept() -> None:
    offset = WallOffset()
    assert offset.to_perf(5_000) == []  # no reading yet: nothing to convert with
    assert offset.note(0, 1_000 + 500, 1_000)  # 1 µs wide: the wall clock 500 ns ahead, ±500
    assert not offset.note(10_000, 10_000 + 900_000, 13_000)  # 3 µs: split by the scheduler
    assert offset.note(20_000, 20_050 + 560, 20_100)  # tighter, 560 ± 50: kept, the same stretch
    assert offset.to_perf(30_000 + 560) == [30_000]


def test_a_stream_is_whole_after_the_re_cut(stream_server: str) -> None:
    recs, _, _ = _stream_with_a_stall(stream_server)
    for rec in recs:
        blob = b"".join(p for _, p in rec.pieces)
        assert blob.count(b'"content":"@') == 200 and blob.rstrip().endswith(b"data: [DONE]")


def test_the_body_is_cut_at_the_marks_and_an_unmarked_tail_keeps_its_read_stamps() -> None:
    pieces = [(50, b"abc"), (60, b"defg"), (70, b"hi")]
    marks = [(1010, 2), (1020, 2), (1030, 5)]  # the second read brought no body bytes
    assert cut(pieces, marks, 1000) == [(10, b"ab"), (30, b"cde"), (60, b"fg"), (70, b"hi")]
    assert cut(pieces, [(1010, 99)], 1000) == [(10, b"abcdefghi")]


def test_sessions_closed_in_any_order_keep_the_clock_until_the_last_one_closes() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        first, second = select_clock(loop), select_clock(loop)
        clock = first.__enter__()
        assert clock is not None and second.__enter__() is clock  # one clock per selector
        first.__exit__(None, None, None)  # the first opened closes first
        before = clock.t_ns
        await asyncio.sleep(0.001)
        assert clock.t_ns > before  # still stamped by every poll for the session left open
        second.__exit__(None, None, None)
        assert clock.t_ns == 0 and "select" not in vars(loop._selector)  # type: ignore[attr-defined]

    asyncio.run(go())
