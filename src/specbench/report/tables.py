"""The report's tables, computed from a loaded run: numeric frames (CSV, JSON) and their display form.

Medians carry a 95 % percentile-bootstrap CI (``scipy.stats.bootstrap``) because a median
without its spread is the single-number reporting docs/mistakes.md, mistake 4 warns about.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from specbench import analysis
from specbench.analysis import RunData, bimodality, checks, stalls, stats
from specbench.analysis.checks import Finding

METRICS = ("ttft_ms", "decode_tok_s", "e2e_ms", "prefill_ms", "itl_ms", "tokens_per_chunk")
CONFIDENCE = 0.95
N_RESAMPLES = 2000


def median_ci(values: Any, seed: int = 0) -> tuple[float, float, float]:
    """(median, CI low, CI high) of the finite values; the CI collapses for n < 2 or constant data."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    med = float(np.median(x))
    if x.size < 2 or np.ptp(x) == 0:
        return med, med, med
    res = sps.bootstrap(
        (x,), np.median, n_resamples=N_RESAMPLES, confidence_level=CONFIDENCE,
        method="percentile", vectorized=True, rng=np.random.default_rng(seed),
    )  # fmt: skip
    return med, float(res.confidence_interval.low), float(res.confidence_interval.high)


def fmt(value: Any, spec: str = ".1f") -> str:
    """A number for a table cell; NaN / None as an em dash."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return format(value, spec)


def fmt_rate(value: Any) -> str:
    return fmt(value, ".3f")


def fmt_ci(mid: float, low: float, high: float, spec: str = ".1f") -> str:
    if not math.isfinite(low) or low == high:
        return fmt(mid, spec)
    return f"{fmt(mid, spec)} ({fmt(low, spec)}–{fmt(high, spec)})"


# -- numeric: one row per arm × workload ------------------------------------------------------
def summary_frame(run: RunData) -> pd.DataFrame:
    """One row per arm × workload: n, medians with CIs, acceptance, decode speedup vs baseline."""
    cmps = analysis.workload_comparisons(run)
    rows = []
    for (workload, arm), sub in run.df.groupby(["workload", "arm"], sort=False):
        row: dict[str, Any] = {"workload": workload, "arm": arm, "requests": len(sub)}
        for metric in METRICS:
            mid, low, high = median_ci(sub[metric])
            row |= {f"{metric}_median": mid, f"{metric}_ci_low": low, f"{metric}_ci_high": high}
        row["acceptance"], row["acceptance_source"] = _acceptance(run, str(arm), sub)
        row |= _speedup_cols(run, cmps.get(str(workload), {}), str(arm))
        rows.append(row)
    order = {a: i for i, a in enumerate(run.arms)}
    rows.sort(key=lambda r: (str(r["workload"]), order.get(r["arm"], len(order))))
    return pd.DataFrame(rows)


def _acceptance(run: RunData, arm: str, sub: pd.DataFrame) -> tuple[float, str]:
    """Per-request counts of this workload's requests; without them (vLLM without per-request
    metrics) the arm's /metrics counter deltas, named, when the run has one workload (a cell's
    counters cannot be split between workloads)."""
    pooled = analysis.pooled_acceptance(sub)
    if not np.isnan(pooled) or run.df["workload"].nunique() > 1:
        return pooled, "" if np.isnan(pooled) else "timings"
    return analysis.arm_acceptance(run, arm)


def acceptance_text(rate: float, source: str) -> str:
    """The rate, with its source named when it is not the per-request counts."""
    named = source not in ("", "timings") and not math.isnan(rate)
    return fmt(rate, ".3f") + (f" ({source})" if named else "")


def _speedup_cols(run: RunData, cmps: dict[str, Any], arm: str) -> dict[str, Any]:
    if arm == run.baseline:
        return {"speedup": 1.0, "speedup_ci_low": np.nan, "speedup_ci_high": np.nan, "verdict": "baseline"}
    c = cmps.get(arm)
    if c is None:
        return {"speedup": np.nan, "speedup_ci_low": np.nan, "speedup_ci_high": np.nan, "verdict": ""}
    return {
        "speedup": c.ratio,
        "speedup_ci_low": c.ci_low,
        "speedup_ci_high": c.ci_high,
        "verdict": stats.verdict_text(c),
    }


# -- display ----------------------------------------------------------------------------------
def _cell(row: dict[Hashable, Any], metric: str, spec: str) -> str:
    return fmt_ci(row[f"{metric}_median"], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"], spec)


def arm_table(summary: pd.DataFrame, workload: str) -> pd.DataFrame:
    """Display form of one workload's rows of :func:`summary_frame`: TTFT, prefill, decode rate
    and wall clock side by side, because a decode gain can vanish in wall
    clock (mistake 6 in docs/mistakes.md)."""
    sub = summary[summary["workload"] == workload]
    rows = [
        {
            "arm": r["arm"],
            "n": r["requests"],
            "TTFT ms": _cell(r, "ttft_ms", ".0f"),
            "prefill ms": _cell(r, "prefill_ms", ".0f"),
            "decode tok/s": _cell(r, "decode_tok_s", ".1f"),
            "e2e ms": _cell(r, "e2e_ms", ".0f"),
            "ITL ms (per token)": _cell(r, "itl_ms", ".2f"),
            "tokens/chunk": _cell(r, "tokens_per_chunk", ".2f"),
            "acceptance": acceptance_text(r["acceptance"], r["acceptance_source"]),
            "decode speedup": fmt_ci(r["speedup"], r["speedup_ci_low"], r["speedup_ci_high"], ".3f"),
            "verdict": r["verdict"],
        }
        for r in sub.to_dict("records")
    ]
    return pd.DataFrame(rows)


def findings_table(found: list[Finding]) -> pd.DataFrame:
    rows = [
        {"severity": f.severity, "code": f.code, "arms": ", ".join(f.arms), "evidence": f.evidence}
        for f in found
    ]
    return pd.DataFrame(rows, columns=["severity", "code", "arms", "evidence"])


def decision_table(decisions: list[analysis.Decision]) -> pd.DataFrame:
    rows = [
        {
            "workload": d.workload,
            "recommendation": d.recommendation,
            "decode speedup": fmt_ci(d.speedup, d.ci_low, d.ci_high, ".3f") if d.arm else "—",
            "why": d.reason,
        }
        for d in decisions
    ]
    return pd.DataFrame(rows, columns=["workload", "recommendation", "decode speedup", "why"])


def category_table(run: RunData) -> pd.DataFrame:
    """Median decode tok/s per category (rows) and arm (columns), each arm's ratio to the
    baseline in that category, and the arms whose category medians split in two clusters."""
    df = run.df[run.df["category"].notna()]
    if df.empty or df["category"].nunique() < 2:
        return pd.DataFrame()
    med = df.pivot_table(index="category", columns="arm", values="decode_tok_s", aggfunc="median")
    med = med[[a for a in run.measured_arms if a in med.columns]]
    out = med.map(lambda v: fmt(v))
    if run.baseline in med.columns:
        for arm in med.columns.drop(run.baseline):
            out[f"{arm} ×"] = (med[arm] / med[run.baseline]).map(lambda v: fmt(v, ".2f"))
    return out.reset_index().rename_axis(columns=None)


def category_splits(run: RunData) -> list[str]:
    """One sentence per arm whose per-category medians form two clusters (mistake 5 in docs/mistakes.md)."""
    out, clean = [], stalls.without_stalls(run.df, run.records)  # a paused engine is no category
    for arm in run.measured_arms:
        cb = bimodality.category_bimodality(clean, arm)
        if cb.bimodal:
            out.append(
                f"{arm}: categories split into {', '.join(cb.low)} (≈{cb.modes[0]:.1f} tok/s) and "
                f"{', '.join(cb.high)} (≈{cb.modes[1]:.1f} tok/s); {cb.method}."
            )
    return out


def acceptance_frame(run: RunData) -> pd.DataFrame:
    """Acceptance of every speculating arm from every source, each with its own numbers."""
    rows = []
    for arm in run.measured_arms:
        if not run.speculates(arm):
            continue
        for source, s in checks.acceptance_sources(arm, run.df, run.cells, run.engine).items():
            rows.append({"arm": arm, "source": source, **s})
    cols = ["arm", "source", "drafted", "accepted", "rate", "mean_accepted_length"]
    return pd.DataFrame(rows, columns=cols)


def acceptance_table(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for col, spec in (
        ("drafted", ".0f"),
        ("accepted", ".0f"),
        ("rate", ".3f"),
        ("mean_accepted_length", ".2f"),
    ):
        out[col] = out[col].map(lambda v, s=spec: fmt(v, s))
    return out.rename(columns={"rate": "accepted / drafted", "mean_accepted_length": "mean accepted length"})


def equivalence_table(run: RunData) -> pd.DataFrame:
    """Each arm's outputs vs the baseline's for the same (prompt, repeat): all prompts, then per
    category (drift differs by category: ~0 on tool calls, large on long prose)."""
    texts = checks.output_texts(run.records)
    categories = sorted(c for c in texts["category"].dropna().unique()) if len(texts) else []
    rows = []
    for arm in run.measured_arms:
        if arm == run.baseline:
            continue
        for category in ["all", *categories] if len(categories) > 1 else ["all"]:
            subset = texts if category == "all" else texts[texts["category"] == category]
            rows.append(_equivalence_row(arm, category, checks.output_equivalence(subset, arm, run.baseline)))
    return pd.DataFrame(rows)


def _equivalence_row(arm: str, category: str, eq: checks.Equivalence) -> dict[str, Any]:
    return {
        "arm": arm,
        "category": category,
        "pairs": eq.pairs,
        "identical": fmt(eq.exact_match_rate * 100, ".0f") + " %" if eq.pairs else "—",
        "mean Levenshtein": fmt(eq.mean_levenshtein, ".1f"),
        "normalised drift": fmt(eq.mean_normalised_drift, ".3f"),
        "median first divergence (chars)": fmt(eq.median_first_divergence, ".0f"),
    }


def divergence_examples(run: RunData, per_arm: int = 2, width: int = 60) -> pd.DataFrame:
    """The first differing outputs per arm, cut around the first differing character: the
    reader sees what changed, not just how much."""
    texts = checks.output_texts(run.records).drop_duplicates(["arm", "prompt_id", "repeat"])
    indexed = texts.set_index(["arm", "prompt_id", "repeat"])["text"]
    if run.baseline not in texts["arm"].values:
        return pd.DataFrame()
    base = indexed.loc[run.baseline]
    rows = [
        row
        for arm in run.measured_arms
        if arm != run.baseline
        for row in _differences(arm, base, indexed.loc[arm], width)[:per_arm]
    ]
    return pd.DataFrame(rows, columns=["arm", "prompt", "repeat", "at char", "baseline says", "arm says"])


def _differences(arm: str, base: pd.Series, mine: pd.Series, width: int) -> list[dict[str, Any]]:
    pairs = pd.concat([base.rename("b"), mine.rename("a")], axis=1, join="inner")
    rows = []
    for (prompt, repeat), b, a in zip(pairs.index, pairs["b"], pairs["a"], strict=True):
        i = checks.first_divergence(b, a)
        if i is not None:
            cut = slice(max(0, i - width // 3), i + width)
            rows.append({"arm": arm, "prompt": prompt, "repeat": repeat, "at char": i,
                         "baseline says": b[cut], "arm says": a[cut]})  # fmt: skip
    return rows


def machine_table(df: pd.DataFrame, baseline: str, arms: list[str]) -> pd.DataFrame:
    """Decode speedup of every arm vs the baseline on each machine of a merged run: a pooled
    number can hide a box where speculation loses."""
    rows = []
    for machine, sub in df[df["machine"].notna()].groupby("machine", sort=True):
        for arm in arms:
            if arm == baseline or sub.loc[sub["arm"] == arm, "decode_tok_s"].notna().sum() < 2:
                continue
            try:
                c = stats.speedup(sub, arm, baseline)
            except ValueError:  # the baseline has too few values on this machine
                continue
            speed = fmt_ci(c.ratio, c.ci_low, c.ci_high, ".3f")
            rows.append({"machine": machine, "arm": arm, "n": c.n_a, "decode speedup": speed,
                         "verdict": stats.verdict_text(c)})  # fmt: skip
    return pd.DataFrame(rows)


def position_frame(run: RunData) -> pd.DataFrame:
    """Acceptance per draft position: Δaccepted_pos_<i> / Δdrafts summed over an arm's cells
    (vLLM's per-position counters); empty when no cell carries them."""
    rows = []
    for arm in run.measured_arms:
        deltas = [checks.spec_deltas(c) for c in run.cells if c.get("arm") == arm]
        drafts = sum(d.get("drafts", 0.0) for d in deltas)
        positions = sorted(
            {int(k.rsplit("_", 1)[1]) for d in deltas for k in d if k.startswith("accepted_pos_")}
        )
        for pos in positions if drafts > 0 else ():
            accepted = sum(d.get(f"accepted_pos_{pos}", 0.0) for d in deltas)
            rows.append({"arm": arm, "position": pos, "accepted": accepted, "drafts": drafts,
                         "rate": accepted / drafts})  # fmt: skip
    return pd.DataFrame(rows, columns=["arm", "position", "accepted", "drafts", "rate"])
