"""The theory table's measured column names the level its intervals are at: the family's, which is
95 % only for one comparison at the default alpha."""

from __future__ import annotations

from specbench.analysis.predicted.results import ArmPrediction
from specbench.analysis.predicted.text import prediction_rows


def _arm(name: str, level: float) -> ArmPrediction:
    return ArmPrediction(name, measured_speedup=1.2, ci_low=1.1, ci_high=1.3, ci_level=level)


def test_one_level_is_named_in_the_header() -> None:
    rows = prediction_rows([_arm("a", 0.99), _arm("b", 0.99)])
    assert rows[0]["measured (99 % CI)"] == "1.20x (1.10–1.30)"


def test_rows_at_several_levels_name_theirs_in_each_cell() -> None:
    """Holm's procedure tests a family's comparisons at different levels."""
    rows = prediction_rows([_arm("a", 1 - 0.05 / 2), _arm("b", 0.95)])
    assert [r["measured (CI)"] for r in rows] == ["1.20x (1.10–1.30, 97.5 %)", "1.20x (1.10–1.30, 95 %)"]


def test_an_arm_without_a_comparison_has_no_interval() -> None:
    rows = prediction_rows([ArmPrediction("a")])
    assert rows[0]["measured (CI)"] == "—"


def test_a_level_without_an_interval_is_not_named() -> None:
    """An arm too short of values for an interval does not set the column's level."""
    rows = prediction_rows([_arm("a", 0.99), ArmPrediction("b", measured_speedup=1.1, ci_level=0.95)])
    assert [r["measured (99 % CI)"] for r in rows] == ["1.20x (1.10–1.30)", "1.10x"]
