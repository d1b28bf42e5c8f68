"""Pieces shared by the FAKE servers: what a handler sees and answers, SSE framing, Prometheus
text, and two real-socket adapters: a thread (for fakes run as processes, or code that opens its
own clients) and one on the test's own loop, which the production clients reach
(:func:`mock_client`, :func:`fake_url`), so every test request goes the path a real one goes."""

from __future__ import annotations

import json as jsonlib
import socket
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from prometheus_client import CollectorRegistry, generate_latest

from specbench.transport import Http, open_http


@dataclass(frozen=True)
class URL:
    path: str


@dataclass(frozen=True)
class Request:
    """What a FAKE handler sees of a request."""

    method: str
    url: URL
    content: bytes = b""


class Response:
    """What a FAKE handler answers: a status, headers and a body given as ``json``, ``text`` or
    ``content`` (bytes, or async parts streamed as they come)."""

    def __init__(
        self,
        status_code: int = 200,
        *,
        headers: dict[str, str] | None = None,
        content: bytes | AsyncIterable[bytes] = b"",
        json: Any = None,
        text: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        if json is not None:
            content = jsonlib.dumps(json).encode()
            self.headers.setdefault("content-type", "application/json")
        elif text is not None:
            content = text.encode()
            self.headers.setdefault("content-type", "text/plain; charset=utf-8")
        self.content = content

    def read(self) -> bytes:
        assert isinstance(self.content, bytes), "a streamed body is served by mock_client/fake_url"
        return self.content

    @property
    def text(self) -> str:
        return self.read().decode()


Handler = Callable[[Request], Response]


def sse(events: list[dict[str, Any] | str]) -> Response:
    """An SSE response: one ``data:`` event per item, as every engine frames chat streams."""
    body = b"".join(f"data: {e if isinstance(e, str) else jsonlib.dumps(e)}\n\n".encode() for e in events)
    return Response(200, headers={"content-type": "text/event-stream"}, content=body)


def prometheus(registry: CollectorRegistry) -> Response:
    """Prometheus text exposition written by prometheus_client itself (so `_total`/`_created`
    samples look exactly as a Python engine emits them, vLLM Prometheus metrics)."""
    return Response(
        200, headers={"content-type": "text/plain; version=0.0.4"}, content=generate_latest(registry)
    )


def not_found() -> Response:
    return Response(404, json={"detail": "Not Found"})


def _app(handler: Handler) -> web.Application:
    """An aiohttp app answering every path with ``handler``; a streamed body is written part by
    part, each as it comes."""

    async def answer(request: web.Request) -> web.StreamResponse:
        reply = handler(Request(request.method, URL(request.path), await request.read()))
        headers = {"content-type": "application/json", **reply.headers}
        if isinstance(reply.content, bytes):
            return web.Response(status=reply.status_code, body=reply.content, headers=headers)
        resp = web.StreamResponse(status=reply.status_code, headers=headers)
        await resp.prepare(request)
        async for part in reply.content:
            await resp.write(part)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


@asynccontextmanager
async def fake_url(handler: Handler) -> AsyncIterator[str]:
    """Serve ``handler`` on a loopback socket on the running loop; yields the base URL."""
    runner = web.AppRunner(_app(handler))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


class _AllTo(AbstractResolver):
    """Every host name leads to one loopback port (the fake's), so tests can say http://fake."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        flags = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
        return [{"hostname": host, "host": "127.0.0.1", "port": self.port, "family": socket.AF_INET,
                 "proto": 0, "flags": flags}]  # fmt: skip

    async def close(self) -> None:
        """Nothing to release."""


@asynccontextmanager
async def mock_client(handler: Handler) -> AsyncIterator[Http]:
    """The production control-plane client (:func:`specbench.transport.open_http`) whose requests
    reach ``handler`` over a real loopback socket, whatever host they name."""
    async with fake_url(handler) as base:
        port = urlsplit(base).port or 80
        async with open_http(10.0, resolver=_AllTo(port)) as client:
            yield client


def make_server(handler: Handler, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server on ``host:port`` (0: any free port) that answers every request with
    ``handler``; the caller runs ``serve_forever`` (in a thread, or as a process's main loop)."""

    class Adapter(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            request = Request(self.command, URL(urlsplit(self.path).path), self.rfile.read(length))
            response = handler(request)
            body = response.read()
            self.send_response(response.status_code)
            self.send_header("content-type", response.headers.get("content-type", "application/json"))
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _handle

        def log_message(self, format: str, *args: Any) -> None:
            """Silent: test output stays readable."""

    return ThreadingHTTPServer((host, port), Adapter)


@contextmanager
def serve(handler: Handler) -> Iterator[str]:
    """Serve ``handler`` on a real localhost socket (for code that opens its own clients);
    yields the base URL."""
    server = make_server(handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
