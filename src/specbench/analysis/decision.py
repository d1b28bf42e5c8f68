"""The decision table: what to run for each workload, or why to keep speculation off."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from specbench.analysis import stability, stats
from specbench.analysis.checks import Finding
from specbench.analysis.judge import findings
from specbench.analysis.run import RunData, workload_comparisons

# -- decision table ---------------------------------------------------------------------------
KEEP_OFF = "keep speculation off"


@dataclass(frozen=True)
class Decision:
    """What to run for one workload: ``arm`` None means keep speculation off; ``reason`` is one line.

    ``speedup`` and its CI are the recommended arm's decode speedup over the baseline (or the
    best candidate's, for context, when none is recommended; NaN when there is none)."""

    workload: str
    arm: str | None
    speedup: float
    ci_low: float
    ci_high: float
    reason: str

    @property
    def recommendation(self) -> str:
        return self.arm if self.arm is not None else KEEP_OFF

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "recommendation": self.recommendation}


def untrusted_arms(found: list[Finding]) -> dict[str, list[str]]:
    """Arm → codes of error-severity findings naming it: such an arm is never recommended."""
    out: dict[str, list[str]] = {}
    for f in found:
        if f.severity == "error":
            for arm in f.arms:
                out.setdefault(arm, []).append(f.code)
    return out


def decision_table(
    run: RunData, metric: str = "decode_tok_s", found: list[Finding] | None = None
) -> list[Decision]:
    """Per workload: the significantly faster (verdict "faster"), trusted arm with the largest
    speedup whose wall clock (e2e) is not significantly worse; else keep speculation off.
    ``found`` reuses already computed :func:`findings` (they are recomputed when None)."""
    found = findings(run) if found is None else found
    untrusted = untrusted_arms(found)
    decode = workload_comparisons(run, metric)
    wall = workload_comparisons(run, "e2e_ms")
    noisy = _noisy_baseline(run.baseline, found)
    if noisy:  # every ratio divides by the baseline: none of them can be trusted
        return [_refuse(wl, cmps, noisy) for wl, cmps in decode.items()]
    return [_decide(run, wl, cmps, wall.get(wl, {}), untrusted) for wl, cmps in decode.items()]


def _noisy_baseline(baseline: str, found: list[Finding]) -> str:
    """The evidence that the baseline itself is too unstable for any speedup, or ""."""
    for f in found:
        if f.code == "UNSTABLE" and f.severity == "error" and f.arms == (baseline,):
            cv = f.evidence.split("varies by ", 1)[-1].split(" (", 1)[0]  # "CV 62.6%"
            return f"{baseline}: decode {cv} across repeats, above {stability.SEVERE_CV:.0%}"
    return ""


def _refuse(workload: str, cmps: dict[str, stats.Comparison], why: str) -> Decision:
    top = max(cmps.values(), key=lambda c: c.ratio, default=None)
    nan = float("nan")
    ratio, lo, hi = (top.ratio, top.ci_low, top.ci_high) if top else (nan, nan, nan)
    reason = f"no decision: the baseline is UNSTABLE ({why}); rerun on a quiet machine"
    return Decision(workload, None, ratio, lo, hi, reason)


def _decide(
    run: RunData,
    workload: str,
    cmps: dict[str, stats.Comparison],
    wall: dict[str, stats.Comparison],
    untrusted: dict[str, list[str]],
) -> Decision:
    ok = [
        c
        for arm, c in cmps.items()
        if c.verdict == "faster" and arm not in untrusted and _wall_verdict(wall, arm) != "slower"
    ]
    if ok:
        best = max(ok, key=lambda c: c.ratio)
        ci = f"{stats.ci_label(best)} CI {best.ci_low:.2f}–{best.ci_high:.2f}"
        why = f"decode ×{best.ratio:.2f} ({ci}) vs {run.baseline}"
        if best.arm in wall:
            why += f"; wall clock ×{wall[best.arm].ratio:.2f} ({wall[best.arm].verdict})"
        return Decision(workload, best.arm, best.ratio, best.ci_low, best.ci_high, why)
    top = max(cmps.values(), key=lambda c: c.ratio, default=None)
    nan = float("nan")
    ratio, lo, hi = (top.ratio, top.ci_low, top.ci_high) if top else (nan, nan, nan)
    return Decision(workload, None, ratio, lo, hi, _why_off(run, cmps, wall, untrusted))


def _why_off(
    run: RunData,
    cmps: dict[str, stats.Comparison],
    wall: dict[str, stats.Comparison],
    untrusted: dict[str, list[str]],
) -> str:
    """The one-line reason no arm is recommended, most decisive first."""
    if not cmps:
        return f"no arm could be compared with {run.baseline} (it or every other arm has < 2 measurements)"
    faster = sorted((c for c in cmps.values() if c.verdict == "faster"), key=lambda c: -c.ratio)
    if faster and faster[0].arm in untrusted:
        c, codes = faster[0], "/".join(sorted(set(untrusted[faster[0].arm])))
        return f"{c.arm} looks ×{c.ratio:.2f} faster but {codes} makes the comparison untrustworthy"
    if faster:
        c = faster[0]
        return (
            f"{c.arm} decodes ×{c.ratio:.2f} faster but its wall clock is ×{wall[c.arm].ratio:.2f} "
            "(significantly slower: prefill tax, see the crossover)"
        )
    return _none_faster(run.baseline, list(cmps.values()))


def _none_faster(baseline: str, cmps: list[stats.Comparison]) -> str:
    """No arm wins: say whether every arm is slower, or how far the fastest is from a gain —
    never "best: X ×0.95", which reads as a recommendation."""
    top = max(cmps, key=lambda c: c.ratio)
    ci = (
        f"{stats.ci_label(top)} CI {top.ci_low:.2f}–{top.ci_high:.2f}" if np.isfinite(top.ci_low) else "no CI"
    )
    if all(c.verdict == "slower" for c in cmps):
        return (
            f"no arm is significantly faster than {baseline}: every arm decodes slower; "
            f"the closest, {top.arm}, reaches ×{top.ratio:.2f} ({ci})"
        )
    why = (
        f"from {top.n_launches} launch pair(s), too few to decide"
        if top.low_n
        else "not clear of the ±1 % noise band"
    )
    return (
        f"no arm is significantly faster than {baseline}: the fastest, {top.arm}, is ×{top.ratio:.2f} "
        f"({ci}), {why}: {stats.verdict_text(top)}"
    )


def _wall_verdict(wall: dict[str, stats.Comparison], arm: str) -> str:
    """The e2e verdict of ``arm``, "" when wall clock could not be compared."""
    return wall[arm].verdict if arm in wall else ""
