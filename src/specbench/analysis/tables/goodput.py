"""Goodput against the matrix's SLOs, and the rate sweep: how much load each arm carries within
them, and the load above which speculation stops paying.

Goodput follows ``vllm bench serve --goodput`` (and AIPerf's definition, which is the same):
the requests per second that met *every* SLO given — TTFT, TPOT = (e2e − TTFT) / (tokens − 1)
and e2e, each met at equality — over the phase's duration, from the first send to the last end.
A request with a single output token has no TPOT and passes that bound (vLLM counts it as 0); a
failed request meets none. Beside it, token goodput: the output tokens of those requests per
second. Each launch gives one value per arm and phase; the interval is the launch-level one of
the rest of the statistics (:mod:`specbench.analysis.launches`): the t interval of the launch
means, and for the ratio to the baseline the paired log-ratio per launch pair.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from specbench.analysis import RunData, launches, metrics, points, stats
from specbench.matrix.config import SLOSpec
from specbench.store.record import Record

LAUNCH_COLUMNS = ["arm", "workload", "phase", "repeat", "rate", "requests", "good", "tokens_good",
                  "duration_s", "achieved_rate", "goodput_req_s", "goodput_tok_s", "attainment"]  # fmt: skip


def slo_of(manifest: dict[str, Any]) -> SLOSpec | None:
    """The run's SLOs, from the matrix kept in its manifest (None: the matrix set none)."""
    raw = (manifest.get("matrix") or {}).get("slo")
    return SLOSpec.model_validate(raw) if raw else None


def meets(rec: Record, slo: SLOSpec | None) -> bool:
    """The request completed and met every bound given (NaN TPOT: one output token, passes);
    without SLOs, every completed request counts (goodput is then throughput)."""
    if rec.error is not None:
        return False
    if slo is None:
        return True
    values = {"ttft_ms": metrics.ttft_ms(rec), "tpot_ms": metrics.tpot_ms(rec), "e2e_ms": metrics.e2e_ms(rec)}
    for name, bound in slo.bounds().items():
        value = values[name]
        if math.isnan(value):
            if name == "tpot_ms" and not math.isnan(values["e2e_ms"]):
                continue
            return False
        if value > bound:
            return False
    return True


def _end_s(rec: Record) -> float:
    return float(rec.wall_start or 0.0) + float(rec.t_end_ns or 0) / 1e9


def launch_goodput(records: list[Record], slo: SLOSpec | None) -> pd.DataFrame:
    """One row per (arm, workload, phase, launch): requests sent, how many met the SLOs, the
    phase's duration, achieved request rate, goodput in requests/s and output tokens/s."""
    groups: dict[tuple[str, str, str, int], list[Record]] = {}
    for rec in records:
        if not rec.warmup and rec.wall_start is not None:
            key = (str(rec.arm), str(rec.workload), points.phase_of(rec), int(rec.repeat))
            groups.setdefault(key, []).append(rec)
    rows = [_launch_row(key, recs, slo) for key, recs in sorted(groups.items())]
    return pd.DataFrame(rows, columns=LAUNCH_COLUMNS)


def _launch_row(key: tuple[str, str, str, int], recs: list[Record], slo: SLOSpec | None) -> dict[str, Any]:
    good = [r for r in recs if meets(r, slo)]
    duration = max(_end_s(r) for r in recs) - min(float(r.wall_start or 0.0) for r in recs)
    tokens = float(np.nansum([metrics.output_tokens(r) for r in good])) if good else 0.0
    rate = (recs[0].arrival or {}).get("rate")
    per_s = 1.0 / duration if duration > 0 else math.nan
    done = sum(1 for r in recs if r.error is None)
    return {
        "arm": key[0], "workload": key[1], "phase": key[2], "repeat": key[3],
        "rate": float(rate) if rate is not None else math.nan, "requests": len(recs), "good": len(good),
        "tokens_good": tokens, "duration_s": duration, "achieved_rate": done * per_s,
        "goodput_req_s": len(good) * per_s, "goodput_tok_s": tokens * per_s,
        "attainment": len(good) / len(recs),
    }  # fmt: skip


def _mean_interval(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """(mean, low, high): Student t on the launch values (R − 1 dof), the low end clipped at 0
    (goodput is never negative; few noisy launches give a t interval reaching below it); NaN
    bounds with one launch."""
    mean = float(values.mean())
    if values.size < 2:
        return mean, math.nan, math.nan
    half = (
        float(sps.t.ppf(0.5 + confidence / 2, values.size - 1))
        * float(values.std(ddof=1))
        / math.sqrt(values.size)
    )
    return mean, max(0.0, mean - half), mean + half


def goodput_ratio(
    arm: pd.DataFrame, base: pd.DataFrame, column: str, confidence: float
) -> tuple[float, float, float, str]:
    """(ratio, low, high, verdict) of the arm's goodput to the baseline's, paired by launch pair
    (:func:`launches.fit` on one log-ratio per pair). Undetermined with fewer than two launch
    pairs, or when either side had no good request in a launch (a log-ratio of zero is none)."""
    joined = (
        arm.set_index("repeat")[column]
        .to_frame("a")
        .join(base.set_index("repeat")[column].rename("b"), how="inner")
    )
    if len(joined) < 2 or not bool(((joined["a"] > 0) & (joined["b"] > 0)).all()):
        ratio = (
            float(joined["a"].mean() / joined["b"].mean())
            if len(joined) and joined["b"].mean() > 0
            else math.nan
        )
        return ratio, math.nan, math.nan, "undetermined"
    d = np.log(joined["a"].to_numpy(np.float64) / joined["b"].to_numpy(np.float64))
    pairs = pd.DataFrame({"launch": joined.index.to_numpy(), "prompt": "goodput", "d": d})
    f = launches.fit(pairs, confidence)
    if f.n_launches < launches.MIN_LAUNCHES:
        return math.exp(f.mu), math.exp(f.lo), math.exp(f.hi), "undetermined"
    return math.exp(f.mu), math.exp(f.lo), math.exp(f.hi), stats.verdict(math.exp(f.lo), math.exp(f.hi))


def arm_goodput(per_launch: pd.DataFrame, baseline: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per (workload, phase, arm): mean goodput (req/s and tok/s) over launches with its t
    interval, SLO attainment pooled over the launches, and the goodput ratio to the baseline."""
    rows = []
    # Lowest rate first (phase names sort "r16" before "r4"), baseline first within a phase.
    order = per_launch.assign(first=per_launch["arm"] != baseline).sort_values(
        ["workload", "rate", "phase", "first"], kind="stable", na_position="last"
    )
    for (workload, phase), sub in order.groupby(["workload", "phase"], sort=False):
        base = sub[sub["arm"] == baseline]
        for arm, own in sub.groupby("arm", sort=False):
            mean, lo, hi = _mean_interval(own["goodput_req_s"].to_numpy(np.float64), confidence)
            tok, tok_lo, tok_hi = _mean_interval(own["goodput_tok_s"].to_numpy(np.float64), confidence)
            ratio, r_lo, r_hi, verdict = (
                (1.0, math.nan, math.nan, "baseline") if arm == baseline or base.empty
                else goodput_ratio(own, base, "goodput_req_s", confidence)
            )  # fmt: skip
            rows.append({
                "workload": workload, "phase": phase, "arm": arm, "rate": float(own["rate"].iloc[0]),
                "launches": len(own), "achieved_rate": float(own["achieved_rate"].mean()),
                "goodput_req_s": mean, "goodput_lo": lo, "goodput_hi": hi,
                "goodput_tok_s": tok, "goodput_tok_lo": tok_lo, "goodput_tok_hi": tok_hi,
                "attainment": float(own["good"].sum() / own["requests"].sum()),
                "ratio": ratio, "ratio_lo": r_lo, "ratio_hi": r_hi, "verdict": verdict,
            })  # fmt: skip
    return pd.DataFrame(rows)


# -- the rate sweep -----------------------------------------------------------------------------
def _e2e_comparison(df: pd.DataFrame, arm: str, baseline: str, confidence: float) -> stats.Comparison | None:
    try:
        return stats.speedup(df, arm, baseline, "e2e_ms", confidence=confidence)
    except ValueError:  # fewer than two completed requests on a side
        return None


def rate_table(run: RunData, per_arm: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`arm_goodput` for the workloads that swept two or more request rates, with
    each arm's median e2e at that rate and its paired e2e speedup vs the baseline (the ratio
    baseline / arm: above 1 the arm answers sooner) and verdict."""
    if per_arm.empty:
        return per_arm
    swept = per_arm[per_arm["rate"].notna()]
    swept = swept[swept.groupby("workload")["rate"].transform("nunique") >= 2]
    if swept.empty:
        return swept
    df = run.df  # each request's phase is a column of it (analysis/points.py)
    rows = []
    for row in swept.to_dict("records"):
        sub = df[(df["workload"] == row["workload"]) & (df["phase"] == row["phase"])]
        cmp = (
            None
            if row["arm"] == run.baseline
            else _e2e_comparison(sub, row["arm"], run.baseline, run.confidence)
        )
        rows.append({
            **row, "e2e_ms": float(sub.loc[sub["arm"] == row["arm"], "e2e_ms"].median()),
            "e2e_speedup": cmp.ratio if cmp else math.nan, "e2e_lo": cmp.ci_low if cmp else math.nan,
            "e2e_hi": cmp.ci_high if cmp else math.nan,
            "e2e_verdict": _verdict_words(row["arm"], run.baseline, cmp),
        })  # fmt: skip
    return pd.DataFrame(rows).sort_values(["workload", "rate"], kind="stable").reset_index(drop=True)


def _verdict_words(arm: str, baseline: str, cmp: stats.Comparison | None) -> str:
    if arm == baseline:
        return "baseline"
    return stats.verdict_text(cmp) if cmp is not None else ""


def highest_passing_rate(rates: list[float], attainment: list[float], target: float) -> float | None:
    """The highest swept rate at which the share of requests meeting the SLOs reached ``target``
    (None: no rate did)."""
    passing = [r for r, a in zip(rates, attainment, strict=True) if a >= target]
    return max(passing) if passing else None


def load_crossover(rates: list[float], verdicts: list[str]) -> tuple[float | None, str]:
    """(the highest rate up to which speculation pays, in words) from the e2e verdicts at the
    swept rates, lowest first. It pays at a rate when the arm is shown faster there; the crossover
    is the first rate where it is not, after paying at every lower one."""
    pays = [v == "faster" for v in verdicts]
    if not rates:
        return None, "no rate swept"
    if all(pays):
        return rates[-1], f"pays at every rate swept (up to {rates[-1]:g} req/s)"
    k = pays.index(False)
    if k == 0:
        return (
            None,
            f"not shown to pay at any rate swept (from {rates[0]:g} req/s: {verdicts[0] or 'no verdict'})",
        )
    return rates[
        k - 1
    ], f"stops paying above {rates[k - 1]:g} req/s ({rates[k]:g} req/s: {verdicts[k] or 'no verdict'})"


def sweep_summary(table: pd.DataFrame, baseline: str, slo: SLOSpec | None) -> pd.DataFrame:
    """Per (workload, arm): the highest swept rate meeting the SLOs, and the load crossover."""
    rows = []
    for (workload, arm), sub in table.groupby(["workload", "arm"], sort=False):
        rates = [float(r) for r in sub["rate"]]
        best = highest_passing_rate(rates, list(sub["attainment"]), slo.attainment) if slo else None
        pays, words = (None, "") if arm == baseline else load_crossover(rates, list(sub["e2e_verdict"]))
        rows.append({"workload": workload, "arm": arm, "max_rate_meeting_slo": best, "pays_up_to": pays,
                     "speculation": words})  # fmt: skip
    return pd.DataFrame(
        rows, columns=["workload", "arm", "max_rate_meeting_slo", "pays_up_to", "speculation"]
    )


class Goodput(NamedTuple):
    """Goodput per arm and phase, the rate sweep's rows and its per-arm summary, and the SLOs."""

    per_arm: pd.DataFrame
    table: pd.DataFrame
    summary: pd.DataFrame
    slo: SLOSpec | None


def goodput_tables(run: RunData) -> Goodput:
    """Goodput of a run; ``per_arm`` is empty when the matrix set no SLOs and no phase was open
    loop, ``table`` and ``summary`` when it was no rate sweep."""
    slo = slo_of(run.manifest)
    per_launch = launch_goodput(run.records, slo)
    per_arm = arm_goodput(per_launch, run.baseline, run.confidence)
    if slo is None and not per_arm.empty:
        per_arm = per_arm[per_arm["rate"].notna()]
    table = rate_table(run, per_arm)
    summary = sweep_summary(table, run.baseline, slo) if not table.empty else pd.DataFrame()
    return Goodput(per_arm, table, summary, slo)
