"""Reads stamped at arrival (readstamps.py), against bench/stream_server.py (the real yardstick
server, its own process, stamping every chunk with its send time on the shared monotonic clock)."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench.client import _aiohttp_stream, _Recorder, chat_body, open_streamer
from specbench.readstamps import StampingConnector, cut, select_clock

SERVER = Path(__file__).resolve().parents[1] / "bench" / "stream_server.py"
STREAMS = 8
_SENT = re.compile(rb"@(\d+)")


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, str(SERVER), "--port", str(port), "--interval-ms", "2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        proc.terminate()
        proc.wait()


def _stream_with_a_stall(url: str) -> tuple[list[_Recorder], int, bool]:
    """STREAMS streams at once; once they flow, the loop is blocked for 50 ms (as a GC pause or
    another job would), so every stream's next chunks wait in its socket. Returns the records,
    the end of the stall, and whether the connections were stamping ones."""

    async def go() -> tuple[list[_Recorder], int, bool]:
        body = chat_body([{"role": "user", "content": "hi"}], 200, 0.0, 0, {"ignore_eos": True})
        async with open_streamer(30, STREAMS) as session:
            recs = [_Recorder() for _ in range(STREAMS)]
            tasks = [asyncio.create_task(_aiohttp_stream(session, url, body, 30, r)) for r in recs]
            await asyncio.sleep(0.15)
            time.sleep(0.05)  # the stall: nothing on the loop runs, bytes pile up in the sockets
            stall_end = time.perf_counter_ns()
            await asyncio.gather(*tasks)
            stamping = isinstance(session.connector, StampingConnector)
        return recs, stall_end, stamping

    return asyncio.run(go())


def test_reads_are_stamped_when_the_loop_finds_them_not_when_each_coroutine_resumes(
    server_url: str,
) -> None:
    recs, stall_end, stamping = _stream_with_a_stall(server_url)
    assert stamping
    after = []
    for rec in recs:
        assert rec.error is None and rec.pieces
        stamps = [rec.t0 + t for t, _ in rec.pieces]
        assert stamps == sorted(stamps)
        # Causality on the shared clock: no read is stamped before the server sent the bytes that
        # made the poll find it (its first event: the server writes each event in one write).
        # Later events in the same read may have landed between the poll and the recv, a few µs
        # after the stamp: the stamp is when the loop found the read, by design (readstamps.py).
        for stamp, (_, data) in zip(stamps, rec.pieces, strict=True):
            sent = _SENT.findall(data)
            assert not sent or int(sent[0]) <= stamp
        after.append(next(s for s in stamps if s > stall_end))
    # Identity: the first poll after the stall found every stream's waiting bytes, so their reads
    # carry that one poll's time. Stamped as each coroutine resumed, all eight would differ; so
    # would they if an asyncio or aiohttp release moved the private hooks readstamps.py uses.
    assert len(set(after)) == 1


def test_a_stream_is_whole_after_the_re_cut(server_url: str) -> None:
    recs, _, _ = _stream_with_a_stall(server_url)
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
