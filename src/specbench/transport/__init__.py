"""The one HTTP seam: every byte specbench sends to a server goes through here, on aiohttp.

Between steps 5 and 6 of the flow matrix → workloads → run → executors → engines → transport →
client → store → analysis (theory) → report: takes in the requests ``engines`` (control plane) and
``client`` (measured streams) make and hands back whole answers or a stamped stream; the next
step, ``client``, turns a stream into a record.

Two users, one library and one policy. The control plane (an engine's self-description, /health,
/metrics scrapes, /tokenize, attach mode's identification of the server) asks through
:class:`Http`, which reads each small answer whole into a :class:`Reply`. The measured streams
(:mod:`specbench.client.stream`) open their session with :func:`session` over a connector that
stamps each read. Both send a request once more
when a pooled keep-alive connection turns out closed before anything came back (:func:`stale`),
and both report a failure as data or as :class:`specbench.errors.ClientError`, never as an
aiohttp exception. Why aiohttp and not httpx: the streams' CPU per token and read-stamp error
(docs/engines.md, "One HTTP client").
"""

from __future__ import annotations

from specbench.transport.session import (
    FAILURES,
    Http,
    Reply,
    failure,
    fetch_blocking,
    limits,
    open_http,
    session,
    stale,
    timed_out,
)

__all__ = [
    "FAILURES",
    "Http",
    "Reply",
    "failure",
    "fetch_blocking",
    "limits",
    "open_http",
    "session",
    "stale",
    "timed_out",
]
