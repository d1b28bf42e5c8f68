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

Per-category verdicts are claims too. As a second Holm family at α they let a run's chance of
some false verdict reach about 2α; :func:`arms_and_categories` makes the arms and their categories one
family at α instead (each arm's α shared with its categories), and :func:`judge` is where
the analysis and the ``repeats: auto`` looks both read their verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

import pandas as pd

from specbench.analysis import stats
from specbench.analysis.stats import Comparison

K = TypeVar("K", bound=Hashable)
R = TypeVar("R", bound=Hashable)  # a family's root comparison: an arm, or an (arm, point)
C = TypeVar("C", bound=Hashable)  # one of a root's categories
Category = tuple[str, str]  # (category, arm)
PointArm = tuple[str, str]  # (arm, point)
PointCategory = tuple[str, str, str]  # (category, arm, point)


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


# -- arms and their categories: one family, α shared ------------------------------------------
def arms_and_categories(
    arms: Sequence[R],
    categories: Mapping[R, Sequence[C]],
    fit: Callable[[R | C, float], Comparison],
    alpha: float,
    roots_noun: str = "arm",
) -> dict[R | C, Comparison]:
    """The arms and their (category, arm) comparisons as ONE family at ``alpha``: a run's chance of
    any false verdict, arms and categories together, stays ≤ α (two families at α each allowed up
    to 2α). A sequentially rejective Bonferroni procedure (Bretz et al. 2009's graphs; Holm is the
    special case without categories), each open comparison tested at α·w with the weights of
    :func:`shares`: each arm's share of α (α/arms) is split half to the arm, half to its
    categories, so a category is judged even while its arm is not (where the actionable answer
    usually is: n-gram wins on copy prompts and loses elsewhere); a decided comparison's share
    moves to its open relatives, then to the other open arms, as Holm's does. The roots may be
    (arm, point) pairs of a sweep (:func:`judge_points`); ``roots_noun`` names them."""
    keys: list[R | C] = [*arms, *(k for a in arms for k in categories.get(a, ()))]
    first = {k: fit(k, 1 - alpha) for k in keys}
    open_ = {k for k in keys if first[k].decidable}
    n_arms = sum(1 for a in arms if a in open_)
    name = _family_name(n_arms, len(open_) - n_arms, roots_noun)
    family = max(len(open_), 1)
    out = {
        k: replace(c, family=family, family_alpha=alpha, family_name=name)
        for k, c in first.items()
        if k not in open_
    }
    # An arm is a root when it or any of its categories can reach a verdict: a category of a LOW_N
    # arm still holds a share (else it would get none while other arms are open).
    roots = [a for a in arms if a in open_ or any(k in open_ for k in categories.get(a, ()))]
    while open_:
        w = shares(roots, categories, open_, arms)
        tested = {k: first[k] if w[k] >= 1 else fit(k, 1 - alpha * w[k]) for k in open_ if w[k] > 0}
        decided = {k for k, c in tested.items() if c.verdict != "undetermined"}
        for k in decided if decided else open_:
            out[k] = replace(tested[k], family=family, family_alpha=alpha, family_name=name)
        if not decided:
            break
        open_ -= decided
    return {k: out[k] for k in keys}


def shares(
    roots: Sequence[R],
    categories: Mapping[R, Sequence[C]],
    open_: set[R | C],
    arms: Sequence[R],
) -> dict[R | C, float]:
    """Each open comparison's share of α, a function of which are open only, never smaller when
    fewer are open (the monotone weights that make the shortcut a closed test, Hommel, Bretz and
    Maurer 2007): every root's share (a root: an arm that, or one of whose categories, can reach a
    verdict) is 1/len(roots), half to the arm and half to its open categories equally (all of it
    to whichever side is still open); an arm decided with all its categories frees its share, and
    freed shares go to the open arms, equally, or, with none open, to every open category (a LOW_N
    arm's too). Every open comparison has a share > 0."""
    w: dict[R | C, float] = dict.fromkeys(open_, 0.0)
    free = 0.0 if roots else 1.0
    for a in roots:
        share = 1 / len(roots)
        kids = [k for k in categories.get(a, ()) if k in open_]
        if a in open_:
            w[a] += share / 2 if kids else share
        if kids:
            for k in kids:
                w[k] += (share / 2 if a in open_ else share) / len(kids)
        elif a not in open_:
            free += share
    if free:
        targets: list[R | C] = [a for a in arms if a in open_] or list(open_)
        for t in targets:
            w[t] += free / len(targets)
    return w


def _family_name(n_arms: int, n_categories: int, noun: str = "arm") -> str:
    arms = f"{n_arms} {noun}{'s' if n_arms != 1 else ''}"
    cats = f"{n_categories} category comparison{'s' if n_categories != 1 else ''}"
    return f"one family of {arms} and {cats}, α shared between each arm and its categories"


def categories_in_family(df: pd.DataFrame) -> bool:
    """Whether ``df``'s categories are judged with its arms: two or more categories, one workload
    (several workloads show no run-wide per-category table; each workload is its own family)."""
    cats = df["category"].dropna() if "category" in df else pd.Series(dtype=object)
    one_workload = "workload" not in df or df["workload"].nunique() <= 1
    return bool(cats.astype(str).nunique() >= 2 and one_workload)


def judge(
    df: pd.DataFrame, arms: Sequence[str], baseline: str, metric: str, alpha: float
) -> tuple[dict[str, Comparison], dict[Category, Comparison]]:
    """Every arm in ``arms`` (the baseline excluded) vs ``baseline`` on ``metric``, and, when
    :func:`categories_in_family`, every (category, arm) on that category's requests, as one family
    at ``alpha`` (:func:`arms_and_categories`); otherwise the arms alone, Holm. The analysis and the
    ``repeats: auto`` looks both read verdicts from here, so the one announced is the one reported."""
    arms = [a for a in arms if a != baseline]
    groups: dict[str, pd.DataFrame] = {}
    if categories_in_family(df):
        rows = df[df["category"].notna()]
        groups = {str(c): sub for c, sub in rows.groupby(rows["category"].astype(str), sort=True)}

    def fit(key: str | Category, level: float) -> Comparison:
        if isinstance(key, tuple):
            return stats.speedup(groups[key[0]], key[1], baseline, metric, confidence=level)
        return stats.speedup(df, key, baseline, metric, confidence=level)

    if not groups:
        return holm(arms, fit, alpha), {}
    cats = {a: [(c, a) for c, sub in groups.items() if (sub["arm"] == a).any()] for a in arms}
    out = arms_and_categories(arms, cats, fit, alpha)
    arm_out = {k: c for k, c in out.items() if isinstance(k, str)}
    return arm_out, {k: c for k, c in out.items() if isinstance(k, tuple)}


# -- a sweep: every (arm, point) and its categories, one family -----------------------------------
def judge_points(
    df: pd.DataFrame, arms: Sequence[str], baseline: str, metric: str, alpha: float, point: str = "point"
) -> tuple[dict[PointArm, Comparison], dict[PointCategory, Comparison]]:
    """:func:`judge` for a sweep (issue 40): every arm at every operating point of ``df`` (the
    ``point`` column) on that point's requests only, with each point's categories, as ONE family
    at ``alpha`` — a sweep's levels are claims of one run, so its chance of any false verdict over
    the levels stays α, and no comparison ever pools two levels."""
    arms = [a for a in arms if a != baseline]
    subs = {str(p): sub for p, sub in df.groupby(point, sort=False)}
    roots: list[PointArm] = [(a, p) for p, sub in subs.items() for a in arms if (sub["arm"] == a).any()]
    groups: dict[tuple[str, str], pd.DataFrame] = {}
    for p, sub in subs.items():
        if categories_in_family(sub):
            rows = sub[sub["category"].notna()]
            groups |= {(p, str(c)): g for c, g in rows.groupby(rows["category"].astype(str), sort=True)}

    def fit(key: PointArm | PointCategory, level: float) -> Comparison:
        if len(key) == 3:
            category, arm, p = key
            return stats.speedup(groups[(p, category)], arm, baseline, metric, confidence=level)
        arm, p = key[0], key[1]
        return stats.speedup(subs[p], arm, baseline, metric, confidence=level)

    if not groups:
        return holm(roots, fit, alpha), {}
    cats: dict[PointArm, list[PointCategory]] = {
        (a, p): [(c, a, p) for (q, c), g in groups.items() if q == p and (g["arm"] == a).any()]
        for a, p in roots
    }
    out = arms_and_categories(roots, cats, fit, alpha, "arm × level comparison")
    return (
        {k: c for k, c in out.items() if len(k) == 2},
        {k: c for k, c in out.items() if len(k) == 3},
    )
