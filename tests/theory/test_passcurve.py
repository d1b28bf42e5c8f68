"""The measured pass curve (theory/passcurve.py) and the probe's median curve (probe.forward_curve)."""

from __future__ import annotations

import pytest

from specbench.analysis.predicted.setup import forward_curve
from specbench.errors import ConfigError
from specbench.theory.passcurve import PassCurve

# A staircase like the lab's 471 MB f16 model on 2 cores: flat to 4 tokens, a jump at 6.
CURVE = {1: 26.0, 2: 28.0, 4: 32.0, 5: 45.0, 6: 74.0, 9: 80.0, 17: 124.0}


def test_the_anchor_pass_takes_exactly_the_measured_step() -> None:
    curve = PassCurve.from_probe(CURVE, step_s=0.030)
    assert curve(1) == pytest.approx(0.030)
    assert curve.ratio(1) == 1.0


def test_a_pass_is_the_step_plus_the_measured_prefill_increase() -> None:
    curve = PassCurve.from_probe(CURVE, step_s=0.030)
    assert curve(9) == pytest.approx(0.030 + (80.0 - 26.0) / 1000)
    assert curve.ratio(5) == pytest.approx((0.030 + 0.019) / 0.030)  # not 5x: the staircase


def test_noise_below_the_anchor_never_makes_a_pass_cheaper_than_a_step() -> None:
    curve = PassCurve.from_probe({1: 30.0, 2: 29.0, 9: 80.0}, step_s=0.030)
    assert curve(2) == pytest.approx(0.030)


def test_between_sizes_is_linear_and_past_the_largest_proportional() -> None:
    curve = PassCurve.from_probe(CURVE, step_s=0.030)
    assert curve.prefill(3) == pytest.approx(30.0)
    assert curve.prefill(34) == pytest.approx(124.0 * 2)


def test_the_anchor_is_the_concurrency_level() -> None:
    curve = PassCurve.from_probe(CURVE, step_s=0.030, anchor=4)
    assert curve(4) == pytest.approx(0.030)
    assert curve(17) == pytest.approx(0.030 + (124.0 - 32.0) / 1000)


def test_an_anchor_between_sizes_is_interpolated() -> None:
    curve = PassCurve.from_probe(CURVE, step_s=0.030, anchor=3)
    assert curve(3) == pytest.approx(0.030) and curve(9) == pytest.approx(0.030 + 0.050)


def test_a_curve_with_nothing_at_or_below_its_anchor_is_refused() -> None:
    with pytest.raises(ConfigError, match="no pass of 1 tokens or fewer"):
        PassCurve.from_probe({2: 10.0, 4: 12.0}, step_s=0.03, anchor=1)
    with pytest.raises(ConfigError):
        PassCurve.from_probe({}, step_s=0.03)


def test_forward_curve_is_the_median_of_valid_samples_only() -> None:
    probes = [
        {
            "samples": [
                {"tokens": 2, "prompt_ms": 10.0, "prompt_n": 2},
                {"tokens": 2, "prompt_ms": 30.0, "prompt_n": 2},
                {"tokens": 2, "prompt_ms": 12.0, "prompt_n": 2},
                {"tokens": 2, "prompt_ms": 1.0, "prompt_n": 1},  # server prefilled another count
                {"tokens": 3, "error": "HTTP 500"},
            ]
        },
        {"samples": [{"tokens": 1, "prompt_ms": 5.0, "prompt_n": 1}]},
    ]
    assert forward_curve(probes) == {1: 5.0, 2: 12.0}
