"""Crossover length (docs/mistakes.md, mistake 7): the output length where a variant starts to win on
wall clock, and which regime each arm is in.

Wall clock for L output tokens is T(L) = prefill + L / r. Inputs are medians over the run; a
difference whose paired CI (at the run's confidence: 95 % at the default alpha) does not clear the
±1 % noise band (verdict "equivalent" or "undetermined") is treated as none
(:func:`crossover_inputs`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from specbench.analysis import RunData, detail_frame, stats
from specbench.analysis.rundata import for_point, for_workload, workload_names


def _crossover_terms(
    prefill_base_ms: float, prefill_spec_ms: float, r_base: float, r_spec: float
) -> tuple[float, float] | None:
    """(prefill tax in s, seconds saved per output token), or None when a value is unusable."""
    values = (prefill_base_ms, prefill_spec_ms, r_base, r_spec)
    if not all(math.isfinite(v) for v in values) or r_base <= 0 or r_spec <= 0:
        return None
    return (prefill_spec_ms - prefill_base_ms) / 1000.0, 1.0 / r_base - 1.0 / r_spec


def crossover_length(
    prefill_base_ms: float, prefill_spec_ms: float, r_base: float, r_spec: float
) -> float | None:
    """Output length L* (tokens) where the variant's wall clock equals the baseline's.

    Wall clock for L output tokens is T(L) = prefill + L / r, so the variant wins when
    L · (1/r_base − 1/r_spec) > prefill_spec − prefill_base, and
    L* = (prefill_spec − prefill_base) / (1/r_base − 1/r_spec), times in s, rates in tok/s.
    Prefill times are given in ms (as measured) and converted. Cases:

    * slower prefill, faster decode: the variant wins above L* (a prefill tax repaid) → L*;
    * faster prefill, slower decode: the variant wins only *below* L* → L* as well
      (:func:`crossover_regime` says which side);
    * not slower at either (always wins) or not faster at either (never wins) → None;
    * a rate ≤ 0 or a NaN input: nothing can be said → None.
    """
    terms = _crossover_terms(prefill_base_ms, prefill_spec_ms, r_base, r_spec)
    if terms is None:
        return None
    tax, gain = terms
    if tax == 0 or gain == 0 or (tax > 0) != (gain > 0):
        return None
    return tax / gain


def crossover_regime(prefill_base_ms: float, prefill_spec_ms: float, r_base: float, r_spec: float) -> str:
    """One phrase for the case :func:`crossover_length` is in, for reports."""
    terms = _crossover_terms(prefill_base_ms, prefill_spec_ms, r_base, r_spec)
    if terms is None:
        return "unknown (missing prefill or decode data)"
    tax, gain = terms
    length = crossover_length(prefill_base_ms, prefill_spec_ms, r_base, r_spec)
    if length is not None and length < 1:  # a crossover below one token is prefill noise
        return "wins on wall clock at every output length" if gain > 0 else "never wins on wall clock"
    if length is not None:
        side = "longer" if gain > 0 else "shorter"
        return f"wins on wall clock for outputs {side} than {length:.0f} tokens"
    if tax <= 0 and gain >= 0 and (tax, gain) != (0, 0):
        return "wins on wall clock at every output length"
    if (tax, gain) == (0, 0):
        return "ties at every output length"
    return "never wins on wall clock"


def prefill_column(df: pd.DataFrame) -> str:
    """``prefill_ms`` (server-measured) when every arm has it, else ``ttft_ms`` (client-measured)."""
    counts = df.groupby("arm")["prefill_ms"].count()
    return "prefill_ms" if len(counts) and int(counts.min()) > 0 else "ttft_ms"


def arm_medians(df: pd.DataFrame, arm: str) -> tuple[float, float]:
    """(median prefill ms, median decode tok/s) of ``arm``: the inputs of the crossover formula."""
    sub = df[df["arm"] == arm]
    return float(sub[prefill_column(df)].median()), float(sub["decode_tok_s"].median())


def prefill_comparison(run: RunData, arm: str) -> stats.Comparison | None:
    """The arm's prefill time vs the baseline's, paired like the decode speedup (None: too few)."""
    return _comparison(run, arm, prefill_column(run.df))


def _comparison(run: RunData, arm: str, metric: str) -> stats.Comparison | None:
    try:
        return stats.speedup(run.df, arm, run.baseline, metric, confidence=run.confidence)
    except ValueError:
        return None


def _noise_verdict(run: RunData, arm: str, metric: str) -> str:
    """ "equivalent" or "undetermined" when the difference is not established, else ""."""
    cmp = _comparison(run, arm, metric)
    return cmp.verdict if cmp is not None and cmp.verdict in ("equivalent", "undetermined") else ""


@dataclass(frozen=True)
class CrossoverInputs:
    """The crossover formula's inputs for one arm, after noise gating, and which were gated."""

    prefill_base_ms: float
    prefill_arm_ms: float
    rate_base: float
    rate_arm: float
    prefill_gated: bool
    decode_gated: bool
    prefill_verdict: str = ""  # why prefill was gated: "equivalent" or "undetermined"
    decode_verdict: str = ""

    def terms(self) -> tuple[float, float, float, float]:
        return self.prefill_base_ms, self.prefill_arm_ms, self.rate_base, self.rate_arm


def crossover_inputs(run: RunData, arm: str) -> CrossoverInputs:
    """Medians of prefill and decode rate for the baseline and ``arm``.

    A difference whose paired CI (at the run's confidence) does not clear the noise band is no
    difference: the arm's prefill (or decode rate) is then taken as the baseline's, so no L* and
    no "never wins" is read from noise.
    """
    base_prefill, base_rate = arm_medians(run.df, run.baseline)
    prefill, rate = arm_medians(run.df, arm)
    prefill_verdict = _noise_verdict(run, arm, prefill_column(run.df))
    decode_verdict = _noise_verdict(run, arm, "decode_tok_s")
    prefill_gated, decode_gated = bool(prefill_verdict), bool(decode_verdict)
    return CrossoverInputs(
        base_prefill,
        base_prefill if prefill_gated else prefill,
        base_rate,
        base_rate if decode_gated else rate,
        prefill_gated,
        decode_gated,
        prefill_verdict,
        decode_verdict,
    )


def crossovers(run: RunData) -> dict[str, float | None]:
    """Each measured non-baseline arm's crossover length vs the baseline (see crossover_inputs)."""
    if run.baseline not in run.measured_arms:
        return {}
    return {
        arm: crossover_length(*crossover_inputs(run, arm).terms())
        for arm in run.measured_arms
        if arm != run.baseline
    }


def wall_clock_winners(run: RunData) -> pd.DataFrame:
    """Per requested output length (when several ran): median e2e ms of every arm and the winner.

    This is the measured answer the crossover formula predicts; empty without a length sweep."""
    df = detail_frame(run)
    if df["max_tokens"].nunique() < 2:
        return pd.DataFrame(columns=["max_tokens", "winner"])
    table = df.pivot_table(index="max_tokens", columns="arm", values="e2e_ms", aggfunc="median")
    table = table[[a for a in run.measured_arms if a in table.columns]]
    table["winner"] = table.idxmin(axis=1)
    return table.reset_index().rename_axis(columns=None)


# -- per workload: the report's crossover table and the measured winners ------------------------
def crossover_frame(run: RunData) -> pd.DataFrame:
    """Per workload and arm: the crossover formula's inputs, L* and the case it is in (numeric
    columns); each workload's from its own requests only. A sweep over anything but the output
    length is one row set per level (``workload`` names the point): its prefill and decode rates
    change with the load, and medians pooled over the levels describe none of them."""
    frames = [_crossover_rows(sub).assign(workload=name) for name, sub in _units(run)]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    return out[["workload", *out.columns.drop("workload")]]


def _units(run: RunData) -> list[tuple[str, RunData]]:
    """(name, restricted run) per crossover unit: a workload, or each level of a sweep that is not
    a length sweep (a length sweep's lengths are what L* spans)."""
    out = []
    for w in workload_names(run):
        mine = [p for p in run.points if p.workload == w]
        if len(mine) > 1 and any(p.level is None or p.level.kind != "length" for p in mine):
            out += [(p.name, for_point(run, p.name)) for p in mine]
        else:
            out.append((w, for_workload(run, w)))
    return out


def winners_frame(run: RunData) -> pd.DataFrame:
    """:func:`wall_clock_winners` per workload, with a workload column first."""
    frames = [wall_clock_winners(for_workload(run, w)).assign(workload=w) for w in workload_names(run)]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=["workload", "max_tokens", "winner"])
    out = pd.concat(frames, ignore_index=True)
    return out[["workload", *out.columns.drop("workload")]]


def _crossover_rows(run: RunData) -> pd.DataFrame:
    if run.baseline not in run.measured_arms:
        return pd.DataFrame()
    rows = []
    for arm in (a for a in run.measured_arms if a != run.baseline):
        x = crossover_inputs(run, arm)  # once: it runs two paired comparisons
        base_prefill, taxed, base_rate, gained = x.terms()
        length = crossover_length(*x.terms())
        prefill, rate = arm_medians(run.df, arm)
        rows.append({
            "arm": arm, "prefill_column": prefill_column(run.df),
            "prefill_baseline_ms": base_prefill, "prefill_arm_ms": prefill,
            "prefill_tax_s": (taxed - base_prefill) / 1000, "decode_baseline_tok_s": base_rate,
            "decode_arm_tok_s": rate, "crossover_tokens": length,
            "regime": crossover_regime(base_prefill, taxed, base_rate, gained)
            + _noise_note(x.prefill_verdict, x.decode_verdict),
        })  # fmt: skip
    return pd.DataFrame(rows)


def _noise_note(prefill: str, decode: str) -> str:
    """Which differences the crossover ignored, and why: their CI sits inside the noise band
    ("equivalent") or straddles its edge ("undetermined": more launches could still show one)."""
    words = {"equivalent": "equal within the noise band", "undetermined": "difference undetermined"}
    notes = [f"{name} {words[v]}" for name, v in (("prefill", prefill), ("decode", decode)) if v in words]
    return f" ({'; '.join(notes)})" if notes else ""
