"""Drafts that stop early: the draft model ends a draft at its first unsure token.

llama.cpp's draft loop stops when the draft's top-1 probability falls under ``--draft-p-min``
(``common/speculative.cpp``). The build specbench pins defaults it to 0, so every round drafts
K tokens; builds before it defaulted to 0.75 (some forks 0.9), and then the drafted length D
varies round by round. With a continuation probability c per drafted token (the chance the
draft is sure of the next one)::

    P(D = d) = c^d · (1 − c)     for d < K,     P(D = K) = c^K

A round that stops at d < K ran d + 1 draft passes (the last one found the unsure token); a draft
shorter than ``n_min`` (or empty) is dropped and the step decodes one token as usual, the draft's
d + 1 passes spent anyway, plus one pass mirroring the step. (C = 1: the draws of several
sequences are not combined.) The speedup is the ratio of expectations over D::

    speedup = t_step · Σ P(d)·tokens(d) / Σ P(d)·time(d)

with tokens(d), time(d) the round of :func:`specbench.theory.speedup.predict` at K = d. The usual input
is c = α: a calibrated drafter is sure about the tokens it gets right. That is an assumption, not
a measurement; on a run, the *replayed* column uses the drafted lengths the server counted.

Its interval comes from the same unknown terms as :func:`predict`'s at K (theory/spread/terms.py), each
set at the ends of its band in every round of the expectation; an estimated acceptance moves the
continuation probability with it when c = α.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from specbench.errors import ConfigError
from specbench.theory.speedup import predict
from specbench.theory.spread.interval import End, Interval, Term, propagate, swings_of


@dataclass(frozen=True)
class StoppedPrediction:
    """The speedup with early-stopping drafts, and the mean draft length behind it."""

    speedup: float
    mean_draft: float
    baseline_tok_s: float
    interval: Interval | None = None


def stop_distribution(stop: float, k: int) -> list[float]:
    """P(D = d) for d = 0..K (see the module docstring)."""
    if not 0.0 <= stop <= 1.0:
        raise ConfigError(f"the draft continuation probability must be within 0..1, got {stop}")
    return [stop**d * (1.0 - stop) for d in range(k)] + [stop**k]


def predict_stopped(
    model: str,
    gpu: str,
    quant: str,
    method: str,
    draft_max: int,
    *,
    alpha: float,
    stop: float,
    n_min: int = 0,
    alpha_range: tuple[float, float] | None = None,
    spread: bool = True,
    **kw: Any,
) -> StoppedPrediction:
    """:func:`predict` for a drafter that stops at its first unsure token (module docstring).

    ``kw`` passes on to :func:`predict` (draft model, efficiency, baseline, engine, replay, ...);
    ``alpha_range`` and ``spread`` as there.
    """
    result = _stopped(model, gpu, quant, method, draft_max, alpha, stop, n_min, kw)
    if not spread:
        return result
    full = predict(model, gpu, quant, method, draft_max, alpha=alpha, alpha_range=alpha_range, **kw)
    terms = [s.term for s in full.interval.speedup.swings] if full.interval else []

    def at(term: Term, end: End) -> float | None:
        if term.key == "acceptance":
            a = term.at(end)
            return _stopped(
                model, gpu, quant, method, draft_max, a, a if stop == alpha else stop, n_min, kw
            ).speedup
        shifted = {**kw, "terms_at": (term.key, end)}
        try:
            return _stopped(model, gpu, quant, method, draft_max, alpha, stop, n_min, shifted).speedup
        except ConfigError:  # a baseline this end cannot explain: it moves nothing
            return None

    return replace(result, interval=propagate(result.speedup, swings_of(terms, at)))


def _stopped(
    model: str,
    gpu: str,
    quant: str,
    method: str,
    draft_max: int,
    alpha: float,
    stop: float,
    n_min: int,
    kw: dict[str, Any],
) -> StoppedPrediction:
    """The expectation over the drafted length (module docstring), without an interval."""
    probs = stop_distribution(stop, draft_max)
    kw = {**kw, "spread": False}
    first = predict(model, gpu, quant, method, 1, alpha=alpha, **kw)
    one = first.breakdown
    tokens = time = 0.0
    for d, p in enumerate(probs):
        extra_pass = one.draft_step_s if d < draft_max else 0.0  # the pass that found the unsure token
        if d < max(1, n_min):  # no draft, or one too short: a plain step, the draft passes spent
            tokens += p  # ... and the draft mirrors the step with one more pass of its own
            time += p * (one.target_step_s + (d + 2) * one.draft_step_s)
            continue
        b = predict(model, gpu, quant, method, d, alpha=alpha, **kw).breakdown
        tokens += p * b.tokens_per_round
        time += p * (b.round_s + extra_pass)
    mean = sum(d * p for d, p in enumerate(probs))
    return StoppedPrediction(one.target_step_s * tokens / time, mean, first.baseline_tok_s)
