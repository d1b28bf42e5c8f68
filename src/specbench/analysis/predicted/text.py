"""Text for a run's theory: the per-arm table (predicted, replayed, measured, error) as rows or
lines; for a run that sweeps concurrency one table with a level column, each level's calibration,
and per arm where speculation stops paying, predicted and measured (theory/levels.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from specbench.analysis.predicted.results import (
    RARE_DRAFTING,
    ArmPrediction,
    RunTheory,
    SweepTheory,
    point_label,
)
from specbench.analysis.stats import level_label
from specbench.theory.levels import Level, stops_paying
from specbench.theory.spread.interval import Interval


def _fmt(value: float, spec: str) -> str:
    return format(value, spec) if math.isfinite(value) else "—"


def measured_cell(p: ArmPrediction, with_level: bool = False) -> str:
    """``1.23x (1.10–1.35)``, the CI left out when there is none; ``with_level`` adds the level
    it is at (``1.23x (1.10–1.35, 98.3 %)``), where the table's rows are not all at one level."""
    if not math.isfinite(p.measured_speedup):
        return "—"
    level = f", {level_label(p.ci_level)}" if with_level and math.isfinite(p.ci_level) else ""
    ci = f" ({p.ci_low:.2f}–{p.ci_high:.2f}{level})" if math.isfinite(p.ci_low) else ""
    return f"{p.measured_speedup:.2f}x{ci}"


def measured_header(arms: Sequence[ArmPrediction]) -> tuple[str, bool]:
    """The measured column's name, with the level its intervals are at where all are at one (the
    family's: 95 % at the default alpha only where the family is one comparison, one arm without
    per-category verdicts; stricter for more), and whether each cell must name its own instead."""
    levels = {
        level_label(p.ci_level)
        for p in arms
        if not p.skipped and math.isfinite(p.ci_level) and math.isfinite(p.ci_low)
    }
    if len(levels) == 1:
        return f"measured ({levels.pop()} CI)", False
    return "measured (CI)", len(levels) > 1


def speedup_cell(central: float, low: float, high: float) -> str:
    """``1.20x [1.05–1.32]``: a speedup with its 80 % interval (left out when there is none)."""
    if not math.isfinite(central):
        return "—"
    band = f" [{low:.2f}–{high:.2f}]" if math.isfinite(low) and math.isfinite(high) else ""
    return f"{central:.2f}x{band}"


def _draft_cell(p: ArmPrediction) -> str:
    if not math.isfinite(p.mean_draft):
        return "—"
    return f"{p.mean_draft:.1f} ({p.drafting_share * 100:.0f} %)"


def _round_cell(p: ArmPrediction) -> str:
    measured = "not measurable" if p.round_note else _fmt(p.round_ms_measured, ".1f")
    return f"{measured} / {_fmt(p.round_ms_model, '.1f')}"


def k_cell(p: ArmPrediction) -> str:
    """The configured K. An n-gram arm's K only bounds a draft (it drafts what the context repeats,
    the drafted/round column), so it reads ``≤ 16``; a K no flag set says it is the engine's
    default: ``≤ 64 (default)``, not a draft length anyone chose."""
    if p.draft_max is None:
        return "—"
    bound = "≤ " if p.method == "ngram" else ""
    return f"{bound}{p.draft_max}" + (" (default)" if p.draft_max_default else "")


def error_cell(p: ArmPrediction) -> str:
    """``+12 %``; "not comparable" where the α-prediction's premise failed (the line under the table
    says why and points at replayed), "—" where a side is missing."""
    if math.isfinite(p.error) and not p.error_comparable:
        return "not comparable"
    text = _fmt(p.error * 100, "+.0f")
    return f"{text} %" + (" (fitted)" if p.fitted else "") if text != "—" else text


def _name(p: ArmPrediction) -> str:
    """The arm, and its level where the run sweeps: ``draft4 at 8 in flight``."""
    return f"{p.arm} at {point_label(p.point)}" if p.point else p.arm


def _verify_cell(p: ArmPrediction) -> str:
    """``320 tokens, beyond the probe`` (where the forward probe did not measure it)."""
    if p.verify_tokens is None:
        return "—"
    return f"{p.verify_tokens} tokens" + (", beyond the probe" if p.beyond_probe else "")


def prediction_rows(arms: Sequence[ArmPrediction]) -> list[dict[str, str]]:
    """The predicted arms as table rows of strings (skipped arms are left out); a level column
    where the run sweeps, and the verify's width where a level or an arm passed the probe."""
    levels = any(p.point for p in arms)
    widths = levels or any(p.beyond_probe for p in arms)
    measured = measured_header(arms)
    return [
        ({"level": point_label(p.point or "")} if levels else {})
        | _row(p, measured)
        | ({"verify pass": _verify_cell(p)} if widths else {})
        for p in arms
        if not p.skipped
    ]


def _row(p: ArmPrediction, measured: tuple[str, bool]) -> dict[str, str]:
    header, with_level = measured
    return {
        "arm": p.arm,
        "method": f"{p.method} ({p.label})" if p.label and p.label != p.method else str(p.method),
        "K": k_cell(p),
        "acceptance A": _fmt(p.acceptance, ".3f"),
        "α": _fmt(p.alpha, ".3f"),
        "predicted [80 %]": speedup_cell(p.predicted_speedup, p.predicted_low, p.predicted_high),
        "drafted/round (share)": _draft_cell(p),
        "replayed [80 %]": speedup_cell(p.replayed_speedup, p.replayed_low, p.replayed_high),
        "round ms measured / model": _round_cell(p),
        header: measured_cell(p, with_level),
        "error": error_cell(p),
    }


def skipped_lines(arms: Sequence[ArmPrediction]) -> list[str]:
    """The lines under the table: arms not predicted, and figures not measurable, with the reason."""
    skipped = [f"{_name(p)}: not predicted: {p.reason}" for p in arms if p.skipped]
    rounds = [f"{_name(p)}: round time not measurable: {p.round_note}" for p in arms if p.round_note]
    beyond = [f"{_name(p)}: {p.beyond_probe}" for p in arms if p.beyond_probe and not p.skipped]
    rare = [line for p in arms if (line := rare_drafting_line(p))]
    return skipped + rounds + beyond + rare + [line for p in arms if (line := widest_line(p))]


def widest_line(p: ArmPrediction) -> str | None:
    """What makes an arm's interval as wide as it is: the term that dominates its width."""
    if p.skipped or not p.widest:
        return None
    return f"{_name(p)}: the interval is widest in {p.widest}"


def rare_drafting_line(p: ArmPrediction) -> str | None:
    """Why "predicted" cannot be compared with "measured" for an arm that seldom drafted."""
    if p.skipped or not p.drafting_share < RARE_DRAFTING:
        return None
    return (
        f"{_name(p)}: predicted assumes a draft on every pass, but {p.drafting_share:.0%} of its passes "
        f"drafted; compare measured with replayed ({_fmt(p.replayed_speedup, '.2f')}x), which uses "
        "the drafting the arm actually did"
    )


def _table(rows: list[dict[str, str]]) -> list[str]:
    if not rows:
        return []
    cols = list(rows[0])
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    line = [" ".join(c.ljust(width[c]) for c in cols).rstrip()]
    return line + [" ".join(r[c].ljust(width[c]) for c in cols).rstrip() for r in rows]


def sweep_lines(theory: SweepTheory) -> list[str]:
    """Per arm of a sweep: where speculation stops paying, predicted and measured (theory/levels.py;
    measured by its CI where the analysis gave one, else by its value)."""
    at = {lv.point: lv.concurrency for lv in theory.levels}
    out = []
    for arm in dict.fromkeys(p.arm for p in theory.arms if not p.skipped):
        mine = [
            (c, p) for p in theory.arms if p.arm == arm and not p.skipped and (c := at.get(p.point or ""))
        ]
        if len(mine) < 2:
            continue
        predicted = [
            Level(c, Interval(p.predicted_speedup, p.predicted_low, p.predicted_high)) for c, p in mine
        ]
        measured = [Level(c, Interval(p.measured_speedup, p.ci_low, p.ci_high)) for c, p in mine]
        out.append(f"{arm}: {stops_paying(predicted)}; measured: {stops_paying(measured, 'measured')}")
    return out


def format_arm_predictions(theory: RunTheory) -> str:
    """The calibration line, the per-arm table (predicted, measured with CI, error) and skipped
    arms; for a sweep each level's calibration first and where each arm stops paying last."""
    if isinstance(theory, SweepTheory):
        head, tail = [theory.describe(), *theory.level_lines()], sweep_lines(theory)
    else:
        head, tail = [theory.describe()], []
    lines = [*head, *_table(prediction_rows(theory.arms)), *skipped_lines(theory.arms), *tail]
    if len(lines) == len(head):
        lines.append("no arm besides the baseline was measured")
    return "\n".join(lines)
