"""The answer in words (issue 28.1): per operating point what to ship and why, per sweep where an
arm stops paying, and the error rates the verdicts carry — the lines the summary prints first
and the report opens with. The numbers are the analysis' (:class:`~specbench.analysis.answer.Answer`,
:class:`~specbench.analysis.tables.sweeps.Sweep`); only the words are made here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from specbench.analysis.answer import Answer, CategoryAnswer, MeasureCell
from specbench.analysis.result import Analysis
from specbench.analysis.tables.measures import MEASURES, verdict_word
from specbench.analysis.tables.sweeps import ArmAlong, Sweep


def answer_lines(result: Analysis) -> list[str]:
    """The answer first: one block per operating point, what to ship and why, then each sweep's
    verdicts by level and where an arm's sign flips (issue 40)."""
    lines = [line for a in result.answers for line in lines_of(a, result.run.baseline)]
    return lines + [line for s in result.sweeps for line in along_lines(s)]


# -- one operating point's answer ------------------------------------------------------------
def lines_of(a: Answer, baseline: str) -> list[str]:
    """The answer in words: the headline, the other measures beside the deciding one, then
    (when they differ) the categories and advice."""
    if a.arm is None:
        head = f"{a.workload}: keep speculation off — {a.reason}"
    elif a.ship is not None:
        head = (
            f"{a.workload}: ship {a.ship} — {a.measure} "
            f"{_ratio(a.speedup, a.ci_low, a.ci_high)} {_better(a.measure)} than {baseline} "
            f"({a.error_rate})"
        )
    else:
        head = (
            f"{a.workload}: keep speculation off — the best, {a.arm}, is "
            f"{_ratio(a.speedup, a.ci_low, a.ci_high)} vs {baseline}, {a.verdict}"
        )
    out = [head]
    if a.beside:
        out.append(f"  beside ({a.arm}): " + ", ".join(_measure_text(c) for c in a.beside))
    if a.categories:
        out.append(f"  by kind of prompt ({a.arm}): " + ", ".join(_category_text(c) for c in a.categories))
    if a.advice:
        out.append(f"  → {a.advice}")
    return out


def answer_dict(a: Answer, baseline: str) -> dict[str, Any]:
    """The answer as analysis.json holds it: its numbers, the recommendation and its lines."""
    d = asdict(a)
    d["categories"] = [asdict(c) for c in a.categories]
    d["beside"] = [asdict(c) for c in a.beside]
    return {**d, "recommendation": a.ship or "keep speculation off", "lines": lines_of(a, baseline)}


def _category_text(c: CategoryAnswer) -> str:
    why = ""
    if math.isfinite(c.drafted):
        why = f" (accepted {_count(c.accepted)} of {_count(c.drafted)} drafted"
        why += f", {c.accepted / c.drafted:.0%})" if c.drafted > 0 else ")"
    return f"{c.category} {_ratio(c.speedup, c.ci_low, c.ci_high)} {c.verdict}{why}"


def _measure_text(c: MeasureCell) -> str:
    return f"{c.label} {_ratio(c.speedup, c.ci_low, c.ci_high)} {verdict_word(c.verdict, c.measure)}"


def _better(label: str) -> str:
    """ "faster" for a rate; a latency or throughput measure is "better" (×1.2 TTFT: 1.2 × sooner)."""
    return "faster" if label == "decode" else "better"


def _count(v: float) -> str:
    return f"{v:.0f}" if math.isfinite(v) else "?"


def _ratio(r: float, lo: float, hi: float) -> str:
    if not math.isfinite(r):
        return "×—"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"×{r:.2f} [no interval]"
    return f"×{r:.2f} [{lo:.2f}–{hi:.2f}]"


# -- a sweep, level by level ------------------------------------------------------------------
def along_lines(s: Sweep) -> list[str]:
    label = MEASURES[s.measure].label if s.measure in MEASURES else "each level's own measure"
    head = f"{s.workload} along its levels ({label} decides; {s.family})"
    return [head, *(f"  {along_text(a, s.measure)}" for a in s.arms)]


def sweep_dict(s: Sweep) -> dict[str, Any]:
    return {**asdict(s), "lines": along_lines(s)}


def along_text(a: ArmAlong, measure: str) -> str:
    """One arm along a sweep: its verdict words by level and where it stops paying."""
    if a.named:
        return _on_off(a)
    groups = _grouped(a.levels)
    said = ", ".join(f"{verdict_word(w, measure)} at {where}" for w, where in groups)
    if len(groups) == 1:
        said = f"{verdict_word(groups[0][0], measure)} at every level"
    if a.crossover:
        lo, hi = a.crossover
        said += f" — the sign flips between {_span([lo, hi]).replace('–', ' and ')}: keep it off from {hi} up"
    return f"{a.arm} {said}"


def _on_off(a: ArmAlong) -> str:
    """ "draft4: on for single, chat; off for concurrent; prefill not settled"."""
    on = [label for label, w in a.levels if w == "faster"]
    off = [label for label, w in a.levels if w == "slower"]
    rest = [label for label, w in a.levels if w not in ("faster", "slower")]
    parts = [f"on for {', '.join(on)}"] if on else []
    parts += [f"off for {', '.join(off)}"] if off else []
    parts += [f"{', '.join(rest)} not settled (no significant difference)"] if rest else []
    return f"{a.arm}: " + "; ".join(parts)


def _grouped(levels: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Consecutive levels with one verdict word joined: [("faster", "1–8 in flight"), ...]."""
    out: list[tuple[str, list[str]]] = []
    for label, word in levels:
        if out and out[-1][0] == word:
            out[-1][1].append(label)
        else:
            out.append((word, [label]))
    return [(word, _span(labels)) for word, labels in out]


def _span(labels: list[str]) -> str:
    """ "1–8 in flight" from ["1 in flight", "2 in flight", "8 in flight"]; names joined."""
    if len(labels) == 1:
        return labels[0]
    first, _, unit = labels[0].partition(" ")
    last, _, unit_last = labels[-1].partition(" ")
    if unit and unit == unit_last:
        return f"{first}–{last} {unit}"
    return ", ".join(labels)


# -- the error rates the verdicts carry -------------------------------------------------------
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
