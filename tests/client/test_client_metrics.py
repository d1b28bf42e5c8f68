"""Client recording and per-request metrics on protocol edge cases a real engine cannot be made
to produce on demand. The server here is a FAKE (tests/fakes/common.py, on a loopback socket) and is
named so; the client is the runner's own (open_streamer)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest

from specbench.analysis import metrics
from specbench.client.stream import chat_body, open_streamer, stream_chat
from specbench.engines import read_record
from tests.fakes.common import Request, Response, fake_url


def sse(*events: dict[str, Any] | str) -> list[bytes]:
    return [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events]


def delta(
    content: str | None = None, reasoning: str | None = None, finish: str | None = None
) -> dict[str, Any]:
    d: dict[str, Any] = {"content": content}
    if reasoning:
        d["reasoning_content"] = reasoning
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def fake_server(parts: list[bytes], status: int = 200, pause: float = 0.0) -> Callable[[Request], Response]:
    """FAKE OpenAI-compatible server streaming ``parts`` with ``pause`` seconds between them."""

    async def body() -> AsyncIterator[bytes]:
        for part in parts:
            await asyncio.sleep(pause)
            yield part

    def handler(request: Request) -> Response:
        assert json.loads(request.content)["stream"] is True
        return Response(status, headers={"content-type": "text/event-stream"}, content=body())

    return handler


def record(parts: list[bytes], status: int = 200, pause: float = 0.0) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with fake_url(fake_server(parts, status, pause)) as base, open_streamer(10, 1) as session:
            body = chat_body([{"role": "user", "content": "hi"}], 8, 0.0, 0, {})
            return await stream_chat(session, f"{base}/v1/chat/completions", body, 10)

    return asyncio.run(go())


USAGE = {
    "choices": [],
    "usage": {"prompt_tokens": 5, "completion_tokens": 6},
    "timings": {
        "draft_n": 8,
        "draft_n_accepted": 6,
        "prompt_n": 5,
        "prompt_ms": 2.0,
        "predicted_per_second": 50.0,
    },
}


def test_role_chunk_is_not_a_token_and_multi_token_chunks_are_kept() -> None:
    parts = sse(
        {"choices": [{"delta": {"role": "assistant", "content": None}}]},
        delta("a"),
        delta("bcd"),
        delta("ef", finish="length"),
        USAGE,
        "[DONE]",
    )
    rec = record(parts, pause=0.01)
    assert rec["error"] is None and len(rec["chunks"]) == 4
    assert metrics.output_text(read_record(rec)) == "abcdef"
    assert metrics.output_tokens(read_record(rec)) == 6  # from usage, not the 3 content chunks
    assert metrics.ttft_ms(read_record(rec)) == pytest.approx(rec["chunks"][1][0] / 1e6)
    # 3 content chunks, 6 tokens: per-token ITL is the chunk gap × (3−1)/(6−1)
    gaps = np.diff([c[0] for c in rec["chunks"][1:]]) / 1e6
    assert metrics.itl_ms(read_record(rec)) == pytest.approx(np.median(gaps) * 2 / 5)
    assert (
        metrics.acceptance(read_record(rec)) == 0.75 and metrics.finish_reason(read_record(rec)) == "length"
    )
    assert metrics.prefill_tok_s(read_record(rec)) == 2500.0


def test_reasoning_first_separates_ttft_from_time_to_answer() -> None:
    rec = record(sse(delta(reasoning="think"), delta("answer"), USAGE, "[DONE]"), pause=0.01)
    assert metrics.ttft_ms(read_record(rec)) < metrics.ttfa_ms(read_record(rec))
    assert metrics.output_text(read_record(rec)) == "answer"


def test_http_errors_are_stored_as_data() -> None:
    rec = record([b'{"error": "boom"}'], status=500)
    assert rec["error"]["type"] == "http_status" and rec["error"]["status"] == 500
    assert "boom" in rec["error"]["message"]


def test_a_torn_stream_keeps_what_arrived() -> None:
    rec = record([*sse(delta("a"), delta("b")), b"data: {not json\n\n"])
    assert rec["error"]["type"] == "JSONDecodeError"
    assert metrics.output_text(read_record(rec)) == "ab"


def test_frame_skips_errors_and_warmups() -> None:
    ok = {
        "arm": "a",
        "prompt_id": "p",
        "repeat": 0,
        "warmup": False,
        "error": None,
        "chunks": [],
        "t_end_ns": 5_000_000,
        "request": {"max_tokens": 8},
    }
    df = metrics.frame([ok, {**ok, "warmup": True}, {**ok, "error": {"type": "x"}}])
    assert len(df) == 1 and df["e2e_ms"].iloc[0] == 5.0
    assert bool(df["stopped_early"].iloc[0]) is False  # unknown output tokens: not claimed early


def test_per_token_itl_from_running_counts_sent_with_each_chunk() -> None:
    """vLLM's continuous_usage_stats (usage in every chunk) and llama.cpp's timings_per_token
    (timings in every chunk) both give the running token count: 1, then 3, then 1 token."""

    def counted(content: str, n: int, key: str) -> dict[str, Any]:
        extra = {"usage": {"completion_tokens": n}} if key == "usage" else {"timings": {"predicted_n": n}}
        return {**delta(content), **extra}

    for key in ("usage", "timings"):
        parts = sse(counted("a", 1, key), counted("bcd", 4, key), counted("e", 5, key), "[DONE]")
        rec = record(parts, pause=0.01)
        assert [c[5] for c in rec["chunks"]] == [1, 4, 5]
        assert (
            metrics.chunk_tokens(read_record(rec)) == [1, 3, 1]
            and metrics.tokens_per_chunk(read_record(rec)) == 5 / 3
        )
        g1, g2 = np.diff([c[0] for c in rec["chunks"]]) / 1e6
        per_token = [g1 / 3] * 3 + [g2]
        assert metrics.itl_ms(read_record(rec)) == pytest.approx(np.median(per_token))
        assert metrics.itl_p99_ms(read_record(rec)) == pytest.approx(np.percentile(per_token, 99))
        assert metrics.chunk_itl_ms(read_record(rec)) == pytest.approx(np.median([g1, g2]))


def test_records_before_schema_2_read_as_before() -> None:
    """Five-field chunk rows (schema 1): per-token ITL falls back to chunks scaled by tokens."""
    chunks = [
        [0, "a", None, None, None],
        [2_000_000, "bc", None, None, None],
        [6_000_000, "d", None, None, "stop"],
    ]
    rec = {"chunks": chunks, "usage": {"completion_tokens": 4}, "t_end_ns": 7_000_000, "error": None}
    assert metrics.chunk_tokens(read_record(rec)) is None
    assert metrics.itl_ms(read_record(rec)) == pytest.approx(3.0 * 2 / 3)  # median gap 3 ms × (3−1)/(4−1)
    assert (
        metrics.tokens_per_chunk(read_record(rec)) == 4 / 3 and metrics.chunk_itl_ms(read_record(rec)) == 3.0
    )


def test_a_response_read_in_one_go_takes_the_servers_decode_rate() -> None:
    """All token chunks stamped by one read: the client's window is 0, so it cannot time decode."""
    chunks = [[5_000_000, t, None, None, None, n] for n, t in enumerate("abcd", start=1)]
    rec = {"chunks": chunks, "usage": {"completion_tokens": 4}, "timings": {"predicted_per_second": 8000.0}}
    assert (
        metrics.decode_window_ms(read_record(rec)) == 0.0 and metrics.decode_tok_s(read_record(rec)) == 8000.0
    )
    # Regression (#15 audit, vLLM baseline whose 129 chunks came in one read while the client's loop
    # was 174 ms late): its ITL read 0.00 ms and pulled the arm's ITL interval down to 0.00.
    assert np.isnan(metrics.itl_ms(read_record(rec))) and np.isnan(metrics.itl_p99_ms(read_record(rec)))
    assert np.isnan(metrics.decode_tok_s(read_record({**rec, "timings": None})))
