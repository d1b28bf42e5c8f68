"""Compare two runs of the same matrix (``specbench compare A B``): what changed, per arm
(rendered as text by :func:`specbench.report.compare.format_comparison`).

Two questions per arm, both with the launch-level mixed model (:mod:`specbench.analysis.launches`):

* the absolute rate: the arm in run B vs the same arm in run A, prompts paired inside launch
  pairs (launch r of A with launch r of B: independent launches, so any pairing by index is
  valid, and the launch-to-launch variance is estimated from the pairs);
* the speedup: the arm's speedup over its own run's baseline in B vs in A — exp(μ_B − μ_A) with
  Var = se_A² + se_B² and Welch–Satterthwaite degrees of freedom. A machine that got faster moves
  both the arm and the baseline; the speedup comparison is what a change in speculation shows in.

Arms present in only one run are listed, not silently dropped. Runs that sweep are compared
level by level (issue 40): one row per arm at each operating point both runs measured.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from scipy import stats as sps

from specbench.analysis import RunData, load_run, stats
from specbench.analysis import launches as L
from specbench.analysis.evidence import noise
from specbench.analysis.rundata import for_point
from specbench.errors import StoreError
from specbench.store.rundir import RunStore

COMPARE_COLUMNS = [
    "point", "arm", "n_a", "n_b", "median_a", "median_b", "ratio", "ci_low", "ci_high", "verdict", "p_value",
    "speedup_a", "speedup_b", "speedup_change", "speedup_ci_low", "speedup_ci_high", "speedup_verdict",
]  # fmt: skip


def compare_runs(a: Path, b: Path, metric: str = "decode_tok_s") -> pd.DataFrame:
    """Per arm: median ``metric`` in each run, b vs a (ratio > 1: b is better) with the paired
    launch-level CI and verdict, the change of the arm's speedup over its run's baseline, and
    whether its arguments changed. Arms in one run only get a row saying so. Raises StoreError
    when no arm was measured in both."""
    run_a, run_b = load_run(a), load_run(b)
    common = [arm for arm in run_a.measured_arms if arm in run_b.measured_arms]
    if not common:
        raise StoreError(f"{a} and {b} have no measured arm in common")
    frames = [_point_frame(pa, pb, name, common, metric) for name, pa, pb in _points(run_a, run_b)]
    rows = [{"arm": arm, "verdict": "only in a"} for arm in run_a.measured_arms if arm not in common]
    rows += [{"arm": arm, "verdict": "only in b"} for arm in run_b.measured_arms if arm not in common]
    df = pd.concat([*frames, pd.DataFrame(rows, columns=COMPARE_COLUMNS)], ignore_index=True)
    df["args_changed"] = [arm in common and run_a.arm_args(arm) != run_b.arm_args(arm) for arm in df["arm"]]
    df.attrs.update(metric=metric, a=str(a), b=str(b), warnings=run_warnings(a, b))
    return df


def _points(run_a: RunData, run_b: RunData) -> list[tuple[str, RunData, RunData]]:
    """(point, a, b): the whole runs where neither sweeps, else each point both measured, each
    run restricted to it (a sweep's levels are never pooled into one comparison)."""
    if not (run_a.sweeps or run_b.sweeps):
        return [("", run_a, run_b)]
    there = {p.name for p in run_b.points}
    return [
        (p.name, for_point(run_a, p.name), for_point(run_b, p.name)) for p in run_a.points if p.name in there
    ]


def _point_frame(run_a: RunData, run_b: RunData, point: str, arms: list[str], metric: str) -> pd.DataFrame:
    measured = [arm for arm in arms if arm in run_a.measured_arms and arm in run_b.measured_arms]
    rows = [{"point": point, **_compare_arm(run_a, run_b, arm, metric)} for arm in measured]
    df = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    _caveat_unstable(df, run_a, run_b)
    return df


def _caveat_unstable(df: pd.DataFrame, run_a: RunData, run_b: RunData) -> None:
    """Flag verdicts resting on an arm (or, for the speedup, a baseline) too noisy for any verdict."""
    noisy = {"a": noise.unstable_arms(run_a.df), "b": noise.unstable_arms(run_b.df)}
    for i, arm in df["arm"].items():
        where = [r for r in ("a", "b") if arm in noisy[r]]
        if where and isinstance(df.at[i, "verdict"], str):
            df.at[i, "verdict"] = f"{df.at[i, 'verdict']!s} (UNSTABLE in {'/'.join(where)})"
        base = [r for r in ("a", "b") if arm in noisy[r] or (run_a, run_b)[r == "b"].baseline in noisy[r]]
        if base and isinstance(df.at[i, "speedup_verdict"], str):
            df.at[i, "speedup_verdict"] = f"{df.at[i, 'speedup_verdict']!s} (UNSTABLE in {'/'.join(base)})"


def run_warnings(a: Path, b: Path) -> list[str]:
    """What makes the two runs incomparable as a change of configuration: a different model
    (env.json's SHA-256; a run without it is not flagged — nothing to compare)."""
    sha_a, sha_b = _model_sha(a), _model_sha(b)
    if sha_a and sha_b and sha_a != sha_b:
        return [
            f"WARNING: the runs measured different models (sha256 {sha_a[:12]}… vs {sha_b[:12]}…): every "
            "ratio below compares models, not speculation settings"
        ]
    return []


def _model_sha(root: Path) -> str:
    try:
        model = RunStore(root).env().get("model") or {}
    except (OSError, ValueError, StoreError):  # a damaged env.json: no identity to compare
        return ""
    return str(model.get("sha256") or "") if isinstance(model, dict) else ""


def _compare_arm(run_a: RunData, run_b: RunData, arm: str, metric: str) -> dict[str, Any]:
    df_a, df_b = run_a.df, run_b.df
    both = pd.concat([df_a[df_a["arm"] == arm].assign(arm="a"), df_b[df_b["arm"] == arm].assign(arm="b")])
    med_a, med_b = (
        df_a.loc[df_a["arm"] == arm, metric].median(),
        df_b.loc[df_b["arm"] == arm, metric].median(),
    )
    row: dict[str, Any] = {"arm": arm, "median_a": med_a, "median_b": med_b}
    row |= _speedup_change(run_a, run_b, arm, metric)
    c = stats.speedup(both, "b", "a", metric)
    if c.too_few:  # fewer than two values on a side: report medians, no verdict
        return row | {"verdict": "too few values"}
    return row | {"n_a": c.n_b, "n_b": c.n_a, "ratio": c.ratio, "ci_low": c.ci_low, "ci_high": c.ci_high,
                  "verdict": stats.verdict_text(c), "p_value": c.p_value}  # fmt: skip


def _fit(run: RunData, arm: str, metric: str) -> L.LaunchFit | None:
    """The arm-vs-baseline fit of one run (None: baseline itself, or fewer than two launches)."""
    if arm == run.baseline or run.baseline not in run.measured_arms:
        return None
    df = run.df
    a, b = df[(df["arm"] == arm) & (df[metric] > 0)], df[(df["arm"] == run.baseline) & (df[metric] > 0)]
    keys = [k for k in stats.PAIR_KEYS if k in df.columns]
    if "repeat" not in keys or "prompt_id" not in keys:
        return None
    pairs = L.paired_log_ratios(a, b, metric, keys)
    if len(pairs) < stats.MIN_PAIRS or pairs["launch"].nunique() < 2:
        return None
    return L.fit(pairs)


def _speedup_change(run_a: RunData, run_b: RunData, arm: str, metric: str) -> dict[str, Any]:
    """exp(μ_B − μ_A): how the arm's speedup over its own baseline changed, with a Welch interval."""
    fa, fb = _fit(run_a, arm, metric), _fit(run_b, arm, metric)
    if fa is None or fb is None:
        return {}
    sign = 1.0 if stats.metric_higher_is_better(metric) else -1.0
    diff, var = fb.mu - fa.mu, fa.se**2 + fb.se**2
    dof = var**2 / (fa.se**4 / fa.dof + fb.se**4 / fb.dof) if var > 0 else math.inf
    half = float(sps.t.ppf(0.975, dof)) * math.sqrt(var) if var > 0 else 0.0
    lo, hi = sorted((math.exp(sign * (diff - half)), math.exp(sign * (diff + half))))
    low_n = min(fa.n_launches, fb.n_launches) < L.MIN_LAUNCHES
    verdict: str = "undetermined (LOW_N)" if low_n else stats.verdict(lo, hi)
    if verdict == "undetermined":
        verdict = _undetermined_change(fa, fb, diff)
    return {
        "speedup_a": math.exp(sign * fa.mu), "speedup_b": math.exp(sign * fb.mu),
        "speedup_change": math.exp(sign * diff), "speedup_ci_low": lo, "speedup_ci_high": hi,
        "speedup_verdict": verdict,
    }  # fmt: skip


def _undetermined_change(fa: L.LaunchFit, fb: L.LaunchFit, diff: float) -> str:
    """ "undetermined (about N more launches, L–H)": launches to ADD to each run for the change of
    speedup to settle, each run adding its own launch-to-launch noise (the variances add)."""
    both = replace(
        fa, mu=diff, per_launch_sd=math.hypot(fa.per_launch_sd, fb.per_launch_sd),
        se=math.hypot(fa.se, fb.se), n_launches=min(fa.n_launches, fb.n_launches),
        dof=min(fa.dof, fb.dof),
    )  # fmt: skip
    more = L.more_launches(both, 0.01)
    if more is None:
        return "undetermined"
    return f"undetermined (about {more.more} more launches per run{stats.launch_span(more.low, more.high)})"
