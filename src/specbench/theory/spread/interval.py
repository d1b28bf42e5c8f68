"""An interval around a prediction, from the spread of the terms not known for its setup.

A prediction depends on terms the architecture and the datasheet cannot give (the engine's
verify cost at T tokens, its host work per round, the kernel-launch latency, the bandwidth
efficiency without a measured baseline, an acceptance that was estimated). Each such term
carries a band, ``low``–``high``, meant as its 80 % range for this setup, and where that band
comes from (theory/spread/terms.py). The model is evaluated once per term at each end of its band, the
others at their central values; each evaluation moves the result by a log-ratio, and the moves
of all terms add in quadrature, on each side separately::

    d_i± = ln(S(term i at an end) / S(central))          (each end's move goes to its own side)
    low  = S · exp(−√Σ (d_i−)²)      high = S · exp(√Σ (d_i+)²)

That is the first-order propagation of independent terms: with every band an 80 % range, the
interval is about an 80 % range too. It costs two evaluations a term, is deterministic, and
names what dominates the width (the term with the largest move), which sampling would not say
without more work. It assumes the terms are independent and the model near-monotonic within a
band; where two terms are correlated the interval is too narrow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from specbench.theory.measured.bands import ENDS as ENDS
from specbench.theory.measured.bands import End as End
from specbench.theory.measured.bands import observed_band as observed_band


@dataclass(frozen=True)
class Term:
    """One term not known for a setup: its band and its central value, in ``unit`` (scaled by
    ``display`` for the text: 1e3 shows seconds as ms), what it is and where the band is from.

    ``key`` names what the model changes (an :class:`~specbench.theory.cost.Efficiency` field,
    ``verify``, ``launch`` or ``acceptance``; theory/spread/terms.py applies it)."""

    key: str
    label: str
    low: float
    central: float
    high: float
    unit: str = ""
    source: str = ""
    display: float = 1.0
    digits: int = 2

    def at(self, end: End | None) -> float:
        """The term's value at ``end`` of its band (None: the central value)."""
        return self.central if end is None else self.low if end == "low" else self.high

    def describe(self) -> str:
        """``the verify cost of llama.cpp CUDA (f16/bf16, dense) at 5 tokens: 1.28–1.58 decode steps``."""
        f = self.display
        unit = f" {self.unit}" if self.unit else ""
        lo, hi = f"{self.low * f:.{self.digits}f}", f"{self.high * f:.{self.digits}f}"
        return f"{self.label}: {lo}–{hi}{unit}"


@dataclass(frozen=True)
class Swing:
    """What one term does to a result: the result at the low and at the high end of its band."""

    term: Term
    at_low: float
    at_high: float

    def moves(self, central: float) -> tuple[float, float]:
        """(downward, upward) log-moves of the result, each ≥ 0 (an end that moves nothing, or
        both ends moving one way, leaves the other side 0)."""
        down = up = 0.0
        for value in (self.at_low, self.at_high):
            if central > 0 and value > 0 and math.isfinite(value):
                d = math.log(value / central)
                down, up = max(down, -d), max(up, d)
        return down, up

    def width(self, central: float) -> float:
        """The larger of the two moves: how much of the interval this term makes."""
        return max(self.moves(central))


@dataclass(frozen=True)
class Interval:
    """A result with its interval and the swings of the terms that made it."""

    central: float
    low: float
    high: float
    swings: tuple[Swing, ...] = ()

    @property
    def dominant(self) -> Swing | None:
        """The term that moves the result most (None when no term moves it)."""
        moving = [s for s in self.swings if s.width(self.central) > 0]
        return max(moving, key=lambda s: s.width(self.central)) if moving else None

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high

    def text(self, digits: int = 2, mark: str = "×") -> str:
        """``×1.40 [1.10–1.90]`` (``mark`` "" for rates)."""
        return (
            f"{mark}{self.central:.{digits}f} [{self.low:.{digits}f}–{self.high:.{digits}f}]"
            if math.isfinite(self.central)
            else "—"
        )

    def dominant_text(self) -> str | None:
        """``the verify cost of … : 1.28–1.58 decode steps`` for the dominant term, or None."""
        d = self.dominant
        return d.term.describe() if d else None


def propagate(central: float, swings: Sequence[Swing]) -> Interval:
    """The interval of ``central`` from the terms' swings (module docstring: quadrature of the
    log-moves, each side on its own)."""
    down = math.sqrt(sum(s.moves(central)[0] ** 2 for s in swings))
    up = math.sqrt(sum(s.moves(central)[1] ** 2 for s in swings))
    if not (central > 0 and math.isfinite(central)):
        return Interval(central, math.nan, math.nan, tuple(swings))
    return Interval(central, central * math.exp(-down), central * math.exp(up), tuple(swings))


def swings_of(terms: Iterable[Term], evaluate: Callable[[Term, End], float | None]) -> list[Swing]:
    """Each term's result at its two ends; ``evaluate`` may return None where an end cannot be
    evaluated (a baseline no efficiency explains), which then moves nothing."""
    out = []
    for t in terms:
        low, high = evaluate(t, "low"), evaluate(t, "high")
        out.append(Swing(t, math.nan if low is None else low, math.nan if high is None else high))
    return out


def no_spread(value: float) -> Interval:
    """An interval of no width: a result that depends on no unknown term."""
    return Interval(value, value, value)
