"""The interval of a prediction (theory/spread/interval.py): each term's swing at the ends of its band,
added in quadrature of log-moves on each side, and the term that dominates the width."""

from __future__ import annotations

import math

import pytest

from specbench.theory.spread.interval import Interval, Swing, Term, propagate, swings_of


def _term(key: str, low: float = 0.0, high: float = 1.0) -> Term:
    return Term(key, f"the {key}", low, 0.5, high, "ms", display=1e3, digits=1)


def test_moves_add_in_quadrature_on_each_side() -> None:
    a = Swing(_term("a"), 2.0 * math.exp(-0.3), 2.0 * math.exp(0.1))
    b = Swing(_term("b"), 2.0 * math.exp(0.4), 2.0 * math.exp(-0.4))  # its high end lowers the result
    i = propagate(2.0, [a, b])
    assert i.low == pytest.approx(2.0 * math.exp(-0.5))  # √(0.3² + 0.4²)
    assert i.high == pytest.approx(2.0 * math.exp(math.hypot(0.1, 0.4)))
    assert i.dominant is b and i.covers(2.0) and not i.covers(1.0)


def test_an_end_that_cannot_be_evaluated_moves_nothing() -> None:
    swings = swings_of([_term("a")], lambda term, end: None if end == "high" else 1.5)
    i = propagate(2.0, swings)
    assert i.high == pytest.approx(2.0) and i.low == pytest.approx(1.5)
    assert math.isnan(swings[0].at_high)


def test_no_terms_no_width_and_no_dominant() -> None:
    i = propagate(1.3, [])
    assert (i.low, i.high, i.dominant, i.dominant_text()) == (1.3, 1.3, None, None)
    assert propagate(1.3, [Swing(_term("flat"), 1.3, 1.3)]).dominant is None


def test_text_and_term_description() -> None:
    assert Interval(1.4, 1.1, 1.9).text() == "×1.40 [1.10–1.90]"
    assert Interval(341.5, 203.0, 459.0).text(1, "") == "341.5 [203.0–459.0]"
    t = Term("spec_pass_s", "host work per pass", 0.08e-3, 0.19e-3, 0.9e-3, "ms", display=1e3)
    assert t.describe() == "host work per pass: 0.08–0.90 ms"
    assert (t.at("low"), t.at(None), t.at("high")) == (0.08e-3, 0.19e-3, 0.9e-3)
