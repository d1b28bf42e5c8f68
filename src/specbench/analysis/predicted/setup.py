"""What the theory needs from a run, and the bandwidth calibration on its baseline arm.

A run gives the models (lab truth.json, config.json or a preset), the device, the one concurrency
level C it measured, the median context while decoding, the baseline arm's median per-request
decode rate r_b and, when the run has one, the forward probe's pass curve. The baseline fixes the
bandwidth efficiency::

    C / t(target, C × 1; η_bw) = C · r_b                       (brentq, η_bw ∈ (0, 1])

:mod:`specbench.analysis.predicted.arms` then predicts each arm from this setup. A run that
sweeps concurrency is one setup per level, each on that level's requests alone
(:func:`level_runs`): a baseline at 64 in flight steps 8× slower than at 1 on the H200 lab pair,
and no single η_bw is true at both.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench import analysis
from specbench.analysis import RunData, load_run
from specbench.analysis.predicted.models import RunModels, device_from_run, model_from_run
from specbench.analysis.rundata import for_point
from specbench.engines import DEFAULT_ENGINE, theory_priors
from specbench.errors import ConfigError
from specbench.theory.calibrate import fit_bandwidth
from specbench.theory.ceiling import within_roofline
from specbench.theory.cost import Efficiency
from specbench.theory.hardware import Gpu
from specbench.theory.measured.curves import Floor, VerifyBand
from specbench.theory.measured.engines import EngineTerms, engine_band, engine_efficiency
from specbench.theory.passcurve import PassCurve
from specbench.theory.spread.interval import End

DEFAULT_CONTEXT = 512
MIN_CONTEXT_SPAN = 32  # positions the baseline requests must span to fit a context slope
# The probe's band: z of an 80 % two-sided range, and the standard error of a median from the
# MAD (1.4826 · MAD estimates σ; the median's standard error is √(π/2) · σ / √n).
Z80 = 1.2816
MEDIAN_SE = 1.2533 * 1.4826


@dataclass(frozen=True)
class RunSetup:
    """What calibration needs from a run: models, device, concurrency, context, baseline rate."""

    run: RunData
    models: RunModels
    gpu: Gpu
    concurrency: int
    context: int
    baseline_tok_s: float  # median per-request (per-sequence) decode tok/s of the baseline arm
    engine: EngineTerms  # what the theory knows of the run's engine (specbench.engines declares it)
    curve: PassCurve | None = None  # the baseline's forward probe, when the run has one
    roofline_note: str | None = None  # the baseline broke the device's roofline (theory/ceiling.py)
    base_efficiency: Efficiency = field(default_factory=Efficiency)  # defaults, or what ceiling.py set
    run_dir: Path | None = None  # relative draft paths resolve against what the run recorded
    context_slope_s: float = 0.0  # the baseline step's seconds per context position (context_slope)
    curve_band: tuple[PassCurve, PassCurve] | None = None  # the probe's curve at its 80 % ends
    verify: VerifyBand | None = (
        None  # without a probe: the engine's measured curves (theory/measured/curves.py)
    )
    verify_end: End | None = None  # which end of ``verify`` the arms use (None: its central value)
    # An arm whose verify is wider than the probe measured: the probe, no longer ``curve``
    # (arms.arm_setup); the verify is then the roofline, floored by the probe's largest pass.
    beyond: PassCurve | None = None
    sweep: RunData | None = None  # the whole run, when ``run`` is one level of its sweep

    @property
    def verify_floor(self) -> Floor | None:
        """The verify's floor under the roofline, in decode steps: past the probe its largest pass
        held (at the band's high end: extrapolated in proportion, passcurve.py); without a probe
        the engine's measured curve (theory/measured/curves.py)."""
        if self.beyond is not None:
            return self.beyond.ratio if self.verify_end == "high" else self.beyond.held_ratio
        return self.verify.floor(self.verify_end) if self.verify is not None else None

    @property
    def replays(self) -> bool:
        """The engine re-runs the accepted prefix after restoring a hybrid checkpoint (methods.py)."""
        return self.engine.replays_prefix


def run_engine(run: RunData) -> EngineTerms:
    """What the theory knows of the run's engine (a run recorded before the engine field: the
    default engine's; one no engine declares terms for: known by its name alone)."""
    kind = str((run.manifest.get("matrix") or {}).get("engine", DEFAULT_ENGINE))
    return theory_priors().named(kind)


def single_level(run: RunData) -> int:
    """The run's one concurrency level (1 when the records say none); ConfigError on a sweep."""
    df = analysis.detail_frame(run)
    levels = sorted({int(c) for c in df.loc[df["arm"] == run.baseline, "concurrency"].dropna()})
    if len(levels) > 1:
        raise ConfigError(
            f"the run sweeps concurrency {levels}: a calibration is one level's (run_theory does each)"
        )
    return levels[0] if levels else 1


def sweeps_concurrency(run: RunData) -> bool:
    """Whether the baseline's requests ran at more than one concurrency level."""
    try:
        single_level(run)
    except ConfigError:
        return True
    return False


def level_runs(run: RunData) -> list[tuple[str, RunData]]:
    """Each operating point's name and ``run`` restricted to its requests (analysis/points.py):
    the unit a sweep is calibrated on, one level at a time."""
    return [(p.name, for_point(run, p.name)) for p in run.points]


def _context(df: pd.DataFrame) -> int:
    """Median tokens in context while decoding: prompt + half the output."""
    mid = (df["prompt_tokens"] + df["output_tokens"] / 2).median()
    return max(1, round(float(mid))) if math.isfinite(mid) else DEFAULT_CONTEXT


def _check_run(run: RunData) -> pd.DataFrame:
    if run.baseline not in run.measured_arms:
        raise ConfigError(f"baseline arm {run.baseline!r} has no measured requests")
    machines = analysis.detail_frame(run)["machine"].nunique()
    if machines > 1:
        raise ConfigError(f"a merged run from {machines} machines: calibrate each machine's run separately")
    return run.df[run.df["arm"] == run.baseline]


def run_setup(run_dir: Path, run: RunData | None = None) -> RunSetup:
    """Models, device and baseline of ``run_dir``; a ConfigError says why the theory cannot apply."""
    run = run if run is not None else load_run(run_dir)
    base = _check_run(run)
    models = model_from_run(run_dir)
    if models is None:
        model = (run.manifest.get("matrix") or {}).get("model", "?")
        raise ConfigError(f"no lab truth.json, config.json or preset describes the model {model}")
    rate = float(base["decode_tok_s"].median())
    if not rate > 0:
        raise ConfigError(f"baseline arm {run.baseline!r} has no decode rate")
    level, context = single_level(run), _context(base)
    gpu = device_from_run(run_dir)
    engine = run_engine(run)
    ceiling = within_roofline(rate, models.target, gpu, level, context, engine_efficiency(engine, gpu))
    curve = pass_curve(run, level, rate)
    slope = context_slope(base) if curve is not None else 0.0
    target = models.target
    return RunSetup(
        run,
        models,
        ceiling.gpu,
        level,
        context,
        rate,
        engine,
        curve,
        ceiling.note,
        ceiling.efficiency,
        run_dir,
        slope,
        probe_band(run, level, rate) if curve is not None else None,
        None
        if curve
        else engine_band(engine, gpu, target.bytes_per_weight, target.arch.is_moe, theory_priors()),
    )


def context_slope(base: pd.DataFrame) -> float:
    """Seconds per context position of the baseline's decode step: the least-squares slope of
    each request's step (1 / decode rate) on its context (prompt + half the output). The forward
    probe runs at an empty context, so this is what tells the verify what the context costs
    (theory/predict.py ``verify_context_time``). 0 when the requests span too little context
    (under MIN_CONTEXT_SPAN positions, or fewer than 3 requests) to fit a slope, or it is negative."""
    rows = base[(base["decode_tok_s"] > 0) & base["prompt_tokens"].notna()]
    if len(rows) < 3:
        return 0.0
    ctx = (rows["prompt_tokens"] + rows["output_tokens"] / 2).to_numpy(dtype=float)
    if ctx.max() - ctx.min() < MIN_CONTEXT_SPAN:
        return 0.0
    step = 1.0 / rows["decode_tok_s"].to_numpy(dtype=float)
    slope = float(np.polyfit(ctx, step, 1)[0])
    return max(0.0, slope) if math.isfinite(slope) else 0.0


def pass_curve(run: RunData, concurrency: int, rate: float) -> PassCurve | None:
    """The baseline cells' forward probes as a pass curve anchored at the measured step, if any."""
    probes = [c.get("forward_probe") for c in run.cells if c.get("arm") == run.baseline]
    curve = forward_curve(p for p in probes if isinstance(p, dict))
    if not curve or min(curve) > concurrency:
        return None
    return PassCurve.from_probe(curve, 1.0 / rate, anchor=concurrency)


def probe_band(run: RunData, concurrency: int, rate: float) -> tuple[PassCurve, PassCurve] | None:
    """The probe's curve with each size above the anchor C moved down and up by the 80 % range
    of its median's increase over C's, ``±z·√(se(T)² + se(C)²)``: what the probe leaves unknown
    of the verify. The median's standard error comes from the MAD, so a launch whose prefills ran
    slow throughout (one in four on the 2026-12-04 H200 run, 9–14 ms against 4) does not widen it
    the way a standard deviation would."""
    probes = [c.get("forward_probe") for c in run.cells if c.get("arm") == run.baseline]
    samples = forward_samples(p for p in probes if isinstance(p, dict))
    if not samples or min(samples) > concurrency:
        return None
    medians = {t: statistics.median(v) for t, v in samples.items()}
    anchor = max(t for t in samples if t <= concurrency)
    se = {t: _median_se(v) for t, v in samples.items()}

    def moved(sign: float) -> PassCurve:
        curve = {
            t: m if t <= anchor else max(0.0, m + sign * Z80 * math.hypot(se[t], se[anchor]))
            for t, m in medians.items()
        }
        return PassCurve.from_probe(curve, 1.0 / rate, anchor=concurrency)

    return moved(-1.0), moved(1.0)


def _median_se(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = statistics.median(values)
    mad = statistics.median(abs(v - m) for v in values)
    return MEDIAN_SE * mad / math.sqrt(len(values))


def calibrate_setup(setup: RunSetup, efficiency: Efficiency | None = None) -> Efficiency:
    """η_bw such that the predicted baseline equals the measured one (see the module docstring)."""
    c = setup.concurrency
    return fit_bandwidth(
        c * setup.baseline_tok_s,
        setup.models.target,
        setup.gpu,
        setup.context,
        concurrency=c,
        efficiency=efficiency or setup.base_efficiency,
    )


def forward_curve(probes: Iterable[Mapping[str, Any]]) -> dict[int, float]:
    """Median prefill ms per token count over every probe's valid samples (:func:`forward_samples`)."""
    return {size: statistics.median(v) for size, v in forward_samples(probes).items()}


def forward_samples(probes: Iterable[Mapping[str, Any]]) -> dict[int, list[float]]:
    """Prefill ms per token count over every probe's valid samples, sizes in order.

    A sample counts only when the server says it prefilled exactly the tokens sent (``prompt_n``
    equal to ``tokens``); anything else would put a different pass on the curve.
    """
    by_size: dict[int, list[float]] = {}
    for probe in probes:
        for s in probe.get("samples", []):
            ms, n = s.get("prompt_ms"), s.get("prompt_n")
            if isinstance(ms, int | float) and ms > 0 and n == s.get("tokens"):
                by_size.setdefault(int(n), []).append(float(ms))
    return dict(sorted(by_size.items()))
