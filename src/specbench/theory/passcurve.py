"""A measured target-pass curve in place of the roofline, for calibrating on a run.

The forward probe (:mod:`specbench.run.forwardprobe`) times the baseline server's prefill of T tokens. The
theory needs the time of a *decode* pass over T tokens, t(T). A prefill request carries fixed
costs of its own (request handling, sampling setup), which a difference cancels, and a decode
step's context-long KV read is paid once however many tokens the pass verifies. So the curve's
*increase* over the C-token prefill is added to the measured decode step::

    t(T) = t_step + max(0, p(T) − p(C))      t_step = 1 / (per-sequence baseline rate), C sequences

with p(T) the median prefill time at T tokens, linear between measured sizes and, past the
largest size m, proportional to T (a long pass is compute-bound: p(T) = p(m) · T / m).

Past m the probe measured nothing, so callers that must not extrapolate silently (a verify of
C·(K+1) tokens at C requests in flight, analysis/predicted) ask :meth:`PassCurve.covers` first
and take the two ends of what the curve allows there: :meth:`held_ratio`, the largest pass held
(a wider pass costs no less), and :meth:`ratio`, the proportional extrapolation (each further
token at the largest pass's cost per token, which a wider matmul does not exceed).

Measured against the rounds of lab runs (error of the baseline-calibrated prediction, K = 4/8),
the difference did better than the ratio t_step · p(T)/p(C) on the dense pair (−10/−9 % against
−20/−22 %, −1/−7 % against −7/−14 %, +9/+7 % against +2/−2 % in three runs) and worse on the
small hybrid (+13/+13 % against −7/−9 %); the difference is the one with a reason behind it.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass

from specbench.errors import ConfigError


@dataclass(frozen=True)
class PassCurve:
    """Seconds per target pass over T tokens, from a measured prefill curve (see module doc)."""

    sizes: tuple[int, ...]
    prefill_ms: tuple[float, ...]
    step_s: float
    anchor: int = 1

    @classmethod
    def from_probe(cls, curve: Mapping[int, float], step_s: float, anchor: int = 1) -> PassCurve:
        """``curve`` maps tokens to median prefill ms; its smallest size must not exceed ``anchor``
        (C), which is interpolated like any other size."""
        if not curve or min(curve) > anchor:
            raise ConfigError(f"the forward probe has no pass of {anchor} tokens or fewer to anchor on")
        if step_s <= 0:
            raise ConfigError("the measured decode step must be positive")
        sizes = tuple(sorted(curve))
        return cls(sizes, tuple(curve[t] for t in sizes), step_s, anchor)

    def prefill(self, tokens: float) -> float:
        """p(T): measured, linear in between, proportional to T past the largest size."""
        if tokens <= self.sizes[0]:
            return self.prefill_ms[0]
        if tokens >= self.sizes[-1]:
            return self.prefill_ms[-1] * tokens / self.sizes[-1]
        i = bisect.bisect_left(self.sizes, tokens)
        t0, t1 = self.sizes[i - 1], self.sizes[i]
        p0, p1 = self.prefill_ms[i - 1], self.prefill_ms[i]
        return p0 + (p1 - p0) * (tokens - t0) / (t1 - t0)

    @property
    def largest(self) -> int:
        """m, the most tokens in one pass the probe measured."""
        return self.sizes[-1]

    def covers(self, tokens: float) -> bool:
        """Whether the probe measured a pass this wide (or wider)."""
        return tokens <= self.sizes[-1]

    def ratio(self, tokens: float) -> float:
        """v(T) = t(T) / t_step: a T-token pass in units of the measured decode step."""
        return self(tokens) / self.step_s

    def held_ratio(self, tokens: float) -> float:
        """v(min(T, m)): the curve with its largest pass held past it (the low end beyond m)."""
        return self.ratio(min(tokens, self.sizes[-1]))

    def __call__(self, tokens: float) -> float:
        """t(T) = t_step + max(0, p(T) − p(C)), in seconds (p is in ms)."""
        return self.step_s + max(0.0, self.prefill(tokens) - self.prefill(self.anchor)) / 1000.0
