"""The numeric tables a report shows, computed from a loaded run (``report/`` only formats them).

Medians carry a 95 % percentile-bootstrap CI (:func:`~specbench.analysis.stats.median_ci`)
because a median without its spread is the single-number reporting docs/mistakes.md, mistake 4
warns about.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis import bimodality, points, stats
from specbench.analysis.evidence import acceptance, stalls
from specbench.analysis.findings import outputs
from specbench.analysis.rundata import (
    RunData,
    acceptance_sources,
    arm_acceptance,
    category_comparisons,
    point_comparisons,
    pooled_acceptance,
)

METRICS = ("ttft_ms", "decode_tok_s", "e2e_ms", "prefill_ms", "itl_ms", "tokens_per_chunk")


# -- one row per arm × operating point --------------------------------------------------------
def summary_frame(run: RunData) -> pd.DataFrame:
    """One row per arm × operating point (a workload without a sweep is one, ``point`` its name):
    n, medians with CIs, acceptance, decode speedup vs baseline at that point."""
    cmps = point_comparisons(run)
    rows = []
    for (workload, point, arm), sub in run.df.groupby(["workload", points.POINT, "arm"], sort=False):
        row: dict[str, Any] = {"workload": workload, "point": point, "arm": arm, "requests": len(sub)}
        for metric in METRICS:
            mid, low, high = stats.median_ci(sub[metric])
            row |= {f"{metric}_median": mid, f"{metric}_ci_low": low, f"{metric}_ci_high": high}
        row["acceptance"], row["acceptance_source"] = _acceptance(run, str(arm), sub)
        row |= _speedup_cols(run, cmps.get(str(point), {}), str(arm))
        rows.append(row)
    order = {a: i for i, a in enumerate(run.arms)}
    place = {p.name: i for i, p in enumerate(run.points)}
    rows.sort(key=lambda r: (str(r["workload"]), place.get(r["point"], 0), order.get(r["arm"], len(order))))
    return pd.DataFrame(rows)


def _acceptance(run: RunData, arm: str, sub: pd.DataFrame) -> tuple[float, str]:
    """Per-request counts of this workload's requests; without them (vLLM without per-request
    metrics) the arm's /metrics counter deltas, named, when the run has one workload (a cell's
    counters cannot be split between workloads)."""
    pooled = pooled_acceptance(sub)
    if not np.isnan(pooled) or run.df[points.POINT].nunique() > 1:
        return pooled, "" if np.isnan(pooled) else acceptance.PER_REQUEST
    return arm_acceptance(run, arm)


def _speedup_cols(run: RunData, cmps: dict[str, Any], arm: str) -> dict[str, Any]:
    nan = {"speedup_ci_low": np.nan, "speedup_ci_high": np.nan, "speedup_confidence": np.nan}
    if arm == run.baseline:
        return {"speedup": 1.0, **nan, "verdict": "baseline", "error_rate": ""}
    c = cmps.get(arm)
    if c is None:
        return {"speedup": np.nan, **nan, "verdict": "", "error_rate": ""}
    return {  # the interval is the one the verdict was read from (issue 27.6), at its Holm level
        "speedup": c.ratio,
        "speedup_ci_low": c.ci_low,
        "speedup_ci_high": c.ci_high,
        "speedup_confidence": c.confidence,
        "verdict": stats.verdict_text(c),
        "error_rate": stats.error_rate_text(c),
    }


# -- per prompt category ----------------------------------------------------------------------
@dataclass(frozen=True)
class Categories:
    """Median decode tok/s per category (rows) and arm (columns); ``speedups``: one row per
    (category, arm) with the arm's paired, launch-level speedup over the baseline on that
    category's requests (interval, verdict, LOW_N — never a ratio of medians, issue 27.5) and the
    tokens the arm drafted and accepted there; one sentence per arm whose category medians split
    in two clusters. ``medians`` is empty when the run has fewer than two categories."""

    medians: pd.DataFrame
    speedups: pd.DataFrame
    splits: list[str]


SPEEDUP_COLUMNS = [
    "category", "arm", "requests", "launches", "speedup", "ci_low", "ci_high", "confidence", "family",
    "verdict", "drafted", "accepted", "acceptance",
]  # fmt: skip


def categories(run: RunData) -> Categories:
    df = run.df[run.df["category"].notna()]
    if df.empty or df["category"].nunique() < 2:
        return Categories(pd.DataFrame(), pd.DataFrame(columns=SPEEDUP_COLUMNS), [])
    med = df.pivot_table(index="category", columns="arm", values="decode_tok_s", aggfunc="median")
    med = med[[a for a in run.measured_arms if a in med.columns]]
    return Categories(med, category_speedups(run), category_splits(run))


def category_speedups(run: RunData) -> pd.DataFrame:
    """One row per (category, arm other than the baseline): see :class:`Categories`."""
    cmps = category_comparisons(run)
    df = run.df
    rows = []
    for (category, arm), c in cmps.items():
        sub = df[(df["arm"] == arm) & (df["category"].astype(str) == category)]
        drafted, accepted = sub["draft_n"].sum(min_count=1), sub["draft_accepted"].sum(min_count=1)
        rows.append({
            "category": category, "arm": arm, "requests": len(sub), "launches": c.n_launches,
            "speedup": c.ratio, "ci_low": c.ci_low, "ci_high": c.ci_high, "confidence": c.confidence,
            "family": c.family, "verdict": stats.verdict_text(c), "drafted": drafted, "accepted": accepted,
            "acceptance": accepted / drafted if drafted and drafted > 0 else np.nan,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS)


def category_splits(run: RunData) -> list[str]:
    """One sentence per arm whose per-category medians form two clusters (mistake 5 in docs/mistakes.md)."""
    speculating = {a for a in run.arms if run.speculates(a)}
    out, clean = [], stalls.without_stalls(run.df, run.records, speculating)  # a pause is no category
    for arm in run.measured_arms:
        cb = bimodality.category_bimodality(clean, arm)
        if cb.bimodal:
            out.append(
                f"{arm}: categories split into {', '.join(cb.low)} (≈{cb.modes[0]:.1f} tok/s) and "
                f"{', '.join(cb.high)} (≈{cb.modes[1]:.1f} tok/s); {cb.method}."
            )
    return out


# -- acceptance -------------------------------------------------------------------------------
def acceptance_frame(run: RunData) -> pd.DataFrame:
    """Acceptance of every speculating arm from every source, each with its own numbers."""
    rows = []
    for arm in run.measured_arms:
        if not run.speculates(arm):
            continue
        for source, s in acceptance_sources(run, arm).items():
            rows.append({"arm": arm, "source": source, **s})
    cols = ["arm", "source", "drafted", "accepted", "rate", "mean_accepted_length"]
    return pd.DataFrame(rows, columns=cols)


def position_frame(run: RunData) -> pd.DataFrame:
    """Acceptance per draft position: Δaccepted_pos_<i> / Δdrafts summed over an arm's cells
    (vLLM's per-position counters); empty when no cell carries them."""
    rows = []
    for arm in run.measured_arms:
        deltas = [acceptance.spec_deltas(c) for c in run.cells if c.get("arm") == arm]
        drafts = sum(d.get("drafts", 0.0) for d in deltas)
        positions = sorted(
            {int(k.rsplit("_", 1)[1]) for d in deltas for k in d if k.startswith("accepted_pos_")}
        )
        for pos in positions if drafts > 0 else ():
            accepted = sum(d.get(f"accepted_pos_{pos}", 0.0) for d in deltas)
            rows.append({"arm": arm, "position": pos, "accepted": accepted, "drafts": drafts,
                         "rate": accepted / drafts})  # fmt: skip
    return pd.DataFrame(rows, columns=["arm", "position", "accepted", "drafts", "rate"])


# -- output equivalence -----------------------------------------------------------------------
def equivalence_frame(run: RunData) -> pd.DataFrame:
    """Each arm's outputs vs the baseline's for the same (prompt, repeat): all prompts, then per
    category (drift differs by category: ~0 on tool calls, large on long prose)."""
    texts = outputs.output_texts(run.records)
    categories = sorted(c for c in texts["category"].dropna().unique()) if len(texts) else []
    rows = []
    for arm in run.measured_arms:
        if arm == run.baseline:
            continue
        for category in ["all", *categories] if len(categories) > 1 else ["all"]:
            subset = texts if category == "all" else texts[texts["category"] == category]
            eq = outputs.output_equivalence(subset, arm, run.baseline)
            rows.append({"arm": arm, "category": category, "pairs": eq.pairs,
                         "exact_match_rate": eq.exact_match_rate, "mean_levenshtein": eq.mean_levenshtein,
                         "mean_normalised_drift": eq.mean_normalised_drift,
                         "median_first_divergence": eq.median_first_divergence})  # fmt: skip
    return pd.DataFrame(rows)


def divergence_examples(run: RunData, per_arm: int = 2, width: int = 60) -> pd.DataFrame:
    """The first differing outputs per arm, cut around the first differing character: the
    reader sees what changed, not just how much."""
    texts = outputs.output_texts(run.records).drop_duplicates(["arm", "prompt_id", "repeat"])
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
        i = outputs.first_divergence(b, a)
        if i is not None:
            cut = slice(max(0, i - width // 3), i + width)
            rows.append({"arm": arm, "prompt": prompt, "repeat": repeat, "at char": i,
                         "baseline says": b[cut], "arm says": a[cut]})  # fmt: skip
    return rows


# -- merged runs ------------------------------------------------------------------------------
def machine_frame(df: pd.DataFrame, baseline: str, arms: list[str]) -> pd.DataFrame:
    """Decode speedup of every arm vs the baseline on each machine of a merged run: a pooled
    number can hide a box where speculation loses."""
    rows = []
    for machine, sub in df[df["machine"].notna()].groupby("machine", sort=True):
        for arm in arms:
            if arm == baseline or sub.loc[sub["arm"] == arm, "decode_tok_s"].notna().sum() < 2:
                continue
            c = stats.speedup(sub, arm, baseline)  # too few baseline values here: LOW_N, no interval
            rows.append({"machine": machine, "arm": arm, "n": c.n_a, "ratio": c.ratio, "ci_low": c.ci_low,
                         "ci_high": c.ci_high, "verdict": stats.verdict_text(c)})  # fmt: skip
    return pd.DataFrame(rows)


# -- decode rate distributions (the plots' boxes and bands) -------------------------------------
MedianCI = tuple[float, float, float]
FACETS = ("category", "machine", "point")


def decode_cis(detail: pd.DataFrame, arms: list[str]) -> dict[tuple[str, str], dict[str, MedianCI]]:
    """(median, CI low, CI high) of decode tok/s per arm: over every request (key ``("", "")``)
    and per value of each facet column that has two or more values (key ``(column, value)``)."""
    groups = [("", "", detail)]
    for column in FACETS:
        values = sorted(str(v) for v in detail[column].dropna().unique())
        if len(values) >= 2:
            groups += [(column, v, detail[detail[column].astype(str) == v]) for v in values]
    return {
        (column, value): {arm: stats.median_ci(sub.loc[sub["arm"] == arm, "decode_tok_s"]) for arm in arms}
        for column, value, sub in groups
    }


# -- rendered prompts -----------------------------------------------------------------------------
# Each arm's first launch keeps one rendered prompt per category in its cell (``rendered_prompts``,
# specbench.workloads.rendered); the report shows the baseline's and names any arm whose server
# rendered the same request differently (an arm flag that changes the template changes what is measured).
PROMPT_COLUMNS = ["workload", "category", "prompt_id", "arm", "via", "text", "differs_in"]


def _by_arm(run: RunData) -> dict[str, list[dict[str, Any]]]:
    """Arm → its first non-empty list of rendered samples, in the matrix's arm order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for cell in run.cells:
        found = cell.get("rendered_prompts")
        if isinstance(found, list) and found and cell.get("arm") not in out:
            out[str(cell.get("arm"))] = [s for s in found if isinstance(s, dict) and "text" in s]
    order = {a: i for i, a in enumerate([run.baseline, *run.arms])}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


def rendered_prompts(run: RunData) -> pd.DataFrame:
    """One row per (workload, category): the rendered prompt of the baseline (else the first arm
    that has one), with the arms whose server rendered that request to other text."""
    by_arm = _by_arm(run)
    if not by_arm:
        return pd.DataFrame(columns=PROMPT_COLUMNS)
    shown, samples = next(iter(by_arm.items()))
    rows = []
    for s in samples:
        others = [
            arm
            for arm, found in by_arm.items()
            if arm != shown
            and any(o.get("prompt_id") == s.get("prompt_id") and o["text"] != s["text"] for o in found)
        ]
        rows.append({
            "workload": s.get("workload"), "category": s.get("category"), "prompt_id": s.get("prompt_id"),
            "arm": shown, "via": s.get("via", ""), "text": s["text"], "differs_in": others,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)
