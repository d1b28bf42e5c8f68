"""The streaming hot path: raw reads kept, parsed after the stream; a stale connection sent once
more; records written off the loop. The aiohttp server here is a FAKE (an in-process aiohttp.web
app splitting events at awkward places) and is named so."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from specbench import SCHEMA_VERSION
from specbench.client.readstamps import StampingHandler
from specbench.client.stream import Recorder, chat_body, open_streamer, split_events, sse_events, stream_chat
from specbench.errors import StoreError
from specbench.store.recordwriter import RecordWriter
from specbench.store.rundir import RunStore
from specbench.store.schema import Chunk

EVENTS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
    {"choices": [{"index": 0, "delta": {"content": "ab"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"reasoning_content": "r"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "c"}, "finish_reason": "length"}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
]
WIRE = (
    b"".join(f"data: {json.dumps(e)}\r\n\r\n".encode() for e in EVENTS) + b": keep-alive\n\ndata: [DONE]\n\n"
)


def test_events_are_stamped_by_the_read_that_completed_them() -> None:
    # Split mid-line, mid-terminator ("\r\n" | "\r\n") and with two events in one read.
    cut1, cut2 = WIRE.index(b"ab"), WIRE.index(b"\r\n\r\n", WIRE.index(b"ab")) + 2
    pieces = [(10, WIRE[:cut1]), (20, WIRE[cut1:cut2]), (30, WIRE[cut2:])]
    events = sse_events(pieces)
    assert [t for t, _ in events] == [10, 30, 30, 30, 30, 30]
    assert json.loads(events[1][1]) == EVENTS[1] and events[-1][1] == "[DONE]"


@pytest.mark.parametrize("seed", range(10))
def test_lf_and_crlf_streams_split_anywhere_give_the_same_events_in_slices(seed: int) -> None:
    """LF-only streams take a faster split (split_events): the same events and stamps as the
    CRLF reading, whether the events are split in one go or as they stream (a carry between)."""
    rng = random.Random(seed)
    results = []
    for eol in (b"\n", b"\r\n"):
        wire = WIRE.replace(b"\r\n", b"\n").replace(b"\n", eol) + b"data: multi\nline: x\ndata: two" + eol * 2
        cuts = sorted({0, len(wire), *(rng.randrange(1, len(wire)) for _ in range(8))})
        pieces = [(i, wire[a:b]) for i, (a, b) in enumerate(itertools.pairwise(cuts))]
        whole = sse_events(pieces)
        streamed, carry = [], b""
        for piece in pieces:
            events, carry = split_events([piece], carry)
            streamed += events
        assert streamed == whole
        results.append([data for _, data in whole])
    assert results[0] == results[1]
    assert results[0][-1] == "multi\ntwo" and results[0][-2] == "[DONE]"


def test_an_event_that_is_json_but_no_object_is_an_error_of_the_record_not_a_crash() -> None:
    rec = Recorder()
    rec.pieces = [(1, b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n'), (2, b"data: [1, 2]\n\n")]
    asyncio.run(rec.parse())
    assert rec.error is not None and rec.error["type"] == "AttributeError"
    assert [c.content for c in rec.chunks] == ["a"]  # what came before it is kept


def test_a_trailing_partial_event_is_not_an_event() -> None:
    assert sse_events([(1, b'data: {"a": 1}\n\ndata: {"b"')]) == [(1, '{"a": 1}')]


def test_a_finished_stream_is_parsed_without_holding_the_loop() -> None:
    """Requests that end on the same server step must not each hold the loop for a whole parse
    while the others' reads wait to be stamped: the parse hands the loop back between slices."""
    token = {"choices": [{"index": 0, "delta": {"content": "t"}, "finish_reason": None}]}
    wire = f"data: {json.dumps(token)}\n\n".encode() * 256
    rec = Recorder()
    rec.pieces = [(i, wire[i * 64 : (i + 1) * 64]) for i in range(len(wire) // 64 + 1)]
    turns = 0

    async def other_stream() -> None:  # counts the turns of the loop it got during the parse
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async def main() -> None:
        other = asyncio.create_task(other_stream())
        await asyncio.sleep(0)
        await rec.parse()
        other.cancel()

    asyncio.run(main())
    assert len(rec.result()["chunks"]) == 256  # the record is whole
    assert turns >= 8  # and the other stream ran between slices of at most 32 events


async def _fake_app_client(parts: list[bytes], content_type: str = "text/event-stream") -> Any:
    async def chat(request: web.Request) -> web.StreamResponse:
        assert (await request.json())["stream"] is True
        resp = web.StreamResponse(headers={"content-type": content_type})
        await resp.prepare(request)
        for part in parts:
            await resp.write(part)
            await asyncio.sleep(0.005)  # separate reads, so stamps differ
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1/chat/completions"


def _record(parts: list[bytes], content_type: str = "text/event-stream") -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        runner, url = await _fake_app_client(parts, content_type)
        body = chat_body([{"role": "user", "content": "hi"}], 4, 0.0, 0, {})
        try:
            async with open_streamer(10, 2) as session:
                return await stream_chat(session, url, body, 10)
        finally:
            await runner.cleanup()

    return asyncio.run(go())


def test_a_stream_split_at_awkward_places_is_recorded_whole() -> None:
    parts = [WIRE[:7], WIRE[7:200], WIRE[200:]]
    rec = _record(parts)
    assert rec["error"] is None and rec["usage"]["completion_tokens"] == 4
    assert [c._replace(t_ns=0) for c in rec["chunks"]] == [
        Chunk(0, None, None, None, None, None),
        Chunk(0, "ab", None, None, None, None),
        Chunk(0, None, "r", None, None, None),
        Chunk(0, "c", None, None, "length", None),
    ]
    stamps = [c[0] for c in rec["chunks"]]
    assert stamps == sorted(stamps) and stamps[0] >= rec["t_headers_ns"]
    assert rec["t_done_ns"] <= rec["t_end_ns"]


def test_a_non_stream_reply_is_an_error_not_an_empty_answer() -> None:
    rec = _record([b'{"choices": []}'], content_type="application/json")
    assert rec["error"]["type"] == "SSEError"


def test_the_writer_thread_keeps_every_record_in_order(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    writer = RecordWriter(store)
    for i in range(200):
        writer.append({"arm": "a", "prompt_id": f"p{i}", "repeat": 0})
    writer.close()
    lines = [json.loads(x) for x in store.records_path.read_text().splitlines()]
    assert [r["prompt_id"] for r in lines] == [f"p{i}" for i in range(200)]
    assert {r["schema_version"] for r in lines} == {SCHEMA_VERSION}


def test_a_failed_write_is_raised_on_the_loops_side(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "missing" / "dir")  # no folder: the append fails
    writer = RecordWriter(store)
    writer.append({"arm": "a"})
    with pytest.raises(StoreError, match=r"records\.jsonl: cannot write: No such file") as err:
        writer.close()
    assert err.value.exit_code == 5  # a run directory problem, not an internal error


def _closing_server(replies: list[bytes | None]) -> Any:
    """FAKE raw HTTP server: for each connection in turn, send the next reply then close (None:
    close without a byte, as cpp-httplib does to a keep-alive connection past its request cap)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        reply = replies.pop(0) if replies else None
        if reply is not None:
            writer.write(reply)
            await writer.drain()
        writer.close()

    return asyncio.start_server(handle, "127.0.0.1", 0)


def _stream_once(replies: list[bytes | None]) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        server = await _closing_server(replies)
        port = server.sockets[0].getsockname()[1]
        body = chat_body([{"role": "user", "content": "hi"}], 4, 0.0, 0, {})
        async with server, open_streamer(10, 1) as session:
            return await stream_chat(session, f"http://127.0.0.1:{port}/v1/chat/completions", body, 10)

    return asyncio.run(go())


OK_REPLY = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n" + WIRE


def _chunked(wire: bytes) -> bytes:
    """A 200 event stream in chunks (the raw path, rawbody.py), one chunk per event, then closed."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    events = [e + b"\n\n" for e in wire.replace(b"\r\n", b"\n").split(b"\n\n") if e]
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)
    return head + b"connection: close\r\n\r\n" + chunks + b"0\r\n\r\n"


CHUNKED_REPLY = _chunked(WIRE)


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(CHUNKED_REPLY, id="chunked (kept raw)"),
        pytest.param(OK_REPLY, id="until close (aiohttp's parser)"),
    ],
)
def test_connections_the_server_closed_leave_nothing_for_a_collection_to_free(reply: bytes) -> None:
    """Nothing is collected while streams are read (stream.quiet_collector), so a closed
    connection whose protocol still referred to its responses (a cycle: the response's reader
    refers to the protocol) kept every response's reads until the cell's end; llama-server closed
    each connection after its response at 1 in flight."""

    async def go() -> tuple[list[Any], int]:
        server = await _closing_server([reply] * 8)
        port = server.sockets[0].getsockname()[1]
        body = chat_body([{"role": "user", "content": "hi"}], 4, 0.0, 0, {})
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        async with server, open_streamer(10, 1) as session:
            recs = [await stream_chat(session, url, body, 10) for _ in range(8)]
            await asyncio.sleep(0.05)  # the last connection's loss
            assert not gc.isenabled()  # as in a cell: what is left now stays until it ends
            return recs, sum(isinstance(o, StampingHandler) for o in gc.get_objects())

    recs, handlers = asyncio.run(go())
    assert [r["error"] for r in recs] == [None] * 8 and all(len(r["chunks"]) == 4 for r in recs)
    assert handlers == 0


def test_a_connection_closed_before_any_reply_is_sent_once_more() -> None:
    rec = _stream_once([None, OK_REPLY])
    assert rec["error"] is None and rec["retried"] == "stale connection"
    assert rec["usage"]["completion_tokens"] == 4


def test_a_second_close_is_an_error_not_a_loop() -> None:
    rec = _stream_once([None, None, OK_REPLY])
    assert rec["error"]["type"] == "ServerDisconnectedError" and rec["chunks"] == []


def test_a_server_silent_past_the_read_timeout_is_an_error_with_what_arrived() -> None:
    async def go() -> dict[str, Any]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(OK_REPLY[: OK_REPLY.index(b"data: [DONE]")])  # everything but the end
            await writer.drain()
            await asyncio.sleep(2.0)
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        body = chat_body([{"role": "user", "content": "hi"}], 4, 0.0, 0, {})
        async with server, open_streamer(0.3, 1) as session:
            return await stream_chat(session, f"http://127.0.0.1:{port}/v1/chat/completions", body, 0.3)

    rec = asyncio.run(go())
    assert rec["error"]["type"] in ("ServerTimeoutError", "SocketTimeoutError", "TimeoutError")
    assert rec["usage"]["completion_tokens"] == 4 and len(rec["chunks"]) == 4


def _closed_after(events: list[dict[str, Any]]) -> bytes:
    """A reply that streams ``events`` and then closes the connection cleanly (no ``[DONE]``)."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
    return head + b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


def test_a_stream_that_stops_without_done_or_a_finish_reason_is_an_error() -> None:
    """Closed cleanly mid-generation, it used to be a success (error null, no usage) in TTFT and
    e2e; it is a per-request error like a cut stream, with what arrived kept."""
    rec = _stream_once([_closed_after(EVENTS[:3])])
    assert rec["error"] == {
        "type": "IncompleteStream",
        "message": "the stream ended without [DONE] or a finish reason",
    }
    assert [c.content for c in rec["chunks"]] == [None, "ab", None]


def test_a_finish_reason_without_done_ends_a_stream() -> None:
    rec = _stream_once([_closed_after(EVENTS)])
    assert rec["error"] is None and rec["usage"]["completion_tokens"] == 4
