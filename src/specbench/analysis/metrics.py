"""Per-request metrics computed from raw records, one small function per metric.

A record is a :class:`specbench.store.record.Record`; its ``chunks`` are
:class:`specbench.store.schema.Chunk` rows (``t_ns`` measured from just before the request was
sent, the deltas, and from schema 2 the server's running token count). Token counts come from the
server (``usage``, or the engine's own counts: :class:`~specbench.store.record.ServerCounts`),
never from the chunk count: with speculation several tokens may arrive in one chunk
(docs/mistakes.md, mistake 10). The server's counts arrive engine-neutral (the engine read its own
fields when the record was read: :func:`specbench.engines.read_record`); nothing here names them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from specbench.analysis.packed import packed
from specbench.analysis.tokenrows import TOKENS_KEY, find_tokens, once, token_chunks
from specbench.engines import read_record
from specbench.store.record import Record, as_records

NS_PER_MS = 1e6


#: Where :func:`frame`'s copy of a record keeps its per-token gaps (two columns read them).
GAPS_KEY = "_token_gaps_ms"


def with_token_chunks(rec: Record) -> Record:
    """A measuring copy of ``rec`` with its token chunks found once, for the metrics (its memo
    is the place for the metrics that others read again: :func:`specbench.analysis.tokenrows.once`)."""
    return rec.measuring({TOKENS_KEY: find_tokens(rec)})


@once
def output_tokens(rec: Record) -> float:
    """usage.completion_tokens, else the server's own count of generated tokens."""
    value = rec.completion_tokens
    if value is ...:
        value = rec.counts.output_tokens
    return float(value) if value is not None else np.nan


def prompt_tokens(rec: Record) -> float:
    """usage.prompt_tokens (llama.cpp: processed + cached)."""
    value = rec.prompt_tokens
    return float(value) if value is not None else np.nan


def cached_tokens(rec: Record) -> float:
    """Prompt tokens served from the cache: the server's own count, else
    usage.prompt_tokens_details.cached_tokens."""
    value = rec.counts.cached_tokens
    if value is None:
        value = rec.usage_cached_tokens
    return float(value) if value is not None else np.nan


def ttft_ms(rec: Record) -> float:
    """Time to first generated token of any kind (content, reasoning or tool call)."""
    t = token_chunks(rec).t_ns
    return t[0] / NS_PER_MS if t.size else np.nan


def ttfa_ms(rec: Record) -> float:
    """Time to first answer token (content or tool call), after any reasoning."""
    first = token_chunks(rec).answer_t_ns
    return first / NS_PER_MS if first is not None else np.nan


def e2e_ms(rec: Record) -> float:
    """Send to end of stream."""
    return float(rec.t_end_ns) / NS_PER_MS if rec.t_end_ns is not None else np.nan


def decode_window_ms(rec: Record) -> float:
    """First to last token chunk: the client-side decode window."""
    t = token_chunks(rec).t_ns
    return (t[-1] - t[0]) / NS_PER_MS if t.size > 1 else np.nan


@once
def tpot_ms(rec: Record) -> float:
    """(t_last − t_first) / (output_tokens − 1): the first token is prefill's."""
    n = output_tokens(rec)
    return decode_window_ms(rec) / (n - 1) if n > 1 else np.nan


#: Under 10 µs per token (100 000 tok/s for one stream) no engine decodes: the chunks came in one
#: burst of socket reads (a CPU vLLM on a busy box, issue 15), and their spacing times nothing.
BURST_TPOT_MS = 0.01
#: Chunks read less than this apart came in one burst of reads: no engine step is this short.
BURST_GAP_MS = 0.1
#: The first token's burst holding this share of the token chunks means the first stamp came late
#: (the decode had run while the client was not reading) and the window is too short: a real
#: vLLM n-gram request read 24 of 34 chunks at once, 60 ms after sending, and "5279 tok/s" where
#: its repeats read 1693 and 2226; no on-time request of the audited runs passed a third.
LEAD_BURST_SHARE = 0.5
#: ... or the first token and this share of the chunks after it stamped within a tiny window next
#: to the request's TTFT (first token at 481 ms, then 95 chunks in 28 ms), at a spacing no single
#: stream decodes at. Only from the first token: a burst later on is one verification round's
#: tokens sent one per chunk (llama.cpp: a token, 136 ms, then 11 tokens within 0.5 ms), timed.
BUNCH_SHARE, BUNCH_TTFT_SHARE, BUNCH_TPOT_MS = 0.9, 0.1, 1.0


@once
def bunched(rec: Record) -> float:
    """1.0 when the client's stamps cannot time the decode (see the constants above), 0.0 when
    they can, NaN with fewer than two token chunks."""
    stamps = token_chunks(rec).t_ns
    if stamps.size < 2:
        return np.nan
    t = stamps.astype(float) / NS_PER_MS
    n = output_tokens(rec)
    if n > 1 and (t[-1] - t[0]) / (n - 1) < BURST_TPOT_MS:
        return 1.0
    late = np.flatnonzero(t[1:] - t[:-1] >= BURST_GAP_MS)  # np.diff, without its overhead
    lead = int(late[0]) + 1 if late.size else t.size  # chunks in the first token's burst
    if lead >= LEAD_BURST_SHARE * t.size:
        return 1.0
    k = int(np.ceil(BUNCH_SHARE * t.size))
    span = float(t[k - 1] - t[0])
    return float(span < BUNCH_TTFT_SHARE * t[0] and span < BUNCH_TPOT_MS * (k - 1))


@once
def client_decode_tok_s(rec: Record) -> float:
    """(output_tokens − 1) / (t_last − t_first), measured by the client. When the chunks arrived
    bunched (:func:`bunched`: a tiny model answering in a few ms, a server or client starved of
    CPU) the client cannot time the decode; the server's own rate (:func:`server_decode_tok_s`)
    stands in, NaN if it has none."""
    if bunched(rec) == 1.0:
        return server_decode_tok_s(rec)
    tpot = tpot_ms(rec)
    return 1000.0 / tpot if tpot and tpot > 0 else np.nan


CLIENT_SERVER_TOLERANCE = 0.25  # client and server decode rates may differ this much (relative)


@once
def decode_disagrees(rec: Record) -> float:
    """1.0 when the client's decode rate and the server's own differ by more than the tolerance
    (a stalled stream: first token late, then every chunk at once), 0.0 when they agree, NaN when
    the server gives no timing."""
    # The client's own window, bunched or not: a stall it stamped late is exactly the disagreement
    # to report (one burst under BURST_TPOT_MS times nothing at all, so it disagrees with nothing).
    tpot = tpot_ms(rec)
    client = 1000.0 / tpot if tpot >= BURST_TPOT_MS else np.nan
    server = server_decode_tok_s(rec)
    if np.isnan(client) or np.isnan(server) or server <= 0:
        return np.nan
    return float(abs(client / server - 1.0) > CLIENT_SERVER_TOLERANCE)


def decode_tok_s(rec: Record) -> float:
    """The trustworthy decode rate: the client's, unless the server's own timing disagrees with
    it beyond the tolerance — then the server's (it timed the tokens, not the stream's delivery).
    A bunched stream's client rate is already the server's, NaN when the server timed nothing."""
    return server_decode_tok_s(rec) if decode_disagrees(rec) == 1.0 else client_decode_tok_s(rec)


def chunk_tokens(rec: Record) -> list[int] | None:
    """Tokens in each token chunk, from the server's running count sent with every chunk (schema
    2 rows' sixth field); None when any token chunk lacks it (older records, other servers)."""
    steps = _chunk_steps(rec)
    return None if steps is None else [int(n) for n in steps]


def _chunk_steps(rec: Record) -> npt.NDArray[Any] | None:
    """:func:`chunk_tokens` as an array (the gaps read it so, without a list between)."""
    counts = token_chunks(rec).counts
    if counts is None or not len(counts):
        return None
    steps = (
        np.diff([0, *counts])
        if isinstance(counts, list)
        else np.concatenate((counts[:1], counts[1:] - counts[:-1]))
    )
    return steps if (steps >= 0).all() else None


def _token_gaps_ms(rec: Record) -> np.ndarray:
    """Per-token inter-token intervals: a chunk carrying k tokens after a gap g counts as k
    intervals of g/k (a speculative step delivers several tokens at once). Without per-chunk
    counts, every chunk is assumed to carry the request's mean tokens per chunk. Found once per
    record of :func:`frame` (its median and its p99 are both columns)."""
    memo = rec.memo
    found: np.ndarray | None = memo.get(GAPS_KEY) if memo is not None else None
    if found is None:
        found = _gaps_ms(rec)
        if memo is not None:  # the frame's own copy of the record (with_token_chunks): keep them
            memo[GAPS_KEY] = found
    return found


def _gaps_ms(rec: Record) -> np.ndarray:
    t = token_chunks(rec).t_ns
    if t.size < 2:
        return np.array([])
    gaps: npt.NDArray[np.float64] = (
        t[1:] - t[:-1]
    ) / NS_PER_MS  # np.diff's values (issue 31: a tenth of its time)
    if not gaps.any():  # every chunk stamped by one read: no latency was measured, not 0 ms
        return np.array([])
    counts = _chunk_steps(rec)
    if counts is not None:
        # whole tokens, as chunk_tokens gives them (an odd fractional count: truncated, as int())
        per = counts[1:].astype(np.int64).astype(float)
        keep = per > 0
        return np.repeat(gaps[keep] / per[keep], per[keep].astype(int))
    n = output_tokens(rec)
    if not n > 1:
        return np.array([])
    return gaps * (t.size - 1) / (n - 1)


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
    t = token_chunks(rec).t_ns
    return float(np.median(np.diff(t))) / NS_PER_MS if t.size > 1 else np.nan


def tokens_per_chunk(rec: Record) -> float:
    """Generated tokens per streamed token chunk: 1 for plain decoding, more when a speculative
    step sends several accepted tokens in one chunk (a spec-decode signal of its own)."""
    tokens, n = token_chunks(rec).t_ns, output_tokens(rec)
    return n / tokens.size if tokens.size and n > 0 else np.nan


@once
def server_decode_tok_s(rec: Record) -> float:
    """The server's own decode rate (llama.cpp: tokens after the first over its first-to-last
    token time; vLLM: from its per-request mean inter-token latency,
    ``--enable-per-request-metrics``); NaN without one."""
    value = rec.counts.decode_tok_s
    return value if value is not None else np.nan


def prefill_ms(rec: Record) -> float:
    """The server's prefill time: slot start to first sampled token (queueing excluded)."""
    value = rec.counts.prefill_ms
    return value if value is not None else np.nan


def prefill_tok_s(rec: Record) -> float:
    """Prompt tokens prefilled / prefill time, tokens actually processed (cache hits excluded)."""
    n, ms = rec.counts.prompt_processed, rec.counts.prefill_ms
    return n * 1000.0 / ms if n and ms else np.nan


def draft_n(rec: Record) -> float:
    """Drafted tokens in this request (NaN: the server does not say)."""
    value = rec.counts.drafted
    return value if value is not None else np.nan


def draft_accepted(rec: Record) -> float:
    """Accepted draft tokens in this request (NaN: the server does not say)."""
    value = rec.counts.accepted
    return value if value is not None else np.nan


def acceptance(rec: Record) -> float:
    """Accepted per drafted token, as the server counts them."""
    drafted = draft_n(rec)
    return draft_accepted(rec) / drafted if drafted and drafted > 0 else np.nan


def output_text(rec: Record) -> str:
    """The answer: all content deltas joined."""
    found = packed(rec)
    return found.text if found is not None else "".join(c.content for c in rec.chunk_rows() if c.content)


def finish_reason(rec: Record) -> str | None:
    reasons = [c.finish_reason for c in rec.chunk_rows() if c.finish_reason]
    return reasons[-1] if reasons else None


def stopped_early(rec: Record) -> bool:
    """Fewer tokens than asked for: the output-length target was not met."""
    asked = rec.max_tokens
    return asked is not None and output_tokens(rec) < float(asked)


class Metric(NamedTuple):
    """A per-request metric: how to compute it, its unit, and which way is better (None: not a
    figure of merit, e.g. a count; comparing arms on it needs the direction passed explicitly)."""

    fn: Callable[[Record], float]
    unit: str
    better: Literal["higher", "lower"] | None


#: Every per-request metric, in frame column order: the one table other modules read names,
#: units and directions from (stats.metric_higher_is_better, the importer's fields).
METRICS: dict[str, Metric] = {
    "ttft_ms": Metric(ttft_ms, "ms", "lower"),
    "ttfa_ms": Metric(ttfa_ms, "ms", "lower"),
    "e2e_ms": Metric(e2e_ms, "ms", "lower"),
    "tpot_ms": Metric(tpot_ms, "ms", "lower"),
    "itl_ms": Metric(itl_ms, "ms", "lower"),
    "itl_p99_ms": Metric(itl_p99_ms, "ms", "lower"),
    "chunk_itl_ms": Metric(chunk_itl_ms, "ms", "lower"),
    "tokens_per_chunk": Metric(tokens_per_chunk, "tokens/chunk", None),
    "decode_tok_s": Metric(decode_tok_s, "tok/s", "higher"),
    "client_decode_tok_s": Metric(client_decode_tok_s, "tok/s", "higher"),
    "bunched": Metric(bunched, "flag", None),
    "decode_disagrees": Metric(decode_disagrees, "flag", None),
    "server_decode_tok_s": Metric(server_decode_tok_s, "tok/s", "higher"),
    "prefill_ms": Metric(prefill_ms, "ms", "lower"),
    "prefill_tok_s": Metric(prefill_tok_s, "tok/s", "higher"),
    "output_tokens": Metric(output_tokens, "tokens", None),
    "prompt_tokens": Metric(prompt_tokens, "tokens", None),
    "cached_tokens": Metric(cached_tokens, "tokens", None),
    "draft_n": Metric(draft_n, "tokens", None),
    "draft_accepted": Metric(draft_accepted, "tokens", None),
    "acceptance": Metric(acceptance, "ratio", None),
}
KEYS = ("arm", "workload", "phase", "category", "prompt_id", "repeat", "seq", "warmup", "concurrency")
#: The metrics that are order statistics of a request's gaps: :func:`itl_ms`, :func:`itl_p99_ms`,
#: :func:`chunk_itl_ms`. A loaded run takes them many requests at a time (rowbatch.py).
ORDER_STATS = ("itl_ms", "itl_p99_ms", "chunk_itl_ms")


class Later(NamedTuple):
    """A row waiting for its order statistics: its per-token gaps (ms) and its chunk gaps (ns;
    None with fewer than two token chunks)."""

    row: dict[str, Any]
    gaps_ms: npt.NDArray[np.float64]
    chunk_gaps: npt.NDArray[Any] | None


def frame(records: Iterable[Record | Mapping[str, Any]], include_warmup: bool = False) -> pd.DataFrame:
    """One row per successful request: identity columns then every metric (a line not yet read
    as a record is read here)."""
    recs = as_records(list(records), read_record)
    return frame_of([row for rec in recs if (row := frame_row(rec, include_warmup)) is not None])


def frame_row(
    rec: Record, include_warmup: bool = False, later: list[Later] | None = None
) -> dict[str, Any] | None:
    """The request's row of :func:`frame` (None: an error, or a warmup left out), computed from
    its raw chunks: a run is loaded one record at a time (issue 31), each measured as it is read.
    ``later``: the row's order statistics (:data:`ORDER_STATS`) are left out and its gaps put
    there instead, for :mod:`specbench.analysis.rowbatch` to take over many requests at once."""
    if rec.error is not None or (rec.warmup and not include_warmup):
        return None
    row: dict[str, Any] = {k: getattr(rec, k) for k in KEYS}
    rec = with_token_chunks(rec)  # named and filtered once here, not in every metric
    if later is None:
        row.update({name: m.fn(rec) for name, m in METRICS.items()})
    else:
        row.update({name: m.fn(rec) for name, m in METRICS.items() if name not in ORDER_STATS})
        t = token_chunks(rec).t_ns
        later.append(Later(row, _token_gaps_ms(rec), t[1:] - t[:-1] if t.size > 1 else None))
    # Records imported from other tools have no raw chunks: they carry the values they had.
    row.update({k: float(v) for k, v in (rec.imported or {}).items() if k in METRICS and v is not None})
    row["stopped_early"] = stopped_early(rec)
    return row


def frame_of(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The frame of rows made by :func:`frame_row`."""
    return pd.DataFrame(rows, columns=[*KEYS, *METRICS, "stopped_early"])
