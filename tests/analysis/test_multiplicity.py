"""Holm across arms keeps a run's chance of ANY false verdict at α (issue 27, multiplicity)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from specbench.analysis import launches as L
from specbench.analysis import stats as S
from specbench.analysis.multiplicity import holm

LAUNCHES, PROMPTS = 4, 6


def _log_rates(rng: np.random.Generator) -> np.ndarray:
    """One arm's log decode rates, launch × prompt: launch factors (8 %), request noise (2 %)."""
    return rng.normal(0, 0.08, (LAUNCHES, 1)) + rng.normal(0, 0.02, (LAUNCHES, PROMPTS))


def _pairs(d: np.ndarray) -> pd.DataFrame:
    launch, prompt = np.meshgrid(range(LAUNCHES), range(PROMPTS), indexing="ij")
    return pd.DataFrame(
        {"launch": launch.ravel(), "prompt": [f"p{i}" for i in prompt.ravel()], "d": d.ravel()}
    )


def _comparison(arm: str, f: L.LaunchFit, confidence: float) -> S.Comparison:
    """What :func:`specbench.analysis.stats.speedup` makes of the fit at ``confidence``."""
    half = float(sps.t.ppf(0.5 + confidence / 2, f.dof)) * f.se
    lo, hi = math.exp(f.mu - half), math.exp(f.mu + half)
    return S.Comparison(
        arm, "base", "decode_tok_s", math.exp(f.mu), lo, hi, confidence, True, f.n_pairs, f.n_pairs,
        f.n_pairs, S.verdict(lo, hi), 1.0, "test", True, f.n_launches,
    )  # fmt: skip


def test_holm_keeps_any_false_verdict_among_five_identical_arms_near_alpha() -> None:
    """400 seeded A/A runs of five copies sharing one baseline: a false faster/slower anywhere in
    the run in at most ~5 % of runs with Holm; each arm at 95 % on its own gives more."""
    rng = np.random.default_rng(7)
    arms = [f"copy{i}" for i in range(5)]
    any_holm = any_plain = 0
    runs = 400
    for _ in range(runs):
        base = _log_rates(rng)
        fits = {arm: L.fit(_pairs(_log_rates(rng) - base)) for arm in arms}
        out = holm(arms, lambda arm, conf, fits=fits: _comparison(arm, fits[arm], conf), 0.05)
        any_holm += any(c.verdict in ("faster", "slower") for c in out.values())
        any_plain += any(_comparison(a, fits[a], 0.95).verdict in ("faster", "slower") for a in arms)
        assert all(c.verdict == S.verdict(c.ci_low, c.ci_high) for c in out.values())
    assert any_holm / runs <= 0.06
    assert any_plain > any_holm
