"""Several comparisons in one table: Holm's step-down, so a run's chance of ANY false verdict stays α.

With one arm, a 95 % interval gives a false verdict (faster, slower or equivalent when it is not)
at most 5 % of the time. With five arms each at 95 %, some false verdict somewhere in the table is
much more likely (issue 27: a three-arm A/A on a quiet machine read one arm "faster", ×1.07,
CI 1.02–1.13). Holm (1979) keeps the family-wise rate at α for any dependence between the
comparisons (they share the baseline's launches):

1. every comparison still open is tested at level α / r (r: how many are open), i.e. its verdict
   is read from its interval at confidence 1 − α / r;
2. those that reach a verdict keep it, with that interval; if none did, stop;
3. otherwise r shrinks and the rest are tested again at the less strict level.

This is Holm's procedure on each comparison's decision p-value (the smallest level at which its
interval clears or fits the noise band), written with intervals so that the interval printed is
always the one its verdict was read from. Comparisons that cannot reach any verdict (LOW_N, one
launch) are not in the family: they can make no false claim, and counting them would only widen
everyone else's interval.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

from specbench.analysis.stats import Comparison

K = TypeVar("K", bound=Hashable)


def holm(keys: Iterable[K], fit: Callable[[K, float], Comparison], alpha: float) -> dict[K, Comparison]:
    """Holm's step-down over the comparisons ``fit(key, confidence)``: each returned comparison
    carries the level its verdict was read at (``confidence``), ``family`` (how many decidable
    comparisons share ``alpha``) and ``family_alpha``."""
    first = {k: fit(k, 1 - alpha) for k in keys}
    open_ = [k for k, c in first.items() if c.decidable]
    family = len(open_)
    out = {
        k: replace(c, family=max(family, 1), family_alpha=alpha) for k, c in first.items() if not c.decidable
    }
    while open_:
        level = 1 - alpha / len(open_)
        tested = {k: first[k] if len(open_) == 1 else fit(k, level) for k in open_}
        decided = [k for k in open_ if tested[k].verdict != "undetermined"]
        for k in decided if decided else open_:
            out[k] = replace(tested[k], family=family, family_alpha=alpha)
        if not decided:
            break
        open_ = [k for k in open_ if k not in decided]
    return {k: out[k] for k in first}


def rates_text(rates: Sequence[str]) -> str:
    """The error rates the verdicts carry, each said once: Holm's step-down reads its arms at
    different levels ("98.3 % CI; Holm over 3 …", "97.5 % CI; Holm over 3 …"), and each CI cell
    already names its level, so the family's guarantee is printed once with the levels it used."""
    levels, rest = [], []
    for rate in dict.fromkeys(rates):
        level, _, family = rate.partition("; ")
        levels.append(level.removesuffix(" CI"))
        rest.append(family)
    families = [f for f in dict.fromkeys(rest) if f]
    if not families:
        return "; ".join(dict.fromkeys(rates))
    return f"{'; '.join(families)} (CIs at {', '.join(dict.fromkeys(levels))})"
