"""Pieces shared by the FAKE servers: SSE framing, Prometheus text and a real-socket adapter."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, generate_latest

Handler = Callable[[httpx.Request], httpx.Response]


def sse(events: list[dict[str, Any] | str]) -> httpx.Response:
    """An SSE response: one ``data:`` event per item, as every engine frames chat streams."""
    body = b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def prometheus(registry: CollectorRegistry) -> httpx.Response:
    """Prometheus text exposition written by prometheus_client itself (so `_total`/`_created`
    samples look exactly as a Python engine emits them, vLLM Prometheus metrics)."""
    return httpx.Response(
        200, headers={"content-type": "text/plain; version=0.0.4"}, content=generate_latest(registry)
    )


def not_found() -> httpx.Response:
    return httpx.Response(404, json={"detail": "Not Found"})


def mock_client(handler: Handler) -> httpx.AsyncClient:
    """An AsyncClient whose requests go to ``handler`` in-process (no socket)."""
    return httpx.AsyncClient(transport=httpx.MockTransport(handler), timeout=10.0)


def make_server(handler: Handler, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server on ``host:port`` (0: any free port) that answers every request with
    ``handler``; the caller runs ``serve_forever`` (in a thread, or as a process's main loop)."""

    class Adapter(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            request = httpx.Request(
                self.command,
                f"http://fake{self.path}",
                headers=dict(self.headers),
                content=self.rfile.read(length),
            )
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
