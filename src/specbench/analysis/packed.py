"""A record's chunks packed into arrays once it has been measured (issue 31: bounded memory).

A 256-token stream is a few hundred JSON rows ``[t_ns, content, reasoning, tool_calls,
finish_reason, tokens]``; held as Python lists that is about 200 bytes a row, so 100,000 such
requests took gigabytes. :func:`specbench.analysis.rundata.load_run` computes every per-request
metric from the raw rows (the numbers are those of :func:`specbench.analysis.metrics.frame`),
then keeps each record's chunks as a :class:`PackedChunks`: stamps and token counts in numpy
arrays, the content joined into one string, the rare rows with reasoning, tool calls or a
finish reason kept as they were — about 20 bytes a row. It is still a sequence of
:class:`~specbench.store.schema.Chunk`, rebuilt on access, so every reader of ``chunks`` works as
before; the hot readers (the stream's stamps for the stall checks, the answer text for the
output checks) read the arrays directly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import compress, repeat
from operator import is_not
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from specbench.store.record import Record
from specbench.store.schema import Chunk

_I32 = 2**31


class PackedChunks(Sequence[Chunk]):
    """A record's chunk rows in columns; indexing and iteration give :class:`Chunk` rows equal
    to the ones :func:`specbench.store.schema.chunks` read from the JSON."""

    __slots__ = ("_ends", "_extra", "_has_content", "_text", "memo", "t_ns", "tokens")

    def __init__(self, t_ns: npt.NDArray[Any], columns: list[tuple[Any, ...]]) -> None:
        """From :func:`pack`: the stamps and the other columns of rows already checked."""
        content, reasoning, tool_calls, finish = columns[1:5]
        self.t_ns = t_ns
        counts: tuple[Any, ...] = columns[5] if len(columns) > 5 else (None,) * len(content)
        # Counts and text offsets in 32 bits where they fit (they always do in a real stream):
        # a 256-token record is then ~17 bytes a row.
        exact32 = None not in counts and _within(counts, _I32)
        self.tokens = np.array(counts, dtype=np.int32 if exact32 else np.float64)  # None → NaN
        # Most streams have text in every row: then no per-row pass is needed for either.
        full = None not in content
        self._has_content = (
            np.ones(len(content), dtype=bool)
            if full
            else np.fromiter(map(is_not, content, repeat(None)), dtype=bool, count=len(content))
        )
        text = content if full else [c or "" for c in content]
        self._text = "".join(text)
        ends = np.cumsum(np.fromiter(map(len, text), dtype=np.int64, count=len(text)))
        self._ends = ends.astype(np.int32) if ends.size and ends[-1] < _I32 else ends
        # reasoning, tool calls, finish reason: few rows carry any (the last one its finish reason)
        self._extra = _extra_rows(reasoning, tool_calls, finish)
        self.memo: dict[str, Any] = {}  # what readers derived from these rows (the stream's shape)

    def __len__(self) -> int:
        return int(self.t_ns.size)

    @overload
    def __getitem__(self, i: int) -> Chunk: ...
    @overload
    def __getitem__(self, i: slice) -> list[Chunk]: ...
    def __getitem__(self, i: int | slice) -> Chunk | list[Chunk]:
        if isinstance(i, slice):
            return [self._row(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._row(i)

    def __iter__(self) -> Iterator[Chunk]:
        return (self._row(i) for i in range(len(self)))

    def _row(self, i: int) -> Chunk:
        start = int(self._ends[i - 1]) if i else 0
        content = self._text[start : int(self._ends[i])] if self._has_content[i] else None
        reasoning, tool_calls, finish = self._extra.get(i, (None, None, None))
        n = self.tokens[i].item()
        return Chunk(self.t_ns[i].item(), content, reasoning, tool_calls, finish, None if n != n else int(n))

    @property
    def text(self) -> str:
        """Every content delta joined: the answer (:func:`specbench.analysis.metrics.output_text`)."""
        return self._text

    def content_lengths(self) -> npt.NDArray[np.int64]:
        out = self._ends.astype(np.int64)  # np.diff(ends, prepend=0), without its overhead
        out[1:] -= self._ends[:-1]
        return out

    def extra_rows(self) -> list[Chunk]:
        """The rows with reasoning, tool calls or a finish reason, in order."""
        return [self._row(i) for i in sorted(self._extra)]

    def flags(self) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """(carries a token: content, reasoning or tool calls; has a finish reason) per row."""
        n = len(self)
        other = np.zeros(n, dtype=bool)
        finish = np.zeros(n, dtype=bool)
        for i, (reasoning, tool_calls, reason) in self._extra.items():
            other[i] = bool(reasoning or tool_calls)
            finish[i] = bool(reason)
        return (self.content_lengths() > 0) | other, finish

    def token_flags(self) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """(carries a token: content, reasoning or tool calls; carries an answer token: content or
        tool calls) per row: the rows :func:`specbench.analysis.metrics` times."""
        content = self.content_lengths() > 0
        if not self._extra:
            return content, content
        carries, answer = content.copy(), content.copy()
        for i, (reasoning, tool_calls, _) in self._extra.items():
            carries[i] |= bool(reasoning or tool_calls)
            answer[i] |= bool(tool_calls)
        return carries, answer


def packed(rec: Record) -> PackedChunks | None:
    """The record's chunks when packed, else None (a record read as JSON, not yet measured)."""
    found = rec.chunks
    return found if isinstance(found, PackedChunks) else None


def pack(rec: dict[str, Any]) -> dict[str, Any]:
    """The line ``rec`` with its chunk rows packed (in place, before it is read as a
    :class:`~specbench.store.record.Record`; returned for chaining). Rows the columns
    would not hold exactly (an edited or odd row: a stamp that is no number, content that is no
    text, a count that is no integer) leave the record as it was read."""
    rows = rec.get("chunks")
    if not isinstance(rows, list) or not rows or set(map(type, rows)) != {list}:
        return rec
    if len(set(map(len, rows))) != 1 or len(rows[0]) not in (5, 6):
        return rec
    columns = list(zip(*rows, strict=True))
    kinds = [set(map(type, c)) for c in (columns[0], columns[1], columns[5] if len(columns) > 5 else ())]
    if not (kinds[0] <= {int, float} and kinds[1] <= {str, type(None)} and kinds[2] <= {int, type(None)}):
        return rec
    t_ns = np.array(columns[0], dtype=np.int64 if kinds[0] == {int} else np.float64)
    if len(columns) > 5 and not _within(columns[5], 2**53):
        return rec  # a count float64 would not hold exactly
    rec["chunks"] = PackedChunks(t_ns, columns)
    return rec


def _extra_rows(*columns: tuple[Any, ...]) -> dict[int, tuple[Any, ...]]:
    """Row → (reasoning, tool calls, finish reason) of the rows where any is set. The columns'
    set rows are found in C (``count``, ``compress``): a Python loop over every row of every
    record was a sixth of loading a run (issue 31)."""
    size = len(columns[0])
    rows: set[int] = set()
    for column in columns:
        if column.count(None) != size:
            rows.update(compress(range(size), map(is_not, column, repeat(None))))
    return {i: tuple(c[i] for c in columns) for i in sorted(rows)}


def _within(counts: tuple[Any, ...], bound: int) -> bool:
    """Every count that is there lies strictly within ±``bound`` (min and max run in C: a
    generator over every row was a fifth of loading a run)."""
    there = [n for n in counts if n is not None] if None in counts else counts
    return not there or (-bound < min(there) and max(there) < bound)
