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

``measured`` is :func:`specbench.analysis.comparisons`' paired ratio with its CI, at the level its
verdict used (the family's).

Interval. Both the predicted and the replayed speedup carry the 80 % interval of the terms the
run does not measure (analysis/predicted/spread.py, theory/spread/interval.py), and the arm names the
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
from dataclasses import asdict, replace
from pathlib import Path

from specbench import analysis
from specbench.analysis import RunData, load_run
from specbench.analysis.predicted import replay as R
from specbench.analysis.predicted.models import ArmMethod, arm_method
from specbench.analysis.predicted.replay import predict_arm
from specbench.analysis.predicted.results import RARE_DRAFTING as RARE_DRAFTING
from specbench.analysis.predicted.results import ROUND_LENGTHS as ROUND_LENGTHS
from specbench.analysis.predicted.results import ArmPrediction as ArmPrediction
from specbench.analysis.predicted.results import LevelTheory as LevelTheory
from specbench.analysis.predicted.results import RunTheory as RunTheory
from specbench.analysis.predicted.results import SweepTheory as SweepTheory
from specbench.analysis.predicted.results import point_label as point_label
from specbench.analysis.predicted.setup import (
    RunSetup,
    calibrate_setup,
    level_runs,
    run_setup,
    sweeps_concurrency,
)
from specbench.analysis.predicted.spread import Refit, Scenario, run_unknowns, scenario
from specbench.analysis.stats import Comparison
from specbench.errors import ConfigError
from specbench.theory.cost import Efficiency
from specbench.theory.spread.interval import ENDS, End, Interval, Swing, propagate
from specbench.theory.spread.terms import Unknowns


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
    counts = R.arm_counts(setup, arm, spec)
    if counts.rounds > 0:
        needed = R.round_for_speedup(counts, R.Rounds(setup, spec, acceptance, eff), cmp.ratio)
        return replace(eff, round_s=max(0.0, eff.round_s + needed))
    p = predict_arm(setup, spec, acceptance, eff)  # no counts: fit the α-prediction
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
        ci_level=cmp.confidence if cmp else math.nan,
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
        p = predict_arm(setup, spec, acceptance, eff)
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
        arm.predicted_speedup, lambda sc: predict_arm(sc.setup, spec, acceptance, sc.efficiency).speedup
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


def _replayed(
    setup: RunSetup, spec: ArmMethod, acceptance: float, eff: Efficiency, arm: ArmPrediction
) -> ArmPrediction:
    """``arm`` with the cost model replayed on its measured draft counts (analysis/predicted/replay.py)."""
    r = R.replay(setup, arm.arm, spec, acceptance, eff)
    return arm if r is None else replace(arm, **asdict(r))


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
