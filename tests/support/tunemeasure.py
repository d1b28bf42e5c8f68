"""A base for the tune race's fake measurements (``specbench.tune.race.RaceMeasure``) that keep
per-request rows: how the race compares, counts and fails them; a subclass says how a round
measures (``run_round``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from specbench.analysis import stats


class RowsMeasure:
    """Rows of ``arm``, ``repeat``, ``prompt_id``, ``decode_tok_s`` (and whatever else a subclass
    adds), the rounds run, no arm failing; a comparison on too few rows is None, as the race's
    own measurement gives it."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.rounds: list[list[str]] = []

    def compare(self, arm: str, other: str, confidence: float) -> stats.Comparison | None:
        c = stats.speedup(pd.DataFrame(self.rows), arm, other, "decode_tok_s", confidence=confidence)
        return None if c.too_few else c

    def spent(self) -> tuple[int, int]:
        return sum(map(len, self.rounds)), len(self.rows)

    def failed(self, arm: str) -> str | None:
        return None
