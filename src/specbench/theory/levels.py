"""Speculation across concurrency levels: each level predicted, and where it stops paying.

Concurrency already enters every prediction (theory/speedup.py): a baseline step decodes one token
for each of C sequences, ``C / t(target, C × 1)``, and a round drafts for all C at once and
verifies ``C × (γ+1)`` tokens in one pass. What grows with C is the verify: a memory-bound step
stays about one weight read while C is small, and the verify's C·(γ+1) tokens reach the compute
roof (or the engine's slower kernels, theory/measured/curves.py) first. So the speedup falls with C, and a
sweep asks where it crosses 1.

Where it stops paying is said from the intervals, not the centres: the first level whose whole
80 % interval lies at or below ×1.00, bracketed by the level before it::

    speculation stops paying between 8 and 64 in flight (predicted ×1.08 [0.97–1.21] at 8,
    ×0.84 [0.74–0.95] at 64)

A level whose centre is below 1 but whose interval reaches above it only *may* have stopped
paying, and the sentence says that instead; a sweep whose first level is already at or below 1
never paid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specbench.errors import ConfigError
from specbench.theory.speedup import Prediction, predict
from specbench.theory.spread.interval import Interval, no_spread


@dataclass(frozen=True)
class Level:
    """One level of a sweep: requests in flight and the speedup there with its interval."""

    concurrency: int
    speedup: Interval

    @property
    def high(self) -> float:
        """The interval's top, or the centre where there is no interval."""
        return self.speedup.high if math.isfinite(self.speedup.high) else self.speedup.central

    def text(self) -> str:
        return f"{_speedup(self.speedup)} at {self.concurrency}"


def _speedup(i: Interval) -> str:
    """``×1.08 [0.97–1.21]``, or ``×1.08`` without an interval."""
    if math.isfinite(i.low) and math.isfinite(i.high) and i.high > i.low:
        return i.text()
    return f"×{i.central:.2f}"


def parse_levels(text: str) -> list[int]:
    """``1,8,64`` as sorted distinct levels; a ConfigError names what is not a level."""
    try:
        levels = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"--concurrency: {text!r} is not a comma-separated list of integers") from None
    if not levels or levels[0] < 1:
        raise ConfigError(f"--concurrency: {text!r} needs levels of at least 1")
    return levels


def predict_levels(levels: Sequence[int], *args: Any, **kwargs: Any) -> list[Prediction]:
    """:func:`~specbench.theory.speedup.predict` at each level (``concurrency`` taken from
    ``levels``); the other arguments as ``predict`` takes them."""
    if "concurrency" in kwargs:
        raise ConfigError("predict_levels takes its concurrency from levels")
    if kwargs.get("baseline_tok_s") is not None and len(levels) > 1:
        # a measured baseline is one level's rate: fitting η_bw to it at every level would
        # claim the same aggregate rate at 1 and at 64 in flight
        raise ConfigError(
            "a measured baseline (--baseline-tok-s) belongs to one level: give one --concurrency"
        )
    return [predict(*args, concurrency=c, **kwargs) for c in levels]


def levels_of(predictions: Sequence[Prediction]) -> list[Level]:
    """Each prediction's level and speedup interval (no width where it carries none)."""
    return [
        Level(p.concurrency, p.interval.speedup if p.interval else no_spread(p.speedup)) for p in predictions
    ]


def stops_paying(levels: Sequence[Level], what: str = "predicted") -> str:
    """Where speculation stops paying over ``levels`` (the module docstring's rule), as a sentence."""
    ordered = sorted(levels, key=lambda lv: lv.concurrency)
    if not ordered:
        return "no level to judge"
    below = next((i for i, lv in enumerate(ordered) if lv.high <= 1.0), None)
    if below == 0:
        first = ordered[0]
        return f"speculation does not pay even at {first.concurrency} in flight ({what} {first.text()})"
    if below is not None:
        before, at = ordered[below - 1], ordered[below]
        return (
            f"speculation stops paying between {before.concurrency} and {at.concurrency} in flight"
            f" ({what} {before.text()}, {at.text()})"
        )
    return _may_stop(ordered, what)


def _may_stop(ordered: Sequence[Level], what: str) -> str:
    """No level's interval lies at or below 1: whether a centre does, or it pays throughout."""
    centre = next((i for i, lv in enumerate(ordered) if lv.speedup.central <= 1.0), None)
    if centre is None:
        last = ordered[-1]
        return f"speculation pays at every level up to {last.concurrency} in flight ({what} {last.text()})"
    at = ordered[centre]
    where = (
        f"between {ordered[centre - 1].concurrency} and {at.concurrency}"
        if centre > 0
        else f"already at {at.concurrency}"
    )
    shown = ", ".join(lv.text() for lv in ordered[max(0, centre - 1) : centre + 1])
    return (
        f"speculation may stop paying {where} in flight: the centre falls to ×1.00 or below, but the"
        f" interval reaches above it ({what} {shown})"
    )


def format_levels(predictions: Sequence[Prediction]) -> str:
    """One line per level (baseline per sequence, speedup, the widest term), then where it stops paying."""
    first = predictions[0]
    draft = f" (draft {first.draft_model})" if first.draft_model else ""
    lines = [
        f"{first.model} on {first.gpu}, {first.quant}, {first.method}{draft}, K={first.draft_max},"
        f" ctx={first.context}, by requests in flight:"
    ]
    for p in predictions:
        base = p.interval.baseline_tok_s.text(1, "") if p.interval else f"{p.baseline_tok_s:.1f}"
        per_seq = p.baseline_tok_s / p.concurrency
        widest = f"; widest: {p.interval.dominant}" if p.interval and p.interval.dominant else ""
        speedup = p.interval.speedup.text() if p.interval else f"×{p.speedup:.2f}"
        lines.append(
            f"  C={p.concurrency:<4} baseline {base} tok/s ({per_seq:.1f} per sequence),"
            f" step {p.breakdown.target_step_s * 1e3:.2f} ms, verify {p.breakdown.verify_s * 1e3:.2f} ms,"
            f" speedup {speedup}{widest}"
        )
    lines.append(stops_paying(levels_of(predictions)))
    return "\n".join(lines)
