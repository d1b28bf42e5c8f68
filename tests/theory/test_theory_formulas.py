"""Unit tests for the closed-form pieces: expert union, saturation, Leviathan, acceptance."""

from __future__ import annotations

import itertools
import math

import pytest

from specbench.errors import ConfigError
from specbench.theory.formulas import (
    acceptance_from_alpha,
    alpha_from_acceptance,
    expected_accepted,
    experts_touched,
    leviathan_speedup,
    saturation_tokens,
    tokens_per_round,
)


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [(1, 8.0), (2, 15.75), (4, 30.5), (9, 63.6), (33, 166.2)],
)
def test_expert_union_matches_findings(tokens: int, expected: float) -> None:
    # field reports: E=256, k=8, t = 1, 2, 4, 9, 33 -> 8, 15.75, 30.5, 63.6, 166.2
    assert experts_touched(256, 8, tokens) == pytest.approx(expected, abs=0.06)


def test_expert_union_limits() -> None:
    assert experts_touched(256, 8, 0) == 0.0
    assert experts_touched(128, 4, 1) == pytest.approx(4.0)
    assert experts_touched(256, 8, 10_000) == pytest.approx(256.0)
    assert experts_touched(0, 0, 5) == 0.0
    values = [experts_touched(256, 8, t) for t in range(1, 200)]
    assert all(a < b for a, b in itertools.pairwise(values))


def test_saturation_threshold_is_about_94_tokens() -> None:
    t = saturation_tokens(256, 8, 0.95)
    assert 93.5 < t < 95.0
    assert experts_touched(256, 8, t) == pytest.approx(0.95 * 256)


def test_saturation_rejects_bad_inputs() -> None:
    with pytest.raises(ConfigError):
        saturation_tokens(256, 8, 1.0)
    with pytest.raises(ConfigError):
        saturation_tokens(8, 8, 0.9)


def test_tokens_per_round() -> None:
    assert tokens_per_round(0.0, 5) == 1.0
    assert tokens_per_round(1.0, 5) == 6.0
    assert tokens_per_round(0.5, 3) == pytest.approx(1.875)
    # equals 1 + Σ_{i=1..γ} α^i
    assert tokens_per_round(0.8, 7) == pytest.approx(1 + expected_accepted(0.8, 7))
    with pytest.raises(ConfigError):
        tokens_per_round(1.2, 3)


def test_acceptance_from_alpha_definition() -> None:
    assert acceptance_from_alpha(0.5, 2) == pytest.approx((0.5 + 0.25) / 2)
    assert acceptance_from_alpha(0.7, 1) == pytest.approx(0.7)
    assert acceptance_from_alpha(1.0, 8) == pytest.approx(1.0)
    assert acceptance_from_alpha(0.9, 16) < acceptance_from_alpha(0.9, 4)


@pytest.mark.parametrize("k", [1, 3, 8, 32])
@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.72, 0.95])
def test_acceptance_alpha_round_trip(alpha: float, k: int) -> None:
    acc = acceptance_from_alpha(alpha, k)
    assert alpha_from_acceptance(acc, k) == pytest.approx(alpha, abs=1e-9)


def test_alpha_from_acceptance_edges_and_errors() -> None:
    assert alpha_from_acceptance(0.0, 4) == 0.0
    assert alpha_from_acceptance(1.0, 4) == 1.0
    # the findings' drafter counters: 53.7 % of tokens at llama.cpp's default n-max 3
    assert alpha_from_acceptance(0.537, 3) == pytest.approx(0.72, abs=0.005)
    with pytest.raises(ConfigError, match="acceptance"):
        alpha_from_acceptance(1.5, 4)
    with pytest.raises(ConfigError, match="draft length"):
        alpha_from_acceptance(0.5, 0)


def test_leviathan_speedup() -> None:
    # free drafts and a verify as cheap as a step: speedup equals tokens per round
    assert leviathan_speedup(0.8, 4, 0.0, 1.0) == pytest.approx(tokens_per_round(0.8, 4))
    # a verify 3x a step with nothing accepted loses 3x
    assert leviathan_speedup(0.0, 4, 0.0, 3.0) == pytest.approx(1 / 3)
    assert math.isclose(leviathan_speedup(0.6, 2, 0.1, 1.2), tokens_per_round(0.6, 2) / 1.4)
