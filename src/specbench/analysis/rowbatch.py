"""The request frame of a loaded run, its order statistics taken many requests at a time.

Three columns of :func:`specbench.analysis.metrics.frame` are order statistics of a request's
gaps: the median and the 99th percentile of the per-token gaps, and the median chunk gap. One
``np.median`` or ``np.percentile`` call per request costs tens of microseconds of numpy's own
overhead whatever the stream's length, which at 100,000 requests was most of computing the
metrics (issue 31). :class:`RowBatch` keeps a few thousand requests' gaps, stacks those of
equal length and takes each statistic along the stack's rows: the same numpy function on the
same values, so the same numbers to the bit (a test compares them with the per-request ones).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from specbench.analysis import metrics
from specbench.analysis.metrics import NS_PER_MS, Later
from specbench.store.record import Record

#: Requests held before their statistics are taken: bounds the stacked copies (a few MB).
BATCH = 2048


class RowBatch:
    """Frame rows of one record at a time (:meth:`add`), complete once :meth:`rows` is read."""

    def __init__(self, include_warmup: bool = False) -> None:
        self.include_warmup = include_warmup
        self._rows: list[dict[str, Any]] = []
        self._later: list[Later] = []

    def add(self, rec: Record) -> None:
        row = metrics.frame_row(rec, self.include_warmup, self._later)
        if row is not None:
            self._rows.append(row)
        if len(self._later) >= BATCH:
            self._flush()

    def rows(self) -> list[dict[str, Any]]:
        self._flush()
        return self._rows

    def _flush(self) -> None:
        later, self._later = self._later, []
        _fill(later, [w.gaps_ms for w in later], {"itl_ms": _median, "itl_p99_ms": _p99})
        _fill(later, [w.chunk_gaps for w in later], {"chunk_itl_ms": _chunk_median})


Statistic = Callable[[npt.NDArray[Any]], npt.NDArray[np.float64]]


def _fill(later: list[Later], arrays: list[npt.NDArray[Any] | None], stats: dict[str, Statistic]) -> None:
    """Each row's ``stats`` of its array, taken over the stack of the arrays of one length and
    type; NaN for an empty or missing array. A value the row has already (an imported record's
    own) is kept, as :func:`specbench.analysis.metrics.frame_row` keeps it."""
    groups: dict[tuple[int, str], list[int]] = defaultdict(list)
    for i, a in enumerate(arrays):
        groups[(0, "") if a is None or not a.size else (a.size, a.dtype.str)].append(i)
    for (size, _), members in groups.items():
        stack = np.stack([arrays[i] for i in members]) if size else None  # type: ignore[misc]
        for name, statistic in stats.items():
            values = statistic(stack).tolist() if stack is not None else [np.nan] * len(members)
            for i, value in zip(members, values, strict=True):
                later[i].row.setdefault(name, value)


def _median(stack: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    out: npt.NDArray[np.float64] = np.median(stack, axis=1)
    return out


def _p99(stack: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    out: npt.NDArray[np.float64] = np.percentile(stack, 99, axis=1)
    return out


def _chunk_median(stack: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    return _median(stack) / NS_PER_MS
