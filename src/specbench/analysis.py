"""From a run directory to conclusions: per-arm summary and speedups vs the baseline arm."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench import checks, stats
from specbench.checks import Finding
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.metrics import frame
from specbench.store import RunStore


@dataclass(frozen=True)
class RunData:
    """Everything analysis needs, loaded once from the run directory."""

    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    cells: list[dict[str, Any]]
    df: pd.DataFrame

    @property
    def baseline(self) -> str:
        return str(self.manifest.get("matrix", {}).get("baseline", "baseline"))

    @property
    def arms(self) -> list[str]:
        return list(self.manifest.get("matrix", {}).get("arms", {})) or sorted(self.df["arm"].unique())

    def arm_args(self, arm: str) -> list[str]:
        matrix = self.manifest.get("matrix", {})
        return [*matrix.get("common_args", []), *matrix.get("arms", {}).get(arm, [])]

    @property
    def measured_arms(self) -> list[str]:
        present = set(self.df["arm"].unique())
        return [a for a in self.arms if a in present]


def load_run(root: Path) -> RunData:
    store = RunStore(root)
    records = store.records()
    return RunData(manifest=store.manifest(), records=records, cells=store.cells(), df=frame(records))


def paired_ratio(df: pd.DataFrame, arm: str, baseline: str, metric: str = "decode_tok_s") -> float:
    """Median over (prompt, repeat) pairs of arm/baseline; NaN when nothing pairs up."""
    keys = ["prompt_id", "repeat"]
    a = df[df["arm"] == arm].groupby(keys)[metric].median()
    b = df[df["arm"] == baseline].groupby(keys)[metric].median()
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1).dropna()
    return float(np.median(joined["a"] / joined["b"])) if len(joined) else float("nan")


def pooled_acceptance(df: pd.DataFrame) -> float:
    """Σ accepted / Σ drafted over requests: the per-token acceptance of the whole arm."""
    drafted = df["draft_n"].sum()
    return float(df["draft_accepted"].sum() / drafted) if drafted > 0 else float("nan")


def comparisons(run: RunData, metric: str = "decode_tok_s") -> dict[str, stats.Comparison]:
    """Each measured arm vs the baseline: ratio, 95 % bootstrap CI (paired by prompt), verdict."""
    if run.baseline not in run.measured_arms:
        return {}
    return {
        arm: stats.speedup(run.df, arm, run.baseline, metric)
        for arm in run.measured_arms
        if arm != run.baseline and run.df.loc[run.df["arm"] == arm, metric].notna().sum() >= 2
    }


def findings(run: RunData) -> list[Finding]:
    """Every finding, most serious first: what a reader must know before trusting a number."""
    out: list[Finding] = []
    patterns = LlamaCppEngine(Path("llama-server")).fallback_patterns()
    for arm in run.arms:
        args = run.arm_args(arm)
        out += checks.silent_fallback(arm, args, run.df, run.cells, patterns)
        if checks.speculates(args):
            out += checks.acceptance_artefact(arm, run.df, checks.acceptance_sources(arm, run.df, run.cells))
    if run.baseline in run.arms:
        out += checks.confounds({a: run.arm_args(a) for a in run.arms}, run.baseline)
        out += checks.output_drift(checks.output_texts(run.records), run.measured_arms, run.baseline)
    out += _statistical_findings(run)
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(out, key=lambda f: order.get(f.severity, 3))


def _statistical_findings(run: RunData) -> list[Finding]:
    if run.df.empty:
        return []
    out = [
        Finding(w.code, (w.arm,), w.message) for w in stats.stability_warnings(run.df, baseline=run.baseline)
    ]
    for arm in run.measured_arms:
        bimodal = stats.bimodality(run.df.loc[run.df["arm"] == arm, "decode_tok_s"].to_numpy())
        if bimodal.bimodal:
            modes = " and ".join(f"{m:.1f}" for m in bimodal.modes)
            out.append(
                Finding(
                    "BIMODAL",
                    (arm,),
                    f"{arm}: decode tok/s has two modes ({modes}); the mean describes "
                    "neither — see the per-category breakdown.",
                )
            )
    for arm, cmp in comparisons(run).items():
        if cmp.verdict == "slower":
            out.append(
                Finding(
                    "SPEC_LOSS",
                    (arm, run.baseline),
                    f"{arm} is slower than {run.baseline}: decode speed ×{cmp.ratio:.3f} "
                    f"(95 % CI {cmp.ci_low:.3f}–{cmp.ci_high:.3f}).",
                    "info",
                )
            )
    return out


def arm_summary(run: RunData) -> pd.DataFrame:
    """One row per arm: counts, medians, acceptance, speedup with CI and verdict."""
    cmps = comparisons(run)
    rows = []
    for arm in run.arms:
        sub = run.df[run.df["arm"] == arm]
        failed = sum(1 for r in run.records if r["arm"] == arm and r.get("error") and not r.get("warmup"))
        rows.append(
            {
                "arm": arm,
                "status": run.manifest.get("arms", {}).get(arm, {}).get("status", "not run"),
                "requests": len(sub),
                "errors": failed,
                "ttft_ms": sub["ttft_ms"].median(),
                "decode_tok_s": sub["decode_tok_s"].median(),
                "e2e_ms": sub["e2e_ms"].median(),
                "acceptance": pooled_acceptance(sub),
                "speedup": 1.0 if arm == run.baseline else (cmps[arm].ratio if arm in cmps else np.nan),
                "ci_low": cmps[arm].ci_low if arm in cmps else np.nan,
                "ci_high": cmps[arm].ci_high if arm in cmps else np.nan,
                "verdict": "baseline" if arm == run.baseline else (cmps[arm].verdict if arm in cmps else ""),
            }
        )
    return pd.DataFrame(rows)
