"""Async streaming client for ``/v1/chat/completions``.

It only records: a ``perf_counter_ns`` stamp and the raw delta for every SSE event, the final
usage and engine timings, and errors as data. It never computes statistics — metrics.py does,
from these raw records, so every number can be recomputed later.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse


def chat_body(
    messages: list[dict[str, str]], max_tokens: int, temperature: float, seed: int, extras: dict[str, Any]
) -> dict[str, Any]:
    """A streaming request with every sampling field explicit (servers' defaults differ)."""
    return {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "top_p": 1.0,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extras,
    }


def _delta_row(t_ns: int, choice: dict[str, Any]) -> list[Any]:
    """One chunk as ``[t_ns, content, reasoning, tool_calls, finish_reason]``."""
    delta = choice.get("delta") or {}
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    return [t_ns, delta.get("content"), reasoning, delta.get("tool_calls"), choice.get("finish_reason")]


class _Recorder:
    """Accumulates one response; a plain object so partial results survive an error."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter_ns()
        self.t_headers: int | None = None
        self.chunks: list[list[Any]] = []
        self.final: dict[str, Any] = {}
        self.error: dict[str, Any] | None = None

    def event(self, data: str) -> None:
        t_ns = time.perf_counter_ns() - self.t0
        if data.strip() == "[DONE]":
            self.final["t_done_ns"] = t_ns
            return
        obj = json.loads(data)
        for choice in obj.get("choices") or []:
            self.chunks.append(_delta_row(t_ns, choice))
        for key in ("usage", "timings", "system_fingerprint", "model", "metrics"):
            if obj.get(key) is not None:
                self.final[key] = obj[key]

    def result(self) -> dict[str, Any]:
        return {
            "t_headers_ns": self.t_headers,
            "t_end_ns": time.perf_counter_ns() - self.t0,
            "chunks": self.chunks,
            **self.final,
            "error": self.error,
        }


async def stream_chat(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """POST ``body`` and record the stream. Never raises for HTTP or protocol failures."""
    rec = _Recorder()
    try:
        async with aconnect_sse(client, "POST", url, json=body, timeout=timeout) as source:
            rec.t_headers = time.perf_counter_ns() - rec.t0
            if source.response.status_code != 200:
                text = (await source.response.aread()).decode(errors="replace")
                rec.error = {
                    "type": "http_status",
                    "status": source.response.status_code,
                    "message": text[:500],
                }
                return rec.result()
            async for sse in source.aiter_sse():
                rec.event(sse.data)
    except (httpx.HTTPError, SSEError, json.JSONDecodeError) as exc:
        # httpx timeouts carry no message: say what happened instead of an empty string.
        message = str(exc) or f"no response within {timeout:g} s"
        rec.error = {"type": type(exc).__name__, "message": message[:500]}
    return rec.result()
