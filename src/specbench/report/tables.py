"""The report's tables in display form: the numeric frames of an :class:`~specbench.analysis.result.Analysis`
formatted for reading (numbers rounded, CIs in parentheses, NaN as an em dash). Nothing is computed here.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import pandas as pd

from specbench.analysis.decision import Decision
from specbench.analysis.evidence.acceptance import PER_REQUEST
from specbench.analysis.findings.model import Finding
from specbench.analysis.tables.frames import Categories
from specbench.analysis.tables.measures import MEASURES, verdict_word
from specbench.report.findinggroups import group_findings


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


def acceptance_text(rate: float, source: str) -> str:
    """The rate, with its source named when it is not the per-request counts."""
    named = source not in ("", PER_REQUEST) and not math.isnan(rate)
    return fmt(rate, ".3f") + (f" ({source})" if named else "")


def _cell(row: dict[Hashable, Any], metric: str, spec: str) -> str:
    return fmt_ci(row[f"{metric}_median"], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"], spec)


def arm_table(summary: pd.DataFrame, point: str) -> pd.DataFrame:
    """Display form of one operating point's rows of :func:`~specbench.analysis.tables.frames.summary_frame`
    (a workload without a sweep is one, named after it): TTFT, prefill, decode rate and wall clock
    side by side, because a decode gain can vanish in wall clock (mistake 6 in docs/mistakes.md)."""
    sub = summary[summary["point"] == point]
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
    """One row per code and severity with every arm it names (issue 28: one BUSY_MACHINE line per
    arm pushed the decision down); each finding's evidence is kept, one sentence after another."""
    rows = [
        {
            "severity": g.severity,
            "code": g.code,
            "arms": ", ".join(g.arms),
            "evidence": " ◦ ".join(g.evidence),
        }
        for g in group_findings(found)
    ]
    return pd.DataFrame(rows, columns=["severity", "code", "arms", "evidence"])


def decision_table(decisions: list[Decision]) -> pd.DataFrame:
    """One row per operating point: what to run, the deciding measure's speedup and why."""
    rows = [
        {
            "workload": d.workload,
            "recommendation": d.recommendation,
            "decided by": MEASURES[d.measure].label,
            "speedup": fmt_ci(d.speedup, d.ci_low, d.ci_high, ".3f") if d.arm else "—",
            "why": d.reason,
        }
        for d in decisions
    ]
    return pd.DataFrame(rows, columns=["workload", "recommendation", "decided by", "speedup", "why"])


def sweep_table(frame: pd.DataFrame, workload: str, arm_order: list[str]) -> pd.DataFrame:
    """A sweep's arms level by level (rows) and measures (columns): each cell the ratio to the
    baseline with the interval its verdict used and the verdict; the deciding measure marked *."""
    sub = frame[frame["workload"] == workload]
    if sub.empty:
        return pd.DataFrame()
    measures = list(dict.fromkeys(sub["measure"]))
    decides = set(sub.loc[sub["decides"], "measure"])
    rows = []
    for (label, arm), g in sub.groupby(["level_label", "arm"], sort=False):
        by = {str(r["measure"]): r for r in g.to_dict("records")}
        row: dict[str, str] = {"level": str(label), "arm": str(arm)}
        for m in measures:
            r = by.get(m)
            cell = f"{speedup_text(r)} {verdict_word(str(r['verdict']), m)}" if r else "—"
            row[MEASURES[m].label + (" *" if m in decides else "")] = cell
        rows.append(row)
    order = {a: i for i, a in enumerate(arm_order)}
    levels = list(dict.fromkeys(sub["level_label"]))
    rows.sort(key=lambda r: (levels.index(r["level"]), order.get(r["arm"], len(order))))
    return pd.DataFrame(rows)


def category_table(cats: Categories, baseline: str) -> pd.DataFrame:
    """Per category: the baseline's median decode tok/s, then each arm's median and its paired,
    launch-level speedup with the interval its verdict used, and the tokens it drafted and
    accepted there (a speedup with no drafts behind it is no speculation). No ratio of medians."""
    if cats.medians.empty:
        return pd.DataFrame()
    by_key = {(str(r["category"]), str(r["arm"])): r for r in cats.speedups.to_dict("records")}
    rows = []
    for category in cats.medians.index:
        for arm in cats.medians.columns:
            r = by_key.get((str(category), str(arm)))
            rows.append({
                "category": category, "arm": arm,
                "decode tok/s (median)": fmt(cats.medians.loc[category, arm]),
                "decode speedup (CI)": speedup_text(r) if r else "—",
                "verdict": "baseline" if arm == baseline else (str(r["verdict"]) if r else ""),
                "drafted": fmt(r["drafted"], ".0f") if r else "—",
                "accepted": fmt(r["accepted"], ".0f") if r else "—",
                "acceptance": fmt(r["acceptance"], ".2f") if r else "—",
            })  # fmt: skip
    return pd.DataFrame(rows)


def speedup_text(row: dict[Any, Any]) -> str:
    """ "×1.23 (1.10–1.37)", the interval the verdict was read from; "×1.23" without one (LOW_N)."""
    ratio = row.get("speedup", row.get("ratio"))
    if ratio is None or not math.isfinite(float(ratio)):
        return "—"
    return "×" + fmt_ci(float(ratio), float(row["ci_low"]), float(row["ci_high"]), ".2f")


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


def position_table(positions: pd.DataFrame) -> pd.DataFrame:
    """Accepted / drafts per draft position (rows, counted from 1) and arm (columns)."""
    shown = positions.pivot_table(index="position", columns="arm", values="rate").map(fmt_rate)
    shown.index = shown.index + 1
    return shown.reset_index().rename_axis(columns=None)


def equivalence_table(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return pd.DataFrame()
    return pd.DataFrame({
        "arm": frame["arm"],
        "category": frame["category"],
        "pairs": frame["pairs"],
        "identical": [fmt(r * 100, ".0f") + " %" if n else "—"
                      for r, n in zip(frame["exact_match_rate"], frame["pairs"], strict=True)],
        "mean Levenshtein": frame["mean_levenshtein"].map(lambda v: fmt(v, ".1f")),
        "normalised drift": frame["mean_normalised_drift"].map(lambda v: fmt(v, ".3f")),
        "median first divergence (chars)": frame["median_first_divergence"].map(lambda v: fmt(v, ".0f")),
    })  # fmt: skip


def machine_table(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return pd.DataFrame()
    cis = zip(frame["ratio"], frame["ci_low"], frame["ci_high"], strict=True)
    return pd.DataFrame({
        "machine": frame["machine"],
        "arm": frame["arm"],
        "n": frame["n"],
        "decode speedup": [fmt_ci(r, lo, hi, ".3f") for r, lo, hi in cis],
        "verdict": frame["verdict"],
    })  # fmt: skip
