"""A record's token chunks as the per-request metrics read them, found once per record.

:mod:`specbench.analysis.metrics` computes a dozen metrics from the same few facts of a record's
stream: the stamps of the chunks that carry generated text, the server's running token counts
and when the first answer token came. :func:`find_tokens` finds them once, from a loaded run's
packed arrays without building row objects (issue 31), else from the chunk rows; :func:`once`
keeps a metric that other metrics read again (the decode rate reads three) for the record.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from specbench.analysis.packed import packed
from specbench.store.record import Record

#: Where :func:`specbench.analysis.metrics.frame` keeps a record's token chunks in its memo
#: (:meth:`Record.measuring`), found once: a dozen metrics read them, and filtering every
#: record's chunks a dozen times was most of the end-of-run summary (issue 15).
TOKENS_KEY = "_token_chunks"


class Tokens(NamedTuple):
    """A record's token chunks as the metrics read them: their stamps, the server's running
    token counts (None when any token chunk lacks one) and the first answer chunk's stamp."""

    t_ns: npt.NDArray[Any]
    counts: list[int] | npt.NDArray[np.int64] | None
    answer_t_ns: Any


def token_chunks(rec: Record) -> Tokens:
    """Chunks that carry generated text: content, tool calls or reasoning (the answer: content or
    tool calls). llama.cpp's first role-only chunk (``content: null``) is not a token."""
    memo = rec.memo
    found: Tokens | None = memo.get(TOKENS_KEY) if memo is not None else None
    return found if found is not None else find_tokens(rec)


def find_tokens(rec: Record) -> Tokens:
    """The record's :class:`Tokens`, from its packed arrays where it has them."""
    found = packed(rec)
    if found is not None:  # the arrays of a loaded run (issue 31): no row objects
        carries, answer = found.token_flags()
        first = np.flatnonzero(answer)
        counts = found.tokens[carries]
        exact = counts.dtype.kind != "f" or not np.isnan(counts).any()
        return Tokens(
            found.t_ns[carries],
            counts.astype(np.int64) if exact else None,
            found.t_ns[first[0]] if first.size else None,
        )
    rows = [c for c in rec.chunk_rows() if c.carries_token]
    running: list[Any] = [c.tokens for c in rows]
    first_answer = next((c.t_ns for c in rows if c.content or c.tool_calls), None)
    return Tokens(np.asarray([c.t_ns for c in rows]), None if None in running else running, first_answer)


F = TypeVar("F", bound=Callable[[Record], Any])


def once(fn: F) -> F:
    """``fn`` computed once per record of :func:`specbench.analysis.metrics.frame`, kept in the
    memo of its measuring copy: the decode rate reads the bunching check, the disagreement and
    the client's rate, each its own column too, so unkept they ran three times a request (issue
    31). Any other record (no memo): on every call."""
    name = fn.__name__

    @functools.wraps(fn)
    def kept(rec: Record) -> Any:
        memo = rec.memo
        if memo is None:
            return fn(rec)
        if name not in memo:
            memo[name] = fn(rec)
        return memo[name]

    return kept  # type: ignore[return-value]
