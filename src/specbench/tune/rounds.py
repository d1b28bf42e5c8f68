"""The rounds of one answer on a speculating llama-server, in expectation: what the screening
(:mod:`specbench.tune.screen`) predicts a candidate's speed from.

The closed form τ(α, K) / (K·c + v(K + 1) + o) holds every round at its full K. The server does
not: the first token comes from the prompt's pass, and each round may draft only
``min(K, tokens left − 1)`` (``get_n_draft_max`` in llama.cpp's ``tools/server/server-context.cpp``),
so the last rounds of an answer draft less and a round with nothing left to draft is a plain
step. Over 32 tokens at K 8 that is 6.9 drafted tokens a round, not 8 — and the screened
candidate, the largest K, loses the most: read with the closed form, its speedup made the
overhead o look three to four times its size and the smaller K up to 23 % slower than they ran
(the membound lab pair, docs/tune.md).

:func:`expected_rounds` walks an answer of ``tokens`` tokens token by token (a dynamic program
over tokens made, vectorised over α): at m tokens made, a round drafts L = min(K, n − m − 1),
accepts a prefix of i tokens with P(i) = α^i (1 − α) for i < L and α^L for i = L (acceptance
per position constant at α), and makes i + 1. Its expectations: the rounds that draft, the
drafted and accepted tokens, and the cost in target steps split as the screening's calibration
needs it — ``steps`` (one step a round and the drafter's L·c) and ``rise`` (the verify pass
beyond one step, v(L + 1) − 1). Answers longer than :data:`MAX_TOKENS` are walked at that
length: the end's share of the rounds is then below 1 %.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MAX_TOKENS = 512


@dataclass(frozen=True)
class Rounds:
    """Expectations over one answer of ``tokens`` tokens (arrays shaped like α)."""

    tokens: int  # the answer's length walked (at most MAX_TOKENS); tokens − 1 come from rounds
    drafting: np.ndarray  # rounds that draft (the overhead o is paid once each)
    steps: np.ndarray  # Σ over all rounds of 1 + L·c, in target steps
    rise: np.ndarray  # Σ over drafting rounds of v(L + 1) − 1
    accepted: np.ndarray
    drafted: np.ndarray

    def speedup(self, rise: np.ndarray | float, o: np.ndarray | float) -> np.ndarray:
        """Decode speed over the baseline's (one step a token): tokens − 1 over the rounds' cost,
        with the verify's rise scaled by λ = ``rise`` and ``o`` steps a drafting round."""
        return np.asarray((self.tokens - 1) / (self.steps + rise * self.rise + o * self.drafting))


def expected_rounds(alpha: np.ndarray, k: int, tokens: int, cost: float, v: Callable[[int], float]) -> Rounds:
    """The expectations of :class:`Rounds` for draft length ``k`` and drafter cost ``cost``
    (target steps per drafted token), ``v`` the verify pass of T tokens in target steps."""
    n = max(min(int(tokens), MAX_TOKENS), 2)
    a = np.asarray(alpha, dtype=float)
    # rows: drafting rounds, steps, rise, accepted, drafted; columns: tokens made (0 … n + k + 1)
    x = np.zeros((5, n + k + 2, *a.shape))
    for m in range(n - 1, 0, -1):
        draft = min(k, n - m - 1)
        if draft <= 0:  # nothing left to draft: a plain step
            x[:, m] = x[:, m + 1]
            x[1, m] += 1.0
            continue
        ahead = np.zeros((5, *a.shape))
        for i in range(draft + 1):
            p = a**i * (1.0 - a) if i < draft else a**draft
            ahead += p * x[:, m + i + 1]
            ahead[3] += p * i
        x[:, m] = ahead
        x[0, m] += 1.0
        x[1, m] += 1.0 + draft * cost
        x[2, m] += v(draft + 1) - 1.0
        x[4, m] += draft
    drafting, steps, rise, accepted, drafted = x[:, 1]
    return Rounds(n, drafting, steps, rise, accepted, drafted)
