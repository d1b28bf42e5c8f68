"""Per-request metrics computed from raw records, one small function per metric.

A record's ``chunks`` are ``[t_ns, content, reasoning, tool_calls, finish_reason]`` with
``t_ns`` measured from just before the request was sent. Token counts come from the server
(``usage`` / llama.cpp ``timings``), never from the chunk count: with speculation several
tokens may arrive in one chunk (docs/mistakes.md, mistake 10).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from specbench.engines import request_draft_counts

Record = dict[str, Any]
NS_PER_MS = 1e6


def _token_chunks(rec: Record, answer_only: bool = False) -> list[list[Any]]:
    """Chunks that carry generated text: content, tool calls and (unless answer_only) reasoning.
    llama.cpp's first role-only chunk (``content: null``) is not a token."""
    fields = (1, 3) if answer_only else (1, 2, 3)
    return [c for c in rec.get("chunks", []) if any(c[i] for i in fields)]


def output_tokens(rec: Record) -> float:
    """usage.completion_tokens, else timings.predicted_n (both server-counted)."""
    usage, timings = rec.get("usage") or {}, rec.get("timings") or {}
    value = usage.get("completion_tokens", timings.get("predicted_n"))
    return float(value) if value is not None else np.nan


def prompt_tokens(rec: Record) -> float:
    """usage.prompt_tokens (llama.cpp: processed + cached)."""
    value = (rec.get("usage") or {}).get("prompt_tokens")
    return float(value) if value is not None else np.nan


def cached_tokens(rec: Record) -> float:
    """Prompt tokens served from the cache: timings.cache_n or usage.prompt_tokens_details.cached_tokens."""
    timings = rec.get("timings") or {}
    details = (rec.get("usage") or {}).get("prompt_tokens_details") or {}
    value = timings.get("cache_n", details.get("cached_tokens"))
    return float(value) if value is not None else np.nan


def ttft_ms(rec: Record) -> float:
    """Time to first generated token of any kind (content, reasoning or tool call)."""
    chunks = _token_chunks(rec)
    return chunks[0][0] / NS_PER_MS if chunks else np.nan


def ttfa_ms(rec: Record) -> float:
    """Time to first answer token (content or tool call), after any reasoning."""
    chunks = _token_chunks(rec, answer_only=True)
    return chunks[0][0] / NS_PER_MS if chunks else np.nan


def e2e_ms(rec: Record) -> float:
    """Send to end of stream."""
    return float(rec["t_end_ns"]) / NS_PER_MS if rec.get("t_end_ns") is not None else np.nan


def decode_window_ms(rec: Record) -> float:
    """First to last token chunk: the client-side decode window."""
    chunks = _token_chunks(rec)
    return (chunks[-1][0] - chunks[0][0]) / NS_PER_MS if len(chunks) > 1 else np.nan


def tpot_ms(rec: Record) -> float:
    """(t_last − t_first) / (output_tokens − 1): the first token is prefill's."""
    n = output_tokens(rec)
    return decode_window_ms(rec) / (n - 1) if n > 1 else np.nan


def client_decode_tok_s(rec: Record) -> float:
    """(output_tokens − 1) / (t_last − t_first), measured by the client. When every token chunk
    arrived in one socket read (a tiny model answering in a few ms) the client cannot time the
    decode at all; the server's own rate (llama.cpp ``timings``) stands in, NaN if it has none."""
    tpot = tpot_ms(rec)
    if tpot == 0.0:
        return server_decode_tok_s(rec)
    return 1000.0 / tpot if tpot and tpot > 0 else np.nan


CLIENT_SERVER_TOLERANCE = 0.25  # client and server decode rates may differ this much (relative)


def decode_disagrees(rec: Record) -> float:
    """1.0 when the client's decode rate and the server's own differ by more than the tolerance
    (a stalled stream: first token late, then every chunk at once), 0.0 when they agree, NaN when
    the server gives no timing."""
    client, server = client_decode_tok_s(rec), server_decode_tok_s(rec)
    if np.isnan(client) or np.isnan(server) or server <= 0:
        return np.nan
    return float(abs(client / server - 1.0) > CLIENT_SERVER_TOLERANCE)


def decode_tok_s(rec: Record) -> float:
    """The trustworthy decode rate: the client's, unless the server's own timing disagrees with
    it beyond the tolerance — then the server's (it timed the tokens, not the stream's delivery)."""
    return server_decode_tok_s(rec) if decode_disagrees(rec) == 1.0 else client_decode_tok_s(rec)


def chunk_tokens(rec: Record) -> list[int] | None:
    """Tokens in each token chunk, from the server's running count sent with every chunk (schema
    2 rows' sixth field); None when any token chunk lacks it (older records, other servers)."""
    counts = [c[5] if len(c) > 5 else None for c in _token_chunks(rec)]
    if not counts or any(n is None for n in counts):
        return None
    steps = np.diff([0, *counts])
    return [int(n) for n in steps] if (steps >= 0).all() else None


def _token_gaps_ms(rec: Record) -> np.ndarray:
    """Per-token inter-token intervals: a chunk carrying k tokens after a gap g counts as k
    intervals of g/k (a speculative step delivers several tokens at once). Without per-chunk
    counts, every chunk is assumed to carry the request's mean tokens per chunk."""
    chunks = _token_chunks(rec)
    if len(chunks) < 2:
        return np.array([])
    gaps = np.diff([c[0] for c in chunks]) / NS_PER_MS
    if not gaps.any():  # every chunk stamped by one read: no latency was measured, not 0 ms
        return np.array([])
    counts = chunk_tokens(rec)
    if counts is not None:
        per = np.asarray(counts[1:], dtype=float)
        keep = per > 0
        return np.repeat(gaps[keep] / per[keep], per[keep].astype(int))
    n = output_tokens(rec)
    if not n > 1:
        return np.array([])
    return gaps * (len(chunks) - 1) / (n - 1)


def itl_ms(rec: Record) -> float:
    """Median per-token inter-token latency (see :func:`_token_gaps_ms`)."""
    gaps = _token_gaps_ms(rec)
    return float(np.median(gaps)) if gaps.size else np.nan


def itl_p99_ms(rec: Record) -> float:
    """99th percentile of the per-token inter-token latencies."""
    gaps = _token_gaps_ms(rec)
    return float(np.percentile(gaps, 99)) if gaps.size else np.nan


def chunk_itl_ms(rec: Record) -> float:
    """Median gap between token chunks as they arrived, kept beside the per-token figure."""
    chunks = _token_chunks(rec)
    return float(np.median(np.diff([c[0] for c in chunks]))) / NS_PER_MS if len(chunks) > 1 else np.nan


def tokens_per_chunk(rec: Record) -> float:
    """Generated tokens per streamed token chunk: 1 for plain decoding, more when a speculative
    step sends several accepted tokens in one chunk (a spec-decode signal of its own)."""
    chunks, n = _token_chunks(rec), output_tokens(rec)
    return n / len(chunks) if chunks and n > 0 else np.nan


def server_decode_tok_s(rec: Record) -> float:
    """llama.cpp timings.predicted_per_second: (predicted_n − 1) / predicted_ms."""
    value = (rec.get("timings") or {}).get("predicted_per_second")
    return float(value) if value is not None else np.nan


def prefill_ms(rec: Record) -> float:
    """llama.cpp timings.prompt_ms: slot start to first sampled token (queueing excluded)."""
    value = (rec.get("timings") or {}).get("prompt_ms")
    return float(value) if value is not None else np.nan


def prefill_tok_s(rec: Record) -> float:
    """timings.prompt_n / prompt_ms, tokens actually processed (cache hits excluded)."""
    timings = rec.get("timings") or {}
    n, ms = timings.get("prompt_n"), timings.get("prompt_ms")
    return float(n) * 1000.0 / float(ms) if n and ms else np.nan


def _spec_counts(rec: Record) -> dict[str, float] | None:
    """Per-request draft counts, as whichever engine's fields the record holds give them
    (llama.cpp ``timings``, vLLM ``metrics.speculative_decoding``); None when none does."""
    return request_draft_counts(rec)


def draft_n(rec: Record) -> float:
    """Drafted tokens in this request (NaN: the server does not say)."""
    counts = _spec_counts(rec)
    return float(counts["draft_n"]) if counts else np.nan


def draft_accepted(rec: Record) -> float:
    """Accepted draft tokens in this request (NaN: the server does not say)."""
    counts = _spec_counts(rec)
    return float(counts["draft_accepted"]) if counts else np.nan


def acceptance(rec: Record) -> float:
    """draft_n_accepted / draft_n: accepted per drafted token, as llama-server reports it."""
    drafted = draft_n(rec)
    return draft_accepted(rec) / drafted if drafted and drafted > 0 else np.nan


def output_text(rec: Record) -> str:
    """The answer: all content deltas joined."""
    return "".join(c[1] for c in rec.get("chunks", []) if c[1])


def finish_reason(rec: Record) -> str | None:
    reasons = [c[4] for c in rec.get("chunks", []) if c[4]]
    return reasons[-1] if reasons else None


def stopped_early(rec: Record) -> bool:
    """Fewer tokens than asked for: the output-length target was not met."""
    asked = (rec.get("request") or {}).get("max_tokens")
    return asked is not None and output_tokens(rec) < float(asked)


METRICS: dict[str, Callable[[Record], float]] = {
    "ttft_ms": ttft_ms,
    "ttfa_ms": ttfa_ms,
    "e2e_ms": e2e_ms,
    "tpot_ms": tpot_ms,
    "itl_ms": itl_ms,
    "itl_p99_ms": itl_p99_ms,
    "chunk_itl_ms": chunk_itl_ms,
    "tokens_per_chunk": tokens_per_chunk,
    "decode_tok_s": decode_tok_s,
    "client_decode_tok_s": client_decode_tok_s,
    "decode_disagrees": decode_disagrees,
    "server_decode_tok_s": server_decode_tok_s,
    "prefill_ms": prefill_ms,
    "prefill_tok_s": prefill_tok_s,
    "output_tokens": output_tokens,
    "prompt_tokens": prompt_tokens,
    "cached_tokens": cached_tokens,
    "draft_n": draft_n,
    "draft_accepted": draft_accepted,
    "acceptance": acceptance,
}
KEYS = ("arm", "workload", "category", "prompt_id", "repeat", "seq", "warmup")


def frame(records: list[Record], include_warmup: bool = False) -> pd.DataFrame:
    """One row per successful request: identity columns then every metric."""
    rows = []
    for rec in records:
        if rec.get("error") is not None or (rec.get("warmup") and not include_warmup):
            continue
        row: dict[str, Any] = {k: rec.get(k) for k in KEYS}
        row.update({name: fn(rec) for name, fn in METRICS.items()})
        # Records imported from other tools have no raw chunks: they carry the values they had.
        row.update(
            {k: float(v) for k, v in (rec.get("imported") or {}).items() if k in METRICS and v is not None}
        )
        row["stopped_early"] = stopped_early(rec)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*KEYS, *METRICS, "stopped_early"])
