"""Where speculation stops paying across concurrency levels (theory/levels.py): the first level
whose whole interval lies at or below ×1.00, bracketed by the level before it."""

from __future__ import annotations

import math

import pytest

from specbench.errors import ConfigError
from specbench.theory.levels import Level, parse_levels, predict_levels, stops_paying
from specbench.theory.spread.interval import Interval


def _level(c: int, central: float, low: float, high: float) -> Level:
    return Level(c, Interval(central, low, high))


def test_it_stops_paying_at_the_first_level_whose_whole_interval_is_at_or_below_one() -> None:
    levels = [_level(64, 0.84, 0.74, 0.95), _level(1, 1.30, 1.10, 1.50), _level(8, 1.08, 0.97, 1.21)]
    assert stops_paying(levels) == (
        "speculation stops paying between 8 and 64 in flight"
        " (predicted ×1.08 [0.97–1.21] at 8, ×0.84 [0.74–0.95] at 64)"
    )


def test_a_centre_below_one_with_the_interval_above_only_may_stop() -> None:
    text = stops_paying([_level(1, 1.3, 1.1, 1.5), _level(8, 0.9, 0.7, 1.2)])
    assert text.startswith("speculation may stop paying between 1 and 8 in flight")


def test_a_sweep_that_never_paid_or_always_pays_says_so() -> None:
    assert stops_paying([_level(1, 0.8, 0.7, 0.9), _level(8, 0.6, 0.5, 0.7)]).startswith(
        "speculation does not pay even at 1 in flight"
    )
    assert stops_paying([_level(1, 1.8, 1.5, 2.0), _level(8, 1.4, 1.2, 1.6)]).startswith(
        "speculation pays at every level up to 8 in flight"
    )
    # a measured ratio without a CI is judged on its value
    assert "between 1 and 8" in stops_paying(
        [_level(1, 1.1, math.nan, math.nan), _level(8, 0.9, math.nan, math.nan)]
    )


def test_levels_are_parsed_sorted_and_checked() -> None:
    assert parse_levels("64, 1,8,8") == [1, 8, 64]
    for bad in ("0,8", "one", ""):
        with pytest.raises(ConfigError, match="--concurrency"):
            parse_levels(bad)


def test_a_measured_baseline_belongs_to_one_level() -> None:
    with pytest.raises(ConfigError, match="one --concurrency"):
        predict_levels([1, 8], "Qwen3.6-27B", "rtx3090", "Q4_K_M", "ngram", 3, alpha=0.7, baseline_tok_s=30.0)
