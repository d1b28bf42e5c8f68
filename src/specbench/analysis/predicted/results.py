"""What the theory says of one run: the per-arm predictions and the calibration they share.

:mod:`specbench.analysis.predicted.arms` computes them; this module holds the results, how they
describe their calibration (baseline, η_bw, models, verify source) and their strict-JSON form,
so a report or a text renderer reads them without the calibration code.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from specbench.analysis.predicted.setup import RunSetup
from specbench.theory.cost import Efficiency
from specbench.theory.passcurve import PassCurve

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
    ci_level: float = math.nan  # the measured interval's confidence: the level its verdict used
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
            f", {eff.spec_pass_s * 1e3:.2f} ms host work per pass of a speculating server"
            " (measured for this engine; docs/theory.md)"
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
            f" ({steps} decode steps; docs/theory.md, measured verify curves): the run has no forward probe."
        )
    ks = [k for k in (2, 5, 9, 17) if k * s.concurrency <= s.curve.sizes[-1]]  # measured, not extrapolated
    shown = ", ".join(f"v({k})={s.curve.ratio(k * s.concurrency):.2f}" for k in ks)
    return f"Verify cost measured by the forward probe ({shown} decode steps)."


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value
