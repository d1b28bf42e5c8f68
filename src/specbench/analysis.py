"""From a run directory to conclusions: per-arm summary and speedups vs the baseline arm."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench import adaptive, checks, evidence, launches, machine, sources, stability, stalls, stats
from specbench.checks import Finding
from specbench.clientlag import client_lag_findings, schedule_findings
from specbench.engines import engine_for_analysis
from specbench.engines.base import Engine
from specbench.findings import SEVERITY_ORDER
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
    def engine(self) -> Engine:
        """The run's engine, for reading its flags and logs (nothing is launched)."""
        return engine_for_analysis(str(self.manifest.get("matrix", {}).get("engine", "llamacpp")))

    def speculates(self, arm: str) -> bool:
        """The arm is configured to speculate, by the run's engine's flag rules."""
        return checks.speculates(self.arm_args(arm), self.engine)

    @property
    def confidence(self) -> float:
        """0.95, or the sequential rule's nominal level when launches were added adaptively."""
        return adaptive.confidence(self.manifest)

    @property
    def measured_arms(self) -> list[str]:
        present = set(self.df["arm"].unique())
        return [a for a in self.arms if a in present]


def load_run(root: Path) -> RunData:
    store = RunStore(root)
    records = store.records()
    return RunData(manifest=store.manifest(), records=records, cells=store.cells(), df=frame(records))


def pooled_acceptance(df: pd.DataFrame) -> float:
    """Σ accepted / Σ drafted over requests: the per-token acceptance of the whole arm."""
    drafted = df["draft_n"].sum()
    return float(df["draft_accepted"].sum() / drafted) if drafted > 0 else float("nan")


def arm_acceptance(run: RunData, arm: str) -> tuple[float, str]:
    """Pooled acceptance and its source: per-request timings, else /metrics counter deltas."""
    if not run.speculates(arm):
        return pooled_acceptance(run.df[run.df["arm"] == arm]), "timings"
    return sources.arm_acceptance(checks.acceptance_sources(arm, run.df, run.cells, run.engine))


def comparisons(run: RunData, metric: str = "decode_tok_s") -> dict[str, stats.Comparison]:
    """Each measured arm vs the baseline: ratio, 95 % CI of the launch-level mixed model (prompts
    paired inside launch pairs), verdict faster / slower / equivalent / undetermined."""
    if run.baseline not in run.measured_arms:
        return {}
    return {
        arm: stats.speedup(run.df, arm, run.baseline, metric, confidence=run.confidence)
        for arm in run.measured_arms
        if arm != run.baseline and run.df.loc[run.df["arm"] == arm, metric].notna().sum() >= 2
    }


def findings(run: RunData) -> list[Finding]:
    """Every finding, most serious first: what a reader must know before trusting a number."""
    out: list[Finding] = []
    engine = run.engine
    patterns = engine.fallback_patterns()
    for arm in run.arms:
        out += _speculation_findings(run, arm, patterns)
    if run.baseline in run.arms:
        out += checks.confounds({a: run.arm_args(a) for a in run.arms}, run.baseline, engine=engine)
        out += checks.output_drift(checks.output_texts(run.records), run.measured_arms, run.baseline)
        out += checks.toolcall_mismatch(run.records, run.measured_arms, run.baseline)
    out += _evidence_findings(run)
    out += client_lag_findings(run.cells, run.df)
    out += schedule_findings(run.records)
    out += _statistical_findings(run)
    return sorted(out, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))


def _evidence_findings(run: RunData) -> list[Finding]:
    """What the records and cells say about the measurement itself: cache, client vs server, load."""
    arms = run.measured_arms
    return (
        evidence.cached_prefill(run.df, arms)
        + evidence.client_server_disagreement(run.df, arms)
        + machine.busy_findings(run.cells, arms)
    )


def _speculation_findings(run: RunData, arm: str, patterns: list[str]) -> list[Finding]:
    """Speculation state, acceptance sources and self-draft for one arm configured to speculate."""
    args, engine = run.arm_args(arm), run.engine
    if not checks.speculates(args, engine):
        return []
    out = checks.silent_fallback(arm, args, run.df, run.cells, patterns, engine)
    found = checks.acceptance_sources(arm, run.df, run.cells, engine)
    artefacts = checks.acceptance_artefact(arm, run.df, found)
    selfdraft = checks.self_draft(arm, args, str(run.manifest.get("matrix", {}).get("model", "")), engine)
    if selfdraft is not None:  # 100 % is expected of a self-draft: say so instead of "artefact"
        artefacts = [f for f in artefacts if "accepted == drafted" not in f.evidence]
        out.append(selfdraft)
    return out + artefacts


def _statistical_findings(run: RunData) -> list[Finding]:
    if run.df.empty:
        return []
    out = [
        Finding(w.code, (w.arm,), w.message, "error" if w.severe else "warning")
        for w in stability.stability_warnings(run.df, baseline=run.baseline)
    ]
    out += stalls.stall_findings(run.records, run.measured_arms, run.df, run.baseline)
    out += stalls.bimodal_findings(run.df, run.records, run.cells, run.measured_arms)
    cmps = comparisons(run)
    out += _low_n_findings(run, cmps)
    for arm, cmp in cmps.items():
        if cmp.verdict == "slower":
            out.append(
                Finding(
                    "SPEC_LOSS",
                    (arm, run.baseline),
                    f"{arm} is slower than {run.baseline}: decode speed ×{cmp.ratio:.3f} "
                    f"({stats.ci_label(cmp)} CI {cmp.ci_low:.3f}–{cmp.ci_high:.3f}).",
                    spec_loss_severity(cmp.ci_high),
                )
            )
    return out


def _low_n_findings(run: RunData, cmps: dict[str, stats.Comparison]) -> list[Finding]:
    """An arm paired with the baseline over fewer launch pairs than a verdict needs: its ratio is
    printed, but launch-to-launch noise cannot be told from the effect, so it decides nothing."""
    return [
        Finding(
            "LOW_N",
            (arm, run.baseline),
            f"{arm} vs {run.baseline}: only {c.n_launches} launch pair(s); a verdict needs "
            f"≥ {launches.MIN_LAUNCHES} (the server launch is the unit of replication) — "
            "undetermined, raise repeats.",
        )
        for arm, c in cmps.items()
        if c.low_n
    ]


LARGE_LOSS = 0.8  # CI upper bound below this: at least a 20 % slowdown, whatever the noise


def spec_loss_severity(ci_high: float) -> str:
    """A significant slowdown is a warning; one whose whole CI lies below ×0.8 is an error, above a
    doubtful acceptance figure (warning) — a user publishing that arm publishes a loss."""
    return "error" if ci_high < LARGE_LOSS else "warning"


def arm_summary(run: RunData) -> pd.DataFrame:
    """One row per arm: counts, medians, acceptance, speedup with CI and verdict (caveated when the
    arm or the baseline is UNSTABLE beyond any verdict)."""
    cmps = comparisons(run)
    unstable = stability.unstable_arms(run.df)
    rows = []
    for arm in run.arms:
        sub = run.df[run.df["arm"] == arm]
        rate, source = arm_acceptance(run, arm)
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
                "acceptance": rate,
                "acceptance_source": source,
                "speedup": 1.0 if arm == run.baseline else (cmps[arm].ratio if arm in cmps else np.nan),
                "ci_low": cmps[arm].ci_low if arm in cmps else np.nan,
                "ci_high": cmps[arm].ci_high if arm in cmps else np.nan,
                "verdict": _verdict(run, cmps, arm, unstable),
            }
        )
    return pd.DataFrame(rows)


def _verdict(run: RunData, cmps: dict[str, stats.Comparison], arm: str, unstable: set[str]) -> str:
    if arm == run.baseline:
        return "baseline"
    return (
        stability.caveated(stats.verdict_text(cmps[arm]), arm, run.baseline, unstable) if arm in cmps else ""
    )


# -- request-level extras ---------------------------------------------------------------------
def detail_frame(run: RunData) -> pd.DataFrame:
    """``run.df`` plus the request fields sweeps vary: ``max_tokens``, ``concurrency`` and the
    ``machine`` a merged run's record came from (NaN / None where a record lacks them)."""
    kept = [r for r in run.records if r.get("error") is None and not r.get("warmup")]
    df = run.df.copy()
    if len(kept) != len(df):  # frame() changed its filter: fall back to no extras rather than misalign
        return df.assign(max_tokens=np.nan, concurrency=np.nan, machine=None)
    df["max_tokens"] = pd.to_numeric(pd.Series([(r.get("request") or {}).get("max_tokens") for r in kept]))
    df["concurrency"] = pd.to_numeric(pd.Series([r.get("concurrency") for r in kept]))
    df["machine"] = [r.get("machine") for r in kept]
    return df


ByWorkload = dict[str, dict[str, stats.Comparison]]


def workload_comparisons(run: RunData, metric: str = "decode_tok_s") -> ByWorkload:
    """:func:`comparisons` within each workload: speedups never pool different request shapes."""
    out: ByWorkload = {}
    for workload, sub in run.df.groupby("workload", sort=True):
        present = set(sub["arm"])
        if run.baseline not in present:
            out[str(workload)] = {}
            continue
        out[str(workload)] = {
            arm: stats.speedup(sub, arm, run.baseline, metric, confidence=run.confidence)
            for arm in run.measured_arms
            if arm != run.baseline and sub.loc[sub["arm"] == arm, metric].notna().sum() >= 2
        }
    return out


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
