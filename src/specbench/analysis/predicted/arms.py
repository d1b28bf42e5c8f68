"""Calibrate the theory on a run's baseline arm and put its prediction next to each measured arm.

Everything is a pure function of the run directory (plus the ``cpu`` probe for CPU runs).

Calibration. The baseline arm fixes the bandwidth efficiency η_bw (analysis/predicted/setup.py, which
reads what the theory needs from the run). Optionally the per-round overhead is fitted to one
arm's measured speedup S in closed form, on its speedup replayed on its measured draft counts
(analysis/predicted/counts.py, clamped at 0)::

    t_round = ((N − n) · t_step / S − (S' − R − P) · t_step) / R

Per arm. The measured acceptance A = Σ accepted / Σ drafted at the arm's configured K gives
α = A⁻¹(A, K) (:func:`alpha_from_acceptance`), and the model predicts the speedup::

    predicted = (C · τ(α, K) / t_round) / (C / t_step)       error = measured / predicted − 1

``measured`` is :func:`specbench.analysis.comparisons`' paired ratio with its 95 % CI.

Interval. Both the predicted and the replayed speedup carry the 80 % interval of the terms the
run does not measure (analysis/predicted/spread.py, theory/interval.py), and the arm names the
term that dominates its width.

Beyond the probe. The forward probe times passes of 1–65 tokens; at C requests in flight a
verify carries C·(K+1). An arm whose verify is wider than the probe measured is predicted from
the roofline, at least the probe's largest pass, and its interval reaches up to that pass
extrapolated in proportion to its tokens (:func:`arm_setup`); the arm says so (``beyond_probe``).

Levels. A run that sweeps concurrency is calibrated at each level on that level's requests
(:class:`SweepTheory`): its baseline fixes η_bw there, the probe is anchored at its C, and the
arms' acceptance, counts and measured speedups are the level's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from specbench import analysis
from specbench.analysis import RunData, load_run
from specbench.analysis.evidence import stalls
from specbench.analysis.predicted import counts as C
from specbench.analysis.predicted.models import ArmMethod, arm_method, draft_weights, run_path
from specbench.analysis.predicted.setup import (
    RunSetup,
    calibrate_setup,
    level_runs,
    run_setup,
    sweeps_concurrency,
)
from specbench.analysis.predicted.spread import Refit, Scenario, run_unknowns, scenario
from specbench.analysis.predicted.stored import read_stored
from specbench.analysis.stats import Comparison
from specbench.errors import ConfigError
from specbench.theory.cost import Efficiency
from specbench.theory.engines import method_efficiency
from specbench.theory.interval import ENDS, End, Interval, Swing, propagate
from specbench.theory.methods import replay_tokens
from specbench.theory.passcurve import PassCurve
from specbench.theory.speedup import Prediction, predict_architecture
from specbench.theory.terms import Unknowns

RARE_DRAFTING = 0.8  # below this share of passes drafted, the α-prediction's premise does not hold


@dataclass(frozen=True)
class ArmPrediction:
    """One arm: predicted vs measured decode speedup over the baseline, or why it was skipped.

    ``error = measured / predicted − 1`` (NaN when either is missing); ``fitted`` marks the arm
    the round overhead was fitted to (its error is 0 unless the fit was clamped at 0).
    """

    arm: str
    method: str | None = None
    label: str | None = None
    draft_max: int | None = None
    draft_max_default: bool = False  # no flag set K: draft_max is the engine's default
    acceptance: float = math.nan
    alpha: float = math.nan
    predicted_speedup: float = math.nan
    measured_speedup: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    predicted_tok_s: float = math.nan
    measured_tok_s: float = math.nan
    replayed_speedup: float = math.nan  # the cost model on the measured counts (analysis/predicted/counts.py)
    mean_draft: float = math.nan
    drafting_share: float = math.nan
    round_ms_measured: float = math.nan  # one drafting round, from the decode windows
    round_ms_model: float = math.nan  # the model's round at the measured mean draft length
    round_note: str | None = None  # why round_ms_measured is not measurable (analysis/predicted/counts.py)
    fitted: bool = False
    reason: str | None = None
    predicted_low: float = math.nan  # the 80 % interval of the unknown terms (spread.py)
    predicted_high: float = math.nan
    replayed_low: float = math.nan
    replayed_high: float = math.nan
    widest: str | None = None  # the term that dominates the interval's width, with its band
    verify_tokens: int | None = None  # C·(K+1), the tokens one verify pass carries
    point: str | None = None  # the operating point, at a level of a sweep (SweepTheory)
    beyond_probe: str | None = None  # how the verify was bracketed where the probe did not reach it

    @property
    def error(self) -> float:
        return self.measured_speedup / self.predicted_speedup - 1.0

    @property
    def skipped(self) -> bool:
        return self.reason is not None

    @property
    def error_comparable(self) -> bool:
        """Whether ``error`` compares two like things: both sides there, and the α-prediction's
        premise (a draft on every pass) held. An n-gram arm drafting on a few passes in a hundred
        set beside a prediction drafting K=64 on each read as an error of +632 % (issue 44); its
        comparison is with the replayed speedup."""
        return math.isfinite(self.error) and not self.drafting_share < RARE_DRAFTING

    def to_dict(self) -> dict[str, Any]:
        """Plain values, ``error`` and ``error_comparable`` included; NaN becomes None (strict JSON)."""
        extra = {"error": self.error, "error_comparable": self.error_comparable}
        return {k: _finite(v) for k, v in {**asdict(self), **extra}.items()}


@dataclass(frozen=True)
class RunTheory:
    """The calibration and the per-arm predictions of one run."""

    setup: RunSetup
    efficiency: Efficiency
    arms: list[ArmPrediction]

    def describe(self) -> str:
        """What the theory was calibrated on, and how the replayed rounds are costed."""
        return f"{self.calibration()} {ROUND_LENGTHS}"

    def calibration(self) -> str:
        """What the theory was calibrated on: baseline, η_bw, models, C, context, verify."""
        s, t, eff = self.setup, self.setup.models.target, self.efficiency
        draft = f"; draft {s.models.draft.arch.name} at {s.models.draft.quant}" if s.models.draft else ""
        device = f"{s.gpu.name} ({s.gpu.bandwidth_gbs:.1f} GB/s)"
        passes = (
            f", {eff.spec_pass_s * 1e3:.2f} ms host work per pass of a speculating server (theory/engines.py)"
            if eff.spec_pass_s
            else ""
        )
        return (
            f"Calibrated on {s.run.baseline} ({s.baseline_tok_s:.1f} tok/s per sequence, reproduced exactly):"
            f" η_bw {eff.bandwidth:.3f} of {device}, round overhead {eff.round_s * 1e3:.2f} ms{passes}."
            f" Target {t.arch.name} at {t.quant}{draft} (from {s.models.source});"
            f" C={s.concurrency}, context {s.context} tokens. {_verify_source(s)}"
            + (f" {s.roofline_note}" if s.roofline_note else "")
        )

    def to_dict(self) -> dict[str, Any]:
        """The calibration (device, efficiency, baseline, models) and every arm, as strict JSON values."""
        s = self.setup
        return {
            "calibration": self.describe(),
            "baseline_arm": s.run.baseline,
            "baseline_tok_s": s.baseline_tok_s,
            "device": asdict(s.gpu),
            "efficiency": asdict(self.efficiency),
            "target": s.models.target.arch.name,
            "draft": s.models.draft.arch.name if s.models.draft else None,
            "model_source": s.models.source,
            "concurrency": s.concurrency,
            "context": s.context,
            "verify_curve": _curve_dict(s.curve),
            "arms": [a.to_dict() for a in self.arms],
        }


@dataclass(frozen=True)
class LevelTheory:
    """One operating point of a sweep: its theory, or why it has none."""

    point: str
    theory: RunTheory | None
    reason: str | None = None

    @property
    def concurrency(self) -> int | None:
        return self.theory.setup.concurrency if self.theory is not None else None


@dataclass(frozen=True)
class SweepTheory(RunTheory):
    """A run that sweeps concurrency, calibrated level by level. ``setup`` and ``efficiency`` are
    the first calibrated level's (for callers that read one); ``arms`` are every level's, each
    naming its point; ``levels`` holds each level's own calibration."""

    levels: tuple[LevelTheory, ...] = ()

    def describe(self) -> str:
        shown = ", ".join(point_label(lv.point) for lv in self.levels)
        return (
            f"The run sweeps concurrency ({shown}): the theory is calibrated at each level on that"
            " level's requests alone (its baseline fixes η_bw there, the forward probe is anchored at its"
            " C, and each arm's acceptance, draft counts and measured speedup are the level's)."
            f" {ROUND_LENGTHS}"
        )

    def level_lines(self) -> list[str]:
        """Each level's calibration, or why it has none."""
        return [f"At {point_label(lv.point)}: {_level_text(lv)}" for lv in self.levels]

    def to_dict(self) -> dict[str, Any]:
        """Each level's calibration and arms (or why it has none), and every arm with its point."""
        levels = [
            {"point": lv.point, **(lv.theory.to_dict() if lv.theory else {"reason": lv.reason})}
            for lv in self.levels
        ]
        return {"calibration": self.describe(), "levels": levels, "arms": [a.to_dict() for a in self.arms]}


def _level_text(lv: LevelTheory) -> str:
    return lv.theory.calibration() if lv.theory is not None else f"not predicted: {lv.reason}"


def point_label(point: str) -> str:
    """``8 in flight`` for the point ``concurrency-sweep @ 8 in flight`` (analysis/points.py)."""
    return point.rsplit(" @ ", 1)[-1]


# The assumption behind counts.round_lengths, said wherever the replayed column is shown.
ROUND_LENGTHS = (
    "Replayed rounds are costed over their draft lengths, not at the mean; the server counts only"
    " rounds and drafted tokens, so each request's d drafted tokens are taken as ⌊d/K⌋ rounds at K"
    " and one of the remainder (when these add up to the counted rounds; else as many rounds at K"
    " as the arm's tokens allow, the rest at their mean)."
)


def _curve_dict(curve: PassCurve | None) -> dict[str, Any] | None:
    """Median prefill ms per size and the ratio v(T) to the anchor, or None without a probe."""
    if curve is None:
        return None
    return {
        "prefill_ms": dict(zip(curve.sizes, curve.prefill_ms, strict=True)),
        "ratio": {t: curve.ratio(t) for t in curve.sizes},
        "anchor": curve.anchor,
    }


def _verify_source(s: RunSetup) -> str:
    if s.curve is not None and s.curve.largest < 2 * s.concurrency:
        return (
            f"The forward probe measured passes up to {s.curve.largest} tokens; every verify at"
            f" {s.concurrency} in flight carries more, so none is measured (each arm says how it is"
            " bracketed)."
        )
    if s.curve is None:
        floor = s.verify.floor(None) if s.verify else None
        if s.verify is None or floor is None:
            return "Verify cost from the roofline (the run has no forward probe)."
        steps = ", ".join(f"v({k})={floor(k * s.concurrency):.2f}" for k in (2, 5, 9, 17))
        return (
            f"Verify cost from the roofline, or where more, from the curves measured for {s.verify.label}"
            f" ({steps} decode steps; theory/curves.py): the run has no forward probe."
        )
    ks = [k for k in (2, 5, 9, 17) if k * s.concurrency <= s.curve.sizes[-1]]  # measured, not extrapolated
    shown = ", ".join(f"v({k})={s.curve.ratio(k * s.concurrency):.2f}" for k in ks)
    return f"Verify cost measured by the forward probe ({shown} decode steps)."


# -- calibration ------------------------------------------------------------------------------
def calibrate_from_run(run_dir: Path, fit_arm: str | None = None) -> Efficiency:
    """Efficiency fitted to ``run_dir``'s baseline arm (and the round overhead to ``fit_arm``);
    one level's, so a ConfigError on a sweep (:func:`run_theory` calibrates each level)."""
    setup = run_setup(run_dir)
    eff = calibrate_setup(setup)
    return fit_round_overhead(setup, eff, fit_arm) if fit_arm else eff


# -- per arm ------------------------------------------------------------------------------------
def _acceptance(run: RunData, arm: str) -> float:
    # Per-request counts, else the /metrics counter deltas (vLLM without per-request metrics).
    a, _ = analysis.arm_acceptance(run, arm)
    if not math.isfinite(a):
        raise ConfigError("no drafted tokens were measured, so there is no acceptance to predict from")
    return a


def _predict(setup: RunSetup, spec: ArmMethod, acceptance: float, eff: Efficiency) -> Prediction:
    path, stored = spec.draft_path, read_stored(setup.run_dir, spec.draft_path)
    if path and setup.run_dir is not None:
        path = run_path(setup.run_dir, path)
    draft = draft_weights(path, stored) if path else None
    return predict_architecture(
        setup.models.target,
        setup.gpu,
        spec.method,
        spec.draft_max,
        acceptance=acceptance,
        draft=draft,
        concurrency=setup.concurrency,
        context=setup.context,
        efficiency=_arm_efficiency(setup, spec, eff),
        target_pass=setup.curve,
        replay=setup.replays,
        step_context_slope_s=setup.context_slope_s,
        verify_floor=setup.verify_floor,
    )


def _arm_efficiency(setup: RunSetup, spec: ArmMethod, eff: Efficiency) -> Efficiency:
    """``eff`` with the engine's host costs for the arm's method (theory/engines.py)."""
    return method_efficiency(setup.engine, setup.gpu, eff, spec.method, setup.host_costs)


def arm_setup(setup: RunSetup, spec: ArmMethod) -> RunSetup:
    """``setup`` for ``spec``'s arm: the probe's curve where it measured a pass of the arm's
    C·(K+1) tokens; past it the roofline, floored by the probe's largest pass and with the band up
    to that pass in proportion (setup.verify_floor, spread.py), never the curve extrapolated
    silently."""
    tokens = setup.concurrency * (spec.draft_max + 1)
    if setup.curve is None or setup.curve.covers(tokens):
        return setup
    return replace(setup, curve=None, curve_band=None, verify=None, beyond=setup.curve)


def beyond_note(setup: RunSetup, spec: ArmMethod) -> str | None:
    """What the arm's verify was, where the probe did not reach it; None where it did."""
    probe = setup.beyond
    if probe is None:
        return None
    tokens = setup.concurrency * (spec.draft_max + 1)
    held, scaled = probe.held_ratio(tokens), probe.ratio(tokens)
    return (
        f"verifies {setup.concurrency} × {spec.draft_max + 1} = {tokens} tokens a pass, beyond the forward"
        f" probe's {probe.largest}: predicted from the roofline, at least the probe's {probe.largest}-token"
        f" pass ({held:.2f} decode steps), with the interval up to that pass in proportion to its tokens"
        f" ({scaled:.2f}); not measured"
    )


def _spec(setup: RunSetup, arm: str) -> ArmMethod:
    spec = arm_method(setup.run.arm_args(arm), setup.run.engine)
    if spec is None:
        raise ConfigError("the arm does not speculate")
    return spec


def fit_round_overhead(setup: RunSetup, eff: Efficiency, arm: str) -> Efficiency:
    """Per-round overhead making ``arm``'s replayed speedup (its measured draft counts) equal its
    measured one; the α-prediction, which drafts every pass, would load an n-gram arm drafting on
    a sixth of its passes with six rounds' cost per round. Clamped at 0: a negative host cost would
    only hide the miss in the other arms."""
    cmp = analysis.comparisons(setup.run).get(arm)
    if cmp is None or not cmp.ratio > 0:
        raise ConfigError(f"arm {arm!r} has no measured speedup to fit the round overhead to")
    spec, acceptance = _spec(setup, arm), _acceptance(setup.run, arm)
    setup = arm_setup(setup, spec)
    counts = _counts(setup, arm, spec)
    if counts.rounds > 0:
        step_s, round_s, p_replay = _round_over(setup, spec, acceptance, eff, counts)
        pass_s = _arm_efficiency(setup, spec, eff).spec_pass_s
        needed = C.round_for_speedup(counts, step_s, cmp.ratio, counts.rounds * p_replay, pass_s)
        return replace(eff, round_s=max(0.0, eff.round_s + needed - round_s))
    p = _predict(setup, spec, acceptance, eff)  # no counts: fit the α-prediction
    needed = setup.concurrency * p.breakdown.tokens_per_round / (cmp.ratio * p.baseline_tok_s)
    return replace(eff, round_s=max(0.0, needed - (p.breakdown.round_s - p.breakdown.overhead_s)))


Scenarios = Callable[[str, End, Unknowns], Scenario | None]
ArmScenarios = Callable[[ArmMethod], Scenarios]  # an arm's scenarios (its verify: probe or beyond)


def _arm(
    setup: RunSetup, arm: str, eff: Efficiency, cmp: Comparison | None, scenarios: ArmScenarios | None = None
) -> ArmPrediction:
    measured = ArmPrediction(
        arm,
        measured_speedup=cmp.ratio if cmp else math.nan,
        ci_low=cmp.ci_low if cmp else math.nan,
        ci_high=cmp.ci_high if cmp else math.nan,
        measured_tok_s=float(setup.run.df.loc[setup.run.df["arm"] == arm, "decode_tok_s"].median()),
    )
    try:
        spec = _spec(setup, arm)
        setup = arm_setup(setup, spec)
        measured = replace(
            measured,
            method=spec.method,
            label=spec.label,
            draft_max=spec.draft_max,
            draft_max_default=spec.k_default,
            verify_tokens=setup.concurrency * (spec.draft_max + 1),
            beyond_probe=beyond_note(setup, spec),
        )
        acceptance = _acceptance(setup.run, arm)
        p = _predict(setup, spec, acceptance, eff)
        replayed = _replayed(setup, spec, acceptance, eff, measured)
    except ConfigError as err:
        return replace(measured, reason=str(err))
    result = replace(
        replayed,
        acceptance=acceptance,
        alpha=p.breakdown.alpha,
        predicted_speedup=p.speedup,
        predicted_tok_s=p.spec_tok_s / setup.concurrency,
    )
    return _with_interval(result, setup, spec, acceptance, eff, scenarios(spec)) if scenarios else result


def _with_interval(
    arm: ArmPrediction,
    setup: RunSetup,
    spec: ArmMethod,
    acceptance: float,
    eff: Efficiency,
    scenarios: Scenarios,
) -> ArmPrediction:
    """``arm`` with the intervals of its predicted and replayed speedups (spread.py)."""
    unknowns = run_unknowns(setup, spec, eff)
    moved = {(t.key, end): scenarios(t.key, end, unknowns) for t in unknowns.terms for end in ENDS}

    def interval(central: float, value: Callable[[Scenario], float]) -> Interval:
        def at(key: str, end: End) -> float:
            sc = moved[key, end]
            return value(sc) if sc is not None else math.nan

        return propagate(central, [Swing(t, at(t.key, "low"), at(t.key, "high")) for t in unknowns.terms])

    predicted = interval(
        arm.predicted_speedup, lambda sc: _predict(sc.setup, spec, acceptance, sc.efficiency).speedup
    )
    replayed = interval(
        arm.replayed_speedup,
        lambda sc: _replayed(sc.setup, spec, acceptance, sc.efficiency, arm).replayed_speedup,
    )
    shown = replayed if math.isfinite(arm.replayed_speedup) else predicted
    return replace(
        arm,
        predicted_low=predicted.low,
        predicted_high=predicted.high,
        replayed_low=replayed.low,
        replayed_high=replayed.high,
        widest=shown.dominant_text(),
    )


def _round_over(
    setup: RunSetup, spec: ArmMethod, acceptance: float, eff: Efficiency, counts: C.DraftCounts
) -> tuple[float, float, float]:
    """(t_step, t_round, P(replay) per round) averaged over the rounds' draft lengths
    (:func:`counts.round_lengths`), not taken at their mean: the verify cost can step between
    two lengths, and the mean of a step is not the step at the mean."""
    parts = [
        (share, _round_at(setup, spec, acceptance, eff, length))
        for length, share in C.round_lengths(counts, spec.draft_max)
    ]
    step_s = parts[0][1][0]
    return (
        step_s,
        sum(share * r[1] for share, r in parts),
        sum(share * r[2] for share, r in parts),
    )


def _round_at(
    setup: RunSetup, spec: ArmMethod, acceptance: float, eff: Efficiency, mean_draft: float
) -> tuple[float, float, float]:
    """(t_step, t_round, P(replay) per round) at a fractional draft length, linear between the
    two whole K around it (the probe's curve is linear there too). P is 1 − α^K on a hybrid
    target that replays (methods.py), else 0."""
    low = max(1, math.floor(mean_draft))
    w = min(1.0, max(0.0, mean_draft - low))
    # α is re-derived from A (measured at the arm's K) at each whole K: it only shapes the
    # checkpoint and replay terms here, the counts fix everything else.
    bds = [_predict(setup, replace(spec, draft_max=k), acceptance, eff).breakdown for k in (low, low + 1)]
    replays = [
        replay_tokens(b.alpha, k)[0] if b.replay_s > 0 else 0.0
        for b, k in zip(bds, (low, low + 1), strict=True)
    ]
    round_s = (1 - w) * bds[0].round_s + w * bds[1].round_s
    return bds[0].target_step_s, round_s, (1 - w) * replays[0] + w * replays[1]


def _replayed(
    setup: RunSetup, spec: ArmMethod, acceptance: float, eff: Efficiency, arm: ArmPrediction
) -> ArmPrediction:
    """``arm`` with the cost model replayed on its measured draft counts (analysis/predicted/counts.py)."""
    counts = _counts(setup, arm.arm, spec)
    if not counts.rounds > 0:
        return arm
    step_s, round_s, p_replay = _round_over(setup, spec, acceptance, eff, counts)
    replays, pass_s = counts.rounds * p_replay, _arm_efficiency(setup, spec, eff).spec_pass_s
    measured_ms, note = _measured_round(_round_counts(setup, arm.arm, spec, counts), step_s, p_replay, pass_s)
    return replace(
        arm,
        replayed_speedup=C.replayed_speedup(counts, step_s, round_s, replays, pass_s),
        mean_draft=counts.mean_draft,
        drafting_share=counts.drafting_share,
        round_ms_measured=measured_ms,
        round_ms_model=round_s * 1e3,
        round_note=note,
    )


def _measured_round(
    counts: C.DraftCounts, step_s: float, p_replay: float, pass_s: float
) -> tuple[float, str | None]:
    """(round ms as measured, None) or (NaN, why it is not a measurement): the arithmetic must
    leave a positive remainder, and that remainder must be something a round can be."""
    replays = counts.rounds * p_replay
    note = C.round_not_measurable(counts, step_s, replays, pass_s)
    if note is not None:
        return math.nan, note
    round_s = C.measured_round_s(counts, step_s, replays, pass_s)
    note = C.round_not_a_measurement(counts, round_s)
    return (math.nan, note) if note is not None else (round_s * 1e3, None)


def _counts(setup: RunSetup, arm: str, spec: ArmMethod) -> C.DraftCounts:
    """The arm's draft counts; at one level of a sweep, its share of the launches' rounds."""
    over = setup.sweep.df if setup.sweep is not None else None
    return C.draft_counts(setup.run.df, setup.run.cells, arm, spec.draft_max, over)


def _round_counts(setup: RunSetup, arm: str, spec: ArmMethod, counts: C.DraftCounts) -> C.DraftCounts:
    """The counts the measured round is read from: the arm's requests less the stalled ones (a
    paused engine is not a round; its seconds would be spread over the rounds), with their share
    of the counted rounds (:func:`counts.level_rounds`, as for one level of a sweep)."""
    run = setup.run
    clean = stalls.without_stalls(run.df, run.records, {a for a in run.arms if run.speculates(a)})
    if len(clean[clean["arm"] == arm]) == len(run.df[run.df["arm"] == arm]):
        return counts
    over = setup.sweep.df if setup.sweep is not None else run.df
    return C.draft_counts(clean, run.cells, arm, spec.draft_max, over)


def theory_for_setup(setup: RunSetup, fit_arm: str | None = None) -> RunTheory:
    """Calibrate on ``setup`` and predict every measured non-baseline arm, each with its interval."""
    eff = calibrate_setup(setup)
    if fit_arm is not None:
        eff = fit_round_overhead(setup, eff, fit_arm)
    cmps = analysis.comparisons(setup.run)
    scenarios = _scenarios(setup, (lambda s, e: fit_round_overhead(s, e, fit_arm)) if fit_arm else None)
    arms = [
        replace(_arm(setup, arm, eff, cmps.get(arm), scenarios), fitted=arm == fit_arm)
        for arm in setup.run.measured_arms
        if arm != setup.run.baseline
    ]
    return RunTheory(setup, eff, arms)


def _scenarios(setup: RunSetup, refit: Refit | None) -> ArmScenarios:
    """Each (term, end)'s recalibrated scenario (spread.py), computed once for all the arms whose
    verify the probe measured and once for those past it (arm_setup)."""
    cache: dict[tuple[bool, str, End], Scenario | None] = {}

    def refit_at_level(moved: RunSetup, eff: Efficiency) -> Efficiency:
        # the --fit-arm arm keeps its own verify (arm_setup places it again), whichever arm's
        # scenario this is
        assert refit is not None
        return refit(_at_level(moved, setup), eff)

    def get(spec: ArmMethod) -> Scenarios:
        mine = arm_setup(setup, spec)
        beyond = mine.beyond is not None
        again = refit_at_level if refit is not None and beyond else refit

        def moved(key: str, end: End, unknowns: Unknowns) -> Scenario | None:
            if (beyond, key, end) not in cache:
                cache[beyond, key, end] = scenario(mine, unknowns, key, end, again)
            return cache[beyond, key, end]

        return moved

    return get


def _at_level(moved: RunSetup, level: RunSetup) -> RunSetup:
    """A scenario of an arm past the probe with the level's own verify back (for the --fit-arm
    refit, whose arm arm_setup places again)."""
    return replace(
        moved,
        curve=level.curve,
        curve_band=level.curve_band,
        verify=level.verify,
        verify_end=level.verify_end,
        beyond=None,
    )


def run_theory(run_dir: Path, fit_arm: str | None = None, run: RunData | None = None) -> RunTheory:
    """Calibration and per-arm predictions of ``run_dir`` (ConfigError when the theory cannot
    apply); a :class:`SweepTheory` when the run sweeps concurrency."""
    run = run if run is not None else load_run(run_dir)
    if sweeps_concurrency(run):
        return sweep_theory(run_dir, run, fit_arm)
    return theory_for_setup(run_setup(run_dir, run), fit_arm)


def sweep_theory(run_dir: Path, run: RunData, fit_arm: str | None = None) -> SweepTheory:
    """Each operating point calibrated on its own requests (ConfigError when none can be)."""
    levels = [_level(run_dir, run, point, sub, fit_arm) for point, sub in level_runs(run)]
    done = [lv.theory for lv in levels if lv.theory is not None]
    if not done:
        raise ConfigError("; ".join(f"{lv.point}: {lv.reason}" for lv in levels))
    arms = [replace(a, point=lv.point) for lv in levels if lv.theory for a in lv.theory.arms]
    return SweepTheory(done[0].setup, done[0].efficiency, arms, tuple(levels))


def _level(run_dir: Path, run: RunData, point: str, sub: RunData, fit_arm: str | None) -> LevelTheory:
    try:
        setup = replace(run_setup(run_dir, sub), sweep=run)
        return LevelTheory(point, theory_for_setup(setup, fit_arm))
    except ConfigError as err:
        return LevelTheory(point, None, str(err))


def predict_arms(run_dir: Path, fit_arm: str | None = None) -> list[ArmPrediction]:
    """Per arm: method, K, measured acceptance → α, predicted vs measured speedup and the error."""
    return run_theory(run_dir, fit_arm).arms


def theory_or_reason(run_dir: Path, run: RunData | None = None) -> RunTheory | str:
    """:func:`run_theory`, or the one-line reason it is unavailable; never raises (for reports)."""
    try:
        return run_theory(run_dir, run=run)
    except ConfigError as err:
        return str(err)
    except Exception as err:  # a report must render even when the theory has a bug
        return f"the theory failed on this run ({type(err).__name__}: {err})"


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value
