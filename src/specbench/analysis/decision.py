"""The decision table: what to run for each workload, or why to keep speculation off."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis import stats
from specbench.analysis.evidence.noise import SEVERE_CV
from specbench.analysis.findings.judge import judge
from specbench.analysis.findings.model import Finding, Severity, at_point
from specbench.analysis.findings.stability import Code as StabilityCode
from specbench.analysis.findings.verdict import Code as VerdictCode
from specbench.analysis.rundata import RunData
from specbench.analysis.tables import measures
from specbench.analysis.tables.measures import MEASURES

# -- decision table ---------------------------------------------------------------------------
KEEP_OFF = "keep speculation off"
OUTCOMES = frozenset({VerdictCode.SPEC_LOSS})  # error codes that state the measured result, not doubt it


@dataclass(frozen=True)
class Decision:
    """What to run at one operating point (a workload without a sweep is one; ``workload`` names
    the point): ``arm`` None means keep speculation off; ``reason`` is one line.

    ``speedup`` and its CI are the recommended arm's speedup over the baseline on ``measure``, the
    objective that decides (or the best candidate's, for context, when none is recommended; NaN
    when there is none)."""

    workload: str
    arm: str | None
    speedup: float
    ci_low: float
    ci_high: float
    reason: str
    measure: str = "decode"

    @property
    def recommendation(self) -> str:
        return self.arm if self.arm is not None else KEEP_OFF

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "recommendation": self.recommendation}


def untrusted_arms(found: list[Finding]) -> dict[str, list[str]]:
    """Arm → codes of error-severity findings naming it: such an arm is never recommended."""
    out: dict[str, list[str]] = {}
    for f in found:
        if f.severity == Severity.ERROR:
            for arm in f.arms:
                out.setdefault(arm, []).append(str(f.code))
    return out


def with_findings(frame: pd.DataFrame, found: list[Finding], baseline: str) -> pd.DataFrame:
    """``frame``'s verdict cells (rows with ``arm``, ``verdict`` and, per point, ``point``) never
    say less than the findings (issue 44: a thread-confounded arm read "faster" at ×7.46 with no
    word of the CONFOUND; a draft that never drafted "undetermined (about 17 more launches)"): an
    arm an error finding names — other than the measured outcome, SPEC_LOSS — carries its codes,
    and no launch estimate, since more launches cannot make it a valid comparison."""
    if frame.empty or "verdict" not in frame:
        return frame
    out = frame.copy()
    for i, row in out.iterrows():
        point = str(row["point"]) if "point" in out else ""
        here = at_point(found, point)
        codes = sorted(set(untrusted_arms(here).get(str(row["arm"]), [])) - OUTCOMES)
        if codes and row["arm"] != baseline:
            word = str(row["verdict"]).split(" (", 1)[0] or "no verdict"
            out.at[i, "verdict"] = f"{word} — not trusted: {', '.join(codes)} (see findings)"
    return out


def decision_table(run: RunData, found: list[Finding] | None = None) -> list[Decision]:
    """Per operating point: the significantly better (verdict "faster"), trusted arm with the
    largest speedup on the point's objective (:func:`specbench.analysis.tables.measures.objective_of`)
    whose guard (decode: wall clock; throughput: TTFT p99) is not significantly worse; else keep
    speculation off. ``found`` reuses already computed :func:`findings` (recomputed when None)."""
    found = judge(run) if found is None else found
    out = []
    for point in run.points:
        here = at_point(found, point.name)
        untrusted, noisy = untrusted_arms(here), _noisy_baseline(run.baseline, here)
        objective = measures.objective_of(run, point.workload, point)
        cmps = measures.comparisons(run, objective).get(point.name, {})
        guard = measures.GUARDS.get(objective)
        wall = measures.comparisons(run, guard).get(point.name, {}) if guard else {}
        if noisy:  # every ratio divides by the baseline: none of them can be trusted
            decided = _refuse(point.name, _candidates(run, cmps, untrusted), noisy)
        else:
            decided = _decide(run, point.name, cmps, wall, untrusted, objective, guard)
        out.append(replace(decided, measure=objective))
    return out


def _noisy_baseline(baseline: str, found: list[Finding]) -> str:
    """The evidence that the baseline itself is too unstable for any speedup, or ""."""
    for f in found:
        if f.code == StabilityCode.UNSTABLE and f.severity == Severity.ERROR and f.arms == (baseline,):
            cv = f.evidence.split("varies by ", 1)[-1].split(" (", 1)[0]  # "CV 62.6%"
            return f"{baseline}: decode {cv} across repeats, above {SEVERE_CV:.0%}"
    return ""


def _refuse(workload: str, cmps: dict[str, stats.Comparison], why: str) -> Decision:
    top = _top(list(cmps.values()))
    nan = float("nan")
    ratio, lo, hi = (top.ratio, top.ci_low, top.ci_high) if top else (nan, nan, nan)
    reason = f"no decision: the baseline is {StabilityCode.UNSTABLE} ({why}); rerun on a quiet machine"
    return Decision(workload, None, ratio, lo, hi, reason)


def _top(cmps: list[stats.Comparison]) -> stats.Comparison | None:
    """The comparison with the largest finite ratio (a LOW_N one without an estimate has none)."""
    return max((c for c in cmps if np.isfinite(c.ratio)), key=lambda c: c.ratio, default=None)


def speculating(run: RunData, arm: str) -> bool:
    """Configured (or, for an imported run, declared) to speculate, or its server drafted tokens:
    only such an arm is a speculative setting the decision may name or recommend."""
    if run.speculates(arm):
        return True
    drafted = run.df.loc[run.df["arm"] == arm, "draft_n"] if "draft_n" in run.df else None
    return drafted is not None and bool((drafted.fillna(0) > 0).any())


def nameable(
    run: RunData, cmps: dict[str, stats.Comparison], found: list[Finding]
) -> dict[str, stats.Comparison]:
    """The comparisons an answer or decision may name (:func:`_candidates`), from the findings."""
    return _candidates(run, cmps, untrusted_arms(found))


def _candidates(
    run: RunData, cmps: dict[str, stats.Comparison], untrusted: dict[str, list[str]]
) -> dict[str, stats.Comparison]:
    """The comparisons the decision may name: arms that speculate and that no error finding
    excludes (issue 27: a confounded, non-speculating arm was named "the fastest"). A large
    SPEC_LOSS is an error about the result, not a doubt about the measurement: that arm may still
    be named as the closest of slower arms."""
    excluded = {arm for arm, codes in untrusted.items() if set(codes) - OUTCOMES}
    return {arm: c for arm, c in cmps.items() if arm not in excluded and speculating(run, arm)}


def _decide(
    run: RunData,
    workload: str,
    cmps: dict[str, stats.Comparison],
    wall: dict[str, stats.Comparison],
    untrusted: dict[str, list[str]],
    objective: str = "decode",
    guard: str | None = "e2e",
) -> Decision:
    named = _candidates(run, cmps, untrusted)
    ok = [c for arm, c in named.items() if c.verdict == "faster" and _wall_verdict(wall, arm) != "slower"]
    label = MEASURES[objective].label
    if ok:
        best = max(ok, key=lambda c: c.ratio)
        ci = f"{stats.ci_label(best)} CI {best.ci_low:.2f}–{best.ci_high:.2f}"
        why = f"{label} ×{best.ratio:.2f} ({ci}) vs {run.baseline}"
        if best.arm in wall and guard is not None:
            why += f"; {MEASURES[guard].label} ×{wall[best.arm].ratio:.2f} ({wall[best.arm].verdict})"
        return Decision(workload, best.arm, best.ratio, best.ci_low, best.ci_high, why)
    top = _top(list(named.values()))
    nan = float("nan")
    ratio, lo, hi = (top.ratio, top.ci_low, top.ci_high) if top else (nan, nan, nan)
    why = _why_off(run, cmps, named, wall, untrusted, objective, guard)
    return Decision(workload, None, ratio, lo, hi, why)


def _why_off(
    run: RunData,
    cmps: dict[str, stats.Comparison],
    named: dict[str, stats.Comparison],
    wall: dict[str, stats.Comparison],
    untrusted: dict[str, list[str]],
    objective: str = "decode",
    guard: str | None = "e2e",
) -> str:
    """The one-line reason no arm is recommended, most decisive first. Arms outside ``named``
    (excluded by an error finding, or not speculating) are counted, never named."""
    if not cmps:
        return f"no arm could be compared with {run.baseline} (it or every other arm has < 2 measurements)"
    left_out = _left_out(cmps, named, untrusted)
    faster = sorted((c for c in named.values() if c.verdict == "faster"), key=lambda c: -c.ratio)
    if faster:
        c = faster[0]
        if objective == "decode":
            return (
                f"{c.arm} decodes ×{c.ratio:.2f} faster but its wall clock is ×{wall[c.arm].ratio:.2f} "
                "(significantly slower: prefill tax, see the crossover)" + left_out
            )
        g = MEASURES[guard].label if guard else "its guard"
        return (
            f"{c.arm} has {MEASURES[objective].label} ×{c.ratio:.2f} but its {g} is ×{wall[c.arm].ratio:.2f} "
            "(significantly worse)" + left_out
        )
    if not named or _top(list(named.values())) is None:
        return f"no trusted speculative arm could be compared with {run.baseline}" + left_out
    return _none_faster(run.baseline, list(named.values()), len(named) < len(cmps), objective) + left_out


def _left_out(
    cmps: dict[str, stats.Comparison], named: dict[str, stats.Comparison], untrusted: dict[str, list[str]]
) -> str:
    """ "; left out: …" for arms the decision may not name that look faster, else ""."""
    faster = [a for a, c in cmps.items() if a not in named and c.verdict == "faster"]  # never SPEC_LOSS
    if not faster:
        return ""
    bad = [a for a in faster if a in untrusted]
    parts = []
    if bad:
        codes = "/".join(sorted({code for a in bad for code in untrusted[a]}))
        parts.append(f"{_arms(len(bad))} that looks faster, but {codes} makes the comparison untrustworthy")
    if len(bad) < len(faster):
        parts.append(f"{_arms(len(faster) - len(bad))} that looks faster but does not speculate")
    return "; left out: " + "; ".join(parts)


def _arms(n: int) -> str:
    return "1 arm" if n == 1 else f"{n} arms"


def _none_faster(
    baseline: str, cmps: list[stats.Comparison], some_left_out: bool = False, objective: str = "decode"
) -> str:
    """No arm wins: say whether every arm is slower, or how far the fastest is from a gain —
    never "best: X ×0.95", which reads as a recommendation."""
    top = _top(cmps)
    assert top is not None  # the caller checked
    ci = (
        f"{stats.ci_label(top)} CI {top.ci_low:.2f}–{top.ci_high:.2f}" if np.isfinite(top.ci_low) else "no CI"
    )
    which = "trusted speculative arm" if some_left_out else "arm"
    if all(c.verdict == "slower" for c in cmps):
        worse = "decodes slower" if objective == "decode" else f"is worse on {MEASURES[objective].label}"
        return (
            f"no {which} is significantly faster than {baseline}: every {which} {worse}; "
            f"the closest, {top.arm}, reaches ×{top.ratio:.2f} ({ci})"
        )
    why = (
        f"from {top.n_launches} launch pair(s), too few to decide"
        if top.low_n
        else "not clear of the ±1 % noise band"
    )
    return (
        f"no {which} is significantly faster than {baseline}: the fastest, {top.arm}, is ×{top.ratio:.2f} "
        f"({ci}), {why}: {stats.verdict_text(top)}"
    )


def _wall_verdict(wall: dict[str, stats.Comparison], arm: str) -> str:
    """The e2e verdict of ``arm``, "" when wall clock could not be compared."""
    return wall[arm].verdict if arm in wall else ""
