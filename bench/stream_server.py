"""A fast local OpenAI-compatible streaming server for measuring *clients* (not a test fake:
it is the load generator's yardstick). Run in its own process:

    python bench/stream_server.py --port P [--interval-ms 2] [--tokens-per-chunk 1]

Every ``interval`` one ticker writes the next chunk to every open stream at once (as an engine's
batched decode step does), so the server's cost per tick is one pass over the streams. Each
chunk's content starts with ``@<perf_counter_ns at send>`` (taken just before that stream's write):
``perf_counter`` is CLOCK_MONOTONIC, shared by processes on one machine, so a client's stamps
can be compared with the true send times chunk by chunk. ``max_tokens`` tokens per request;
usage at the end, and in every chunk when ``stream_options.continuous_usage_stats`` is set (as
vLLM does). Raw asyncio, HTTP/1.1 keep-alive, chunked transfer: small enough that the server is
never the thing measured.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from typing import Any

HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


def http_chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def sse(obj: dict[str, Any] | str) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return http_chunk(f"data: {data}\n\n".encode())


class Stream:
    """One open response: how many tokens are left and whether usage goes in every chunk."""

    def __init__(self, transport: asyncio.Transport, max_tokens: int, continuous: bool) -> None:
        self.transport, self.left, self.sent, self.continuous = transport, max_tokens, 0, continuous
        self.total = max_tokens


class Server:
    def __init__(self, interval_s: float, per_chunk: int) -> None:
        self.interval_s, self.per_chunk = interval_s, per_chunk
        self.streams: list[Stream] = []
        self.wake = asyncio.Event()
        self.reset()

    def reset(self) -> None:
        """Start a new load window: /stats then reports first send to last token, tokens, tick gaps."""
        self.first_ns, self.last_ns, self.tokens, self.ticks = 0, 0, 0, []

    def stats(self) -> dict[str, Any]:
        gaps = sorted(b - a for a, b in itertools.pairwise(self.ticks))
        p99 = gaps[int(0.99 * (len(gaps) - 1))] / 1e6 if gaps else None
        return {"first_ns": self.first_ns, "last_ns": self.last_ns, "tokens": self.tokens, "tick_p99_ms": p99}

    def chunk(self, stream: Stream, now_ns: int) -> bytes:
        n = min(self.per_chunk, stream.left)
        stream.left -= n
        stream.sent += n
        self.tokens += n
        self.last_ns = now_ns
        content = f"@{now_ns}" + " t" * (n - 1)
        obj: dict[str, Any] = {
            "id": "x",
            "object": "chat.completion.chunk",
            "model": "bench",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
        }
        if stream.left == 0:
            obj["choices"][0]["finish_reason"] = "length"
        if stream.continuous:
            obj["usage"] = {"prompt_tokens": 8, "completion_tokens": stream.sent}
        out = sse(obj)
        if stream.left == 0:
            usage = {"prompt_tokens": 8, "completion_tokens": stream.total, "total_tokens": stream.total + 8}
            out += sse({"id": "x", "choices": [], "usage": usage}) + sse("[DONE]") + b"0\r\n\r\n"
        return out

    async def ticker(self) -> None:
        """Drift-free schedule; when behind (many streams on one core) it ticks as fast as it can."""
        loop = asyncio.get_running_loop()
        next_t = loop.time()
        while True:
            if not self.streams:
                self.wake.clear()
                await self.wake.wait()
                next_t = loop.time()
            next_t += self.interval_s
            await asyncio.sleep(max(0.0, next_t - loop.time()))
            perf = time.perf_counter_ns
            self.ticks.append(perf())
            for stream in self.streams:
                if not stream.transport.is_closing():
                    # Stamped per stream, just before its write: a tick's writes take ~10 us each,
                    # and a server preempted mid-tick would otherwise hand the delay to the client.
                    stream.transport.write(self.chunk(stream, perf()))
            self.streams = [s for s in self.streams if s.left > 0 and not s.transport.is_closing()]

    def start(self, transport: asyncio.Transport, body: dict[str, Any]) -> None:
        opts = body.get("stream_options") or {}
        continuous = bool(opts.get("continuous_usage_stats"))
        stream = Stream(transport, int(body.get("max_tokens") or 16), continuous)
        self.first_ns = self.first_ns or time.perf_counter_ns()
        transport.write(HEAD + sse({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}))
        self.streams.append(stream)
        self.wake.set()


class Protocol(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server, self.buf = server, b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, rest = self.buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            size = int(headers.get("content-length", "0"))
            if len(rest) < size:
                return
            self.buf = rest[size:]
            self.handle(lines[0].split(" ")[1], rest[:size])

    def handle(self, path: str, body: bytes) -> None:
        assert self.transport is not None
        if path.endswith("/chat/completions") or path.endswith("/completions"):
            req = json.loads(body)
            if "prompt" in req and "messages" not in req:
                req.setdefault("max_tokens", 16)
            self.server.start(self.transport, req)
            return
        if path == "/reset":
            self.server.reset()
        found = path.startswith("/v1/models") or path in ("/health", "/reset", "/stats")
        obj = self.server.stats() if path == "/stats" else {"object": "list", "data": [{"id": "bench"}]}
        payload = json.dumps(obj).encode()
        status = b"200 OK" if found else b"404 Not Found"
        self.transport.write(
            b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (status, len(payload), payload)
        )


async def serve(port: int, interval_s: float, per_chunk: int) -> None:
    server = Server(interval_s, per_chunk)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: Protocol(server), "127.0.0.1", port, backlog=1024)
    ticker = asyncio.create_task(server.ticker())
    print("ready", flush=True)
    async with srv:
        await srv.serve_forever()
    ticker.cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--interval-ms", type=float, default=2.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.interval_ms / 1000.0, args.tokens_per_chunk))


if __name__ == "__main__":
    main()
