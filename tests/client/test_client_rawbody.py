"""A chunked body kept raw read by read (client/rawbody.py): decoded whole, each read's share
stamped with that read, ended exactly when its last chunk and trailers came."""

from __future__ import annotations

import asyncio
import itertools
import random
import socket
import threading
import time
from typing import Any

import pytest

from specbench.client.rawbody import RawBody, chunked_sse
from specbench.client.readstamps import StampingHandler
from specbench.client.stream import Recorder, chat_body, open_streamer, stream_chat, stream_into


def _chunked(payloads: list[bytes], trailers: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n" + trailers + b"\r\n"


def _data_positions(wire: bytes) -> set[int]:
    """Where chunk data lies in ``wire`` (a plain reading of the framing, for comparison)."""
    out, pos = set[int](), 0
    while (size := int(wire[pos : wire.index(b"\r\n", pos)], 16)) > 0:
        start = wire.index(b"\r\n", pos) + 2
        out.update(range(start, start + size))
        pos = start + size + 2
    return out


def _events(n: int, eol: bytes) -> list[bytes]:
    return [b'data: {"i": %d}%s%s' % (i, eol, eol) for i in range(n)]


def _cuts(rng: random.Random, size: int, reads: int) -> list[int]:
    return sorted({0, size, *(rng.randrange(1, size) for _ in range(reads))})


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
@pytest.mark.parametrize("seed", range(20))
def test_a_body_split_anywhere_is_decoded_whole_with_each_reads_stamp(eol: bytes, seed: int) -> None:
    rng = random.Random(seed)
    payloads = _events(rng.randrange(1, 40), eol)
    wire = _chunked(payloads, b"x-t: 1\r\n" if seed % 3 == 0 else b"")
    cuts = _cuts(rng, len(wire), rng.randrange(1, 60))
    body, taken, whole_at = RawBody(), [], []
    for i, (a, b) in enumerate(itertools.pairwise(cuts)):
        whole_at.append(body.add(1000 + i, wire[a:b]))
        if rng.random() < 0.3:  # taken as it streams, as well as at the end
            taken += body.take()
    taken += body.take()
    assert whole_at == [False] * (len(whole_at) - 1) + [True]  # whole on its last read, not before
    assert body.framed
    assert b"".join(p for _, p in taken) == b"".join(payloads)
    stamps = [t for t, _ in taken]
    assert stamps == sorted(stamps)
    data = _data_positions(wire)
    by_read: dict[int, bytes] = {}
    for t, piece in taken:
        by_read[t] = by_read.get(t, b"") + piece
    for t, got in by_read.items():  # each read's share is the chunk data that came with it
        a, b = cuts[t - 1000], cuts[t - 1000 + 1]
        assert got == bytes(wire[i] for i in range(a, b) if i in data)


def test_a_body_cut_short_gives_its_whole_chunks_and_is_not_whole() -> None:
    wire = _chunked(_events(3, b"\n"))
    body = RawBody()
    assert not body.add(1, wire[: len(wire) - 12])
    assert b"".join(p for _, p in body.take()).count(b"data:") == 2  # the third chunk is cut
    assert not body.whole


def test_broken_framing_ends_the_raw_body_for_aiohttp_to_fail() -> None:
    body = RawBody()
    assert body.add(1, b"zz\r\ndata: x\n\n\r\n0\r\n\r\n")
    assert not body.framed


def test_only_a_200_chunked_uncompressed_event_stream_is_kept_raw() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"
    assert chunked_sse(head)
    assert not chunked_sse(head.replace(b"200 OK", b"500 Internal Server Error"))
    assert not chunked_sse(head + b"\r\ncontent-encoding: gzip")
    assert not chunked_sse(head.replace(b"text/event-stream", b"application/json"))
    assert not chunked_sse(head.replace(b"Transfer-Encoding: chunked", b"Content-Length: 10"))


def _one_shot_server(parts: list[bytes]) -> str:
    """A thread that answers one request with ``parts``, 50 ms apart, then closes."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            for part in parts:
                conn.sendall(part)
                time.sleep(0.05)

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions"


_TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _stream(parts: list[bytes]) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        body = chat_body([{"role": "user", "content": "hi"}], 4, 0.0, 0, {})
        async with open_streamer(5, 1) as session:
            return await asyncio.wait_for(stream_chat(session, _one_shot_server(parts), body, 5), 10)

    return asyncio.run(go())


def test_broken_chunk_framing_mid_stream_is_an_error_not_a_wait() -> None:
    """aiohttp's parser, fed a bad chunk size after the response began, fails without ending the
    payload (a wait until the read timeout); kept raw, the stream fails at once, what came kept."""
    first = _chunked([_TOKEN])[: -len(b"0\r\n\r\n")]
    result = _stream([_HEAD + first, b"zz\r\ndata: {}\n\n\r\n0\r\n\r\n"])
    assert result["error"]["type"] == "ClientPayloadError"
    assert [c[1] for c in result["chunks"]] == ["a"]  # what came before is kept


def test_a_raw_stream_cut_short_keeps_its_whole_chunks_and_fails_as_before() -> None:
    wire = _chunked([_TOKEN] * 3)
    result = _stream([_HEAD + wire[:-20]])  # the connection closes mid-chunk
    assert result["error"]["type"] == "ClientPayloadError"
    assert [c[1] for c in result["chunks"]] == ["a", "a"]


def test_a_stream_is_parsed_while_it_streams(stream_server: str) -> None:
    """The follower (follow.py) parses a stream as it goes: its record has chunks long before the
    server's 200th token (0.4 s at 2 ms a token), and the end leaves only the last few events."""

    async def go() -> tuple[int, Recorder]:
        body = chat_body([{"role": "user", "content": "hi"}], 200, 0.0, 0, {"ignore_eos": True})
        rec = Recorder()
        async with open_streamer(30, 1) as session:
            task = asyncio.create_task(stream_into(session, stream_server, body, 30, rec))
            while not rec.chunks and not task.done():
                await asyncio.sleep(0.005)
            seen = 0 if task.done() else len(rec.chunks)
            await task
        await rec.parse()
        return seen, rec

    seen, rec = asyncio.run(go())
    assert 0 < seen < 200  # chunks parsed while the stream was still going
    assert rec.error is None and len(rec.chunks) == 201  # the role chunk and 200 tokens, whole


def test_a_response_whose_head_body_and_end_came_in_one_read_is_whole() -> None:
    """The head and the body's end are each processed on their own turn of the loop
    (readstamps.StampingHandler._run_later), after the reads a poll found; in one read, with the
    connection closing right after, the stream is still whole and in order."""
    wire = _chunked([_TOKEN.replace(b'"a"', b'"%d"' % i) for i in range(5)] + [b"data: [DONE]\n\n"])
    result = _stream([_HEAD + wire])
    assert result["error"] is None
    assert [c[1] for c in result["chunks"]] == ["0", "1", "2", "3", "4"]
    assert "t_done_ns" in result


def test_reads_waiting_for_their_turn_are_processed_before_the_end_of_file() -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        with b:
            transport, proto = await loop.create_connection(lambda: StampingHandler(loop=loop), sock=a)
            proto.set_response_params()
            proto.data_received(_HEAD)  # a head for aiohttp: waits for its own turn ...
            assert proto._later and proto._payload is None
            proto.eof_received()  # ... but not past the end of the connection's bytes
            assert not proto._later and proto._payload is not None
            transport.close()

    asyncio.run(go())
