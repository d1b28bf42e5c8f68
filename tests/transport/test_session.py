"""The one HTTP seam, on the control plane's side: a stale keep-alive connection is asked once
more, every other failure arrives as specbench's ClientError. The servers here are FAKE raw HTTP
servers on loopback, speaking exactly the bytes each case needs; the client is the production one
(``open_http``), as every engine and attach test now uses through tests/fakes/common.py."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from specbench.errors import ClientError
from specbench.transport import fetch_blocking, open_http


def _reply(body: bytes) -> bytes:
    head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def _scripted(actions: list[bytes | None]) -> tuple[asyncio.Server, str]:
    """FAKE server: each request, on whichever connection, takes the next action: bytes are
    answered and the connection kept alive; None closes it without a byte (as cpp-httplib does to
    an idle keep-alive connection, or one past its request cap)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                action = actions.pop(0) if actions else None
                if action is None:
                    break
                writer.write(action)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def _two_posts(actions: list[bytes | None]) -> list[Any]:
    """Two POSTs in a row on one client (as /apply-template then /tokenize): the second goes out
    on the first one's pooled connection. POST, because aiohttp resends an idempotent request
    (a GET) once on its own; a POST is resent by specbench.transport only."""

    async def go() -> list[Any]:
        server, base = await _scripted(actions)
        async with server, open_http(10.0) as http:
            first = await http.post(f"{base}/apply-template", {"messages": []})
            second = await http.post(f"{base}/tokenize", {"content": "x"})
            return [first.json(), second.json()]

    return asyncio.run(go())


def test_a_request_on_a_connection_the_server_closed_is_sent_once_more() -> None:
    # the pooled connection is closed under the second request; a fresh one answers it
    assert _two_posts([_reply(b'{"n": 1}'), None, _reply(b'{"n": 2}')]) == [{"n": 1}, {"n": 2}]


def test_a_second_close_is_a_client_error_naming_the_failure_not_a_loop() -> None:
    with pytest.raises(ClientError, match=r"^ServerDisconnectedError: Server disconnected"):
        _two_posts([_reply(b'{"n": 1}'), None, None, _reply(b'{"n": 2}')])


def test_nothing_listening_is_a_client_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: the connection is refused
        with pytest.raises(ClientError, match=r"^ClientConnectorError: "):
            fetch_blocking("GET", f"http://127.0.0.1:{port}/health", timeout=5.0)


def test_a_silent_server_is_a_client_error_that_says_so() -> None:
    async def go() -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(5.0)  # never answers within the request's timeout
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, open_http(10.0) as http:
            await http.get(f"http://127.0.0.1:{port}/health", timeout=0.2)

    with pytest.raises(ClientError, match=r"no response within 0\.2 s$"):
        asyncio.run(go())


def test_an_answer_is_read_whole_with_its_status_headers_and_text() -> None:
    async def go() -> Any:
        head = b"HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\n"
        server, base = await _scripted([head + b"content-length: 5\r\n\r\nno \xc3\xa9"])
        async with server, open_http(10.0) as http:
            return await http.get(f"{base}/metrics")

    reply = asyncio.run(go())
    assert (reply.status_code, reply.headers["content-type"], reply.text) == (
        501, "text/plain; charset=utf-8", "no é"
    )  # fmt: skip
