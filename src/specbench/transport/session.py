"""Sessions, the stale-connection retry and error translation, for the control plane and the
streams alike (see the package docstring)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver

from specbench.errors import ClientError

#: What a request can fail with below HTTP: a connection, a protocol or a timeout failure.
#: (asyncio's TimeoutError: the builtin one only from Python 3.11 on.)
FAILURES = (aiohttp.ClientError, asyncio.TimeoutError)
# A pooled keep-alive connection the server had already closed or reset (cpp-httplib closes idle
# ones, and keep-alive connections past a request cap): the request never reached it.
_STALE = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


def stale(exc: BaseException, answered: bool) -> bool:
    """Whether a failed request may be sent once more on a fresh connection: the connection was
    closed under it, or could not be opened, and nothing came back (``answered`` False), so the
    server never began it."""
    return isinstance(exc, _STALE) and not answered


def timed_out(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.TimeoutError)


def failure(exc: BaseException, timeout: float | None) -> ClientError:
    """``exc`` (one of :data:`FAILURES`) as specbench's own error, its type named in the message.
    A timeout says what happened (aiohttp's name a socket read, or nothing)."""
    if timed_out(exc) and timeout is not None:
        return ClientError(f"{type(exc).__name__}: no response within {timeout:g} s")
    return ClientError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def limits(timeout: float | None) -> aiohttp.ClientTimeout:
    """Per-operation limits: a long generation is not a timeout, a server silent for ``timeout``
    seconds (to connect, or between two reads) is."""
    return aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=timeout)


def session(
    connector: aiohttp.BaseConnector, timeout: float | None, headers: Mapping[str, str] | None = None
) -> aiohttp.ClientSession:
    """A session on ``connector``; loopback-friendly: no proxy or .netrc lookups (aiohttp's default
    ``trust_env=False``)."""
    return aiohttp.ClientSession(connector=connector, timeout=limits(timeout), headers=headers)


@dataclass(frozen=True)
class Reply:
    """A control-plane answer, read whole (they are small): status, headers (case-insensitive)
    and body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes
    charset: str | None = None

    @property
    def text(self) -> str:
        return self.content.decode(self.charset or "utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return json.loads(self.content)


class Http:
    """The control plane's client: GET and POST, each answer read whole; a request on a stale
    connection is sent once more, any other failure raises :class:`ClientError`."""

    def __init__(self, session: aiohttp.ClientSession, timeout: float | None) -> None:
        self._session, self._timeout = session, timeout

    async def get(self, url: str, timeout: float | None = None) -> Reply:
        return await self._send("GET", url, None, timeout)

    async def post(self, url: str, json: Any) -> Reply:
        return await self._send("POST", url, json, None)

    async def _send(self, method: str, url: str, body: Any, timeout: float | None) -> Reply:
        # aiohttp itself resends an idempotent request (GET) once on such a failure; this resend
        # covers the POSTs (/tokenize, /apply-template) too, as the streams' does theirs.
        limit = limits(timeout) if timeout is not None else self._session.timeout
        for attempt in range(2):
            answered = False
            try:
                async with self._session.request(method, url, json=body, timeout=limit) as resp:
                    answered = True
                    content = await resp.read()
                    return Reply(resp.status, resp.headers, content, resp.charset)
            except FAILURES as exc:
                if attempt == 0 and stale(exc, answered):
                    continue
                raise failure(exc, timeout or self._timeout) from exc
        raise AssertionError("unreachable: the second attempt returns or raises")


@asynccontextmanager
async def open_http(
    timeout: float, headers: Mapping[str, str] | None = None, resolver: AbstractResolver | None = None
) -> AsyncIterator[Http]:
    """A control-plane client for one server. ``keepalive_timeout``: an idle connection is dropped
    before the server drops it (cpp-httplib: 5 s). ``resolver``: where host names lead (the test
    fakes name their in-process server so; everything else is this same path)."""
    connector = aiohttp.TCPConnector(keepalive_timeout=1.0, resolver=resolver)
    async with session(connector, timeout, headers) as opened:
        yield Http(opened, timeout)


def fetch_blocking(method: str, url: str, json: Any = None, timeout: float = 10.0) -> Reply:
    """One request from synchronous code (a launch's health poll, the lab check, scripts), on a
    loop of its own; raises :class:`ClientError` as :class:`Http` does. Not from a running loop."""

    async def once() -> Reply:
        async with open_http(timeout) as http:
            return await (http.get(url) if method == "GET" else http.post(url, json))

    return asyncio.run(once())
