"""Stalled requests: a paused engine, not a slow one — and what they do to modes and categories.

On a busy box the scheduler can stop the engine for a second in the middle of a request: one
gap between two token chunks is many times the request's usual gap. Such a request's decode rate
measures the pause; a few of them make an arm look bimodal, make whichever category they fell in
look slow, and drag the geometric-mean speedup. They are named (STALLED), and the bimodality
and category checks run without them so that a pause never reads as a per-category effect.

A long gap is not always a pause. A speculative arm's verification round of a long draft takes
many single steps' time and then delivers its accepted tokens at once (gemma3-270m, n-gram drafts
of up to 40: gaps of 0.32–0.69 s, each ending in exactly accepted + 1 tokens); a rejected draft
costs the same round and delivers one token. So a gap is a round, not a stall, where

* the stream shows decoding: the read window that ends the gap brings two or more tokens;
* or it matches the arm's verification-round time: the request drafted (or its server does not
  say) and the gap is no longer than ``ROUND_SLACK`` × the longest round the arm's stream showed;
* or the server's own decode time leaves the gap out (the engine was not paused; the delay was
  on the way to the client).

STALLED is left for gaps where none of these shows decoding; the requests with rounds stay in the
bimodality and category checks, since they are exactly where speculation works.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from specbench.analysis import metrics
from specbench.analysis._arrays import FloatArray, median_1d
from specbench.analysis.metrics import BURST_GAP_MS, NS_PER_MS
from specbench.analysis.packed import PackedChunks, packed
from specbench.store.record import Record

STALL_FACTOR = 20.0  # a gap this many times the request's median step gap is a pause, not a step
STALL_MIN_MS = 250.0  # and at least this long: a fast model's 1 ms → 25 ms hiccup is no stall
# llama.cpp streams the tokens a speculative step accepted as separate chunks microseconds apart:
# gaps below this share of the mean gap are tokens of one step, not steps. Without this the
# "usual gap" of an n-gram arm is a within-burst 0.05 ms and every ≥ 250 ms verification round on a
# busy box reads as a pause (gemma3-270m ngram-simple: rounds of 125–141 ms, one of 270 ms).
BURST_SHARE = 0.1
ROUND_TOKENS = 2  # tokens in the read window that ends a gap: a round delivered them, decoding ran
# A rejected draft costs a full round and yields one token; rounds of one arm vary with the draft
# length and the box's load (0.32–0.69 s above), so a single-token gap up to this multiple of the
# arm's longest stream-seen round may be one.
ROUND_SLACK = 1.5
SERVER_SHARE = 0.5  # the server's decode time short of the client's window by this share of a gap


Rows = Sequence[Record]


class Stream(NamedTuple):
    """What one request's stream shows about its gaps: each gap between read windows (chunks
    closer than ``BURST_GAP_MS``, or a tenth of the mean gap if longer, came in one burst of
    reads: no decoding step is that short), the tokens of the window it ends (that chunk and those
    read right after it), the usual gap between decoding steps, and the client's decode window
    (first to last token)."""

    gap_ms: FloatArray
    gap_tokens: FloatArray
    usual_ms: float
    window_ms: float

    @property
    def rounds_ms(self) -> FloatArray:
        """The gaps the stream shows to be verification rounds (a burst of tokens ends each)."""
        return self.gap_ms[self.gap_tokens >= ROUND_TOKENS]

    @property
    def round_ms(self) -> float | None:
        """The longest gap the stream shows to be a verification round (None: it shows none)."""
        return _round_time([self.rounds_ms])


def stream(rec: Record) -> Stream | None:
    """The request's :class:`Stream`; None with fewer than three timed chunks. Tokens per chunk:
    the server's running count where every token chunk has it (several per chunk on vLLM), else
    one, as :func:`specbench.analysis.metrics.chunk_tokens` counts them."""
    found = packed(rec)
    if found is None:
        return _stream(*_columns(rec))
    if "stream" not in found.memo:  # three checks read every stream: shaped once per record
        found.memo["stream"] = _stream(*_packed_columns(found))
    return found.memo["stream"]  # type: ignore[no-any-return]


Columns = tuple[FloatArray, FloatArray, "npt.NDArray[np.float64] | None"]


def _columns(rec: Record) -> Columns:
    """(stamp in ms, token chunk 1.0 / 0.0, running-count steps or None) of the rows that carry
    a token or a finish reason."""
    rows = [c for c in rec.chunk_rows() if c.content or c.reasoning or c.tool_calls or c.finish_reason]
    carries = [bool(c.content or c.reasoning or c.tool_calls) for c in rows]
    running = [c.tokens for c, tok in zip(rows, carries, strict=True) if tok]
    steps = np.diff([0, *running]).astype(np.float64) if None not in running else None
    t = np.asarray([c.t_ns for c in rows], dtype=np.float64) / NS_PER_MS
    return t, np.asarray(carries, dtype=np.float64), steps


def _packed_columns(found: PackedChunks) -> Columns:
    """:func:`_columns` from the packed arrays (the same values, no row objects)."""
    carries, finish = found.flags()
    rows = carries | finish
    running = found.tokens[rows][carries[rows]].astype(np.float64)
    steps = None if np.isnan(running).any() else running - np.concatenate(([0.0], running[:-1]))
    t = found.t_ns[rows].astype(np.float64) / NS_PER_MS
    return t, carries[rows].astype(np.float64), steps


def _stream(t: FloatArray, ones: FloatArray, steps: npt.NDArray[np.float64] | None) -> Stream | None:
    tokens = ones if steps is None or (steps < 0).any() else _spread(ones, steps)
    keep = np.isfinite(t)  # an imported row may hold no time
    t, tokens = t[keep], tokens[keep]
    if t.size < 3:
        return None
    diffs = t[1:] - t[:-1]  # np.diff's values, without its overhead (issue 31)
    split = BURST_SHARE * diffs.mean()  # closer chunks are tokens of one step, not steps
    usual = median_1d(diffs[diffs >= split])  # np.median's value, faster
    # A round's tokens come in one read, or reads microseconds apart; on a busy client a little
    # further, but never a step apart.
    new = diffs >= max(BURST_GAP_MS, split)
    window = np.cumsum(np.concatenate(([False], new)))  # read window of each chunk
    starts = np.flatnonzero(new) + 1
    sent = t[tokens > 0]
    return Stream(
        diffs[starts - 1],
        np.bincount(window, weights=tokens)[window[starts]],
        usual,
        float(sent[-1] - sent[0]) if sent.size else 0.0,
    )


def _spread(ones: FloatArray, steps: npt.NDArray[np.float64]) -> FloatArray:
    """The per-token-chunk counts put where the token chunks are (the finish chunk carries none)."""
    out = np.zeros_like(ones)
    out[ones > 0] = steps
    return out


def _round_time(rounds: Sequence[FloatArray]) -> float | None:
    """The longest round: a rejected draft of the longest length costs about that much. (A real
    pause that happened to end in a burst would raise it; only arms that speculate use it.)"""
    joined = np.concatenate(rounds) if rounds else np.array([])
    return float(joined.max()) if joined.size else None


def _may_draft(rec: Record, speculating: Collection[str] | None) -> bool:
    """The server says the request drafted; or it does not say and its arm speculates (configured;
    ``speculating`` None: not known, so it may). A 0, or a silent server of an arm that does not
    speculate (a vLLM baseline), rules a round out."""
    drafted = metrics.draft_n(rec)
    if np.isnan(drafted):
        return speculating is None or str(rec.arm) in speculating
    return bool(drafted > 0)


def _server_left_out(rec: Record, gap_ms: float, window_ms: float) -> bool:
    """The server's own decode time (its first-to-last-token time, else its rate) is shorter
    than the client's window by most of the gap: the engine decoded on, the delay came after it."""
    timed = rec.counts.decode_ms  # llama.cpp: first to last token
    if timed is not None and timed > 0:
        return timed < window_ms - SERVER_SHARE * gap_ms
    rate, n = metrics.server_decode_tok_s(rec), metrics.output_tokens(rec)
    if not (np.isfinite(rate) and rate > 0 and n > 1):
        return False
    return 1000.0 * (n - 1) / rate < window_ms - SERVER_SHARE * gap_ms


def _stall(
    rec: Record,
    s: Stream,
    rounds: float | None,
    speculating: Collection[str] | None = None,
) -> float:
    """The longest long gap where neither the stream nor the server's timing shows decoding."""
    for ms in _long_single_gaps(rec, s):
        if rounds is not None and ms <= ROUND_SLACK * rounds and _may_draft(rec, speculating):
            continue  # a rejected draft's round: as long as a round, one token
        if not _server_left_out(rec, float(ms), s.window_ms):
            return float(ms)
    return 0.0


def _long_single_gaps(rec: Record, s: Stream) -> list[float]:
    """The stream's long gaps that no burst of tokens ended, longest first: kept with a loaded
    record's arrays (three checks ask; most requests have none)."""
    found = packed(rec)
    if found is not None and found.memo.get("stream") is s and "long_gaps" in found.memo:
        return found.memo["long_gaps"]  # type: ignore[no-any-return]
    long = (s.gap_ms >= STALL_MIN_MS) & (s.gap_ms >= STALL_FACTOR * max(s.usual_ms, 1e-9))
    single = long & (s.gap_tokens < ROUND_TOKENS)  # a burst after the gap: a round delivered it
    gaps = sorted(s.gap_ms[single], reverse=True)
    if found is not None and found.memo.get("stream") is s:
        found.memo["long_gaps"] = gaps
    return gaps


def stall_ms(rec: Record, rounds: float | None = None) -> float:
    """The longest gap between token chunks that is a stall (else 0.0): long against the request's
    usual gap between decoding steps (bursts of one step's tokens left out), and no round (see
    the module docstring). ``rounds`` is the arm's longest stream-seen verification round; None:
    this request's own."""
    s = stream(rec)
    if s is None:
        return 0.0
    return _stall(rec, s, s.round_ms if rounds is None else rounds)


def measured(records: Rows) -> list[Record]:
    return [r for r in records if r.measured]


def arm_rounds(records: Rows) -> dict[str, float]:
    """Arm → its longest verification round that a measured request's stream showed."""
    return _arm_rounds([(r, stream(r)) for r in measured(records)])


def _arm_rounds(streams: Sequence[tuple[Record, Stream | None]]) -> dict[str, float]:
    seen: dict[str, list[FloatArray]] = {}
    for rec, s in streams:
        if s is not None and s.rounds_ms.size:
            seen.setdefault(str(rec.arm), []).append(s.rounds_ms)
    return {arm: t for arm, rounds in seen.items() if (t := _round_time(rounds)) is not None}


def stalled(records: Rows, speculating: Collection[str] | None = None) -> dict[tuple[str, Any], float]:
    """(arm, seq) → stall length in ms, for every measured request that stalled. ``speculating``:
    the arms configured to speculate (None: not known)."""
    # The findings, the category splits and the decision table each ask for the same run's
    # stalls: found once per set of loaded records (the very same record objects, issue 31).
    key = (tuple(map(id, records)), None if speculating is None else frozenset(speculating))
    if _STALLED and _STALLED[0][0] == key:
        return dict(_STALLED[0][2])
    out = _stalled(records, speculating)
    if all(packed(r) is not None for r in records if r.chunks):  # loaded: read-only arrays
        _STALLED[:] = [(key, list(records), out)]  # the list keeps the ids from being reused
    return dict(out)


#: The last :func:`stalled` answer: (key, the records it was for, answer).
_STALLED: list[tuple[Any, list[Any], dict[tuple[str, Any], float]]] = []


def _stalled(records: Rows, speculating: Collection[str] | None) -> dict[tuple[str, Any], float]:
    streams = [(r, stream(r)) for r in measured(records)]
    rounds = _arm_rounds(streams)  # an arm with none: no request of it shows one either
    out = {}
    for rec, s in streams:
        arm = str(rec.arm)
        if s is not None and (ms := _stall(rec, s, rounds.get(arm), speculating)) > 0:
            out[(arm, rec.seq)] = ms
    return out


def without_stalls(
    df: pd.DataFrame, records: Rows, speculating: Collection[str] | None = None
) -> pd.DataFrame:
    """The request frame less its stalled requests."""
    return drop_stalled(df, stalled(records, speculating))


def drop_stalled(df: pd.DataFrame, keys: Mapping[tuple[str, Any], float]) -> pd.DataFrame:
    if not keys or "seq" not in df.columns:
        return df
    hit = [(str(a), s) in keys for a, s in zip(df["arm"], df["seq"], strict=True)]
    return df[~np.asarray(hit, dtype=bool)]
