"""Holm across arms, and the arms with their categories as one family, keep a run's chance of ANY
false verdict at α (issue 27, multiplicity)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from specbench.analysis import launches as L
from specbench.analysis import stats as S
from specbench.analysis.multiplicity import arms_and_categories, holm, shares
from specbench.analysis.rundata import RunData, category_comparisons, comparisons

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


# -- categories share the run's family (α shared) ------------------------------------------------
CATS = 2


def _cat_pairs(rng: np.random.Generator) -> pd.DataFrame:
    """One A/A arm's paired log-ratios, launch × category × prompt: a launch factor all categories
    share (5 %), a category × launch factor (30 %: the categories' noise is mostly their own, so
    the arm's and the categories' false verdicts barely overlap) and request noise (2 %)."""
    d = (
        rng.normal(0, 0.05, (LAUNCHES, 1, 1))
        + rng.normal(0, 0.3, (LAUNCHES, CATS, 1))
        + rng.normal(0, 0.02, (LAUNCHES, CATS, 2))
    )
    launch, cat, prompt = np.meshgrid(range(LAUNCHES), range(CATS), range(2), indexing="ij")
    return pd.DataFrame(
        {
            "launch": launch.ravel(),
            "prompt": [f"c{c}p{p}" for c, p in zip(cat.ravel(), prompt.ravel(), strict=True)],
            "cat": [f"c{c}" for c in cat.ravel()],
            "d": d.ravel(),
        }
    )


def test_arms_and_categories_together_keep_any_false_verdict_near_alpha() -> None:
    """400 seeded A/A runs of one copy × two categories. The arm at α and its categories as a Holm
    family of their own at α (before) give some false faster/slower in up to 2α of runs; arms and
    categories as one family (each arm's α shared with its categories) in at most ~α."""
    rng = np.random.default_rng(11)
    arms = ["copy"]
    cats = {a: [(f"c{c}", a) for c in range(CATS)] for a in arms}
    any_two = any_one = 0
    runs = 400
    for _ in range(runs):
        pairs = {a: _cat_pairs(rng) for a in arms}
        fits: dict[object, L.LaunchFit] = {a: L.fit(pairs[a]) for a in arms}
        fits.update({(c, a): L.fit(pairs[a][pairs[a]["cat"] == c]) for a in arms for c, _ in cats[a]})

        def fit(key: object, conf: float, fits: dict[object, L.LaunchFit] = fits) -> S.Comparison:
            return _comparison(str(key), fits[key], conf)

        one = arms_and_categories(arms, cats, fit, 0.05)
        two = {**holm(arms, fit, 0.05), **holm([k for a in arms for k in cats[a]], fit, 0.05)}
        any_one += any(c.verdict in ("faster", "slower") for c in one.values())
        any_two += any(c.verdict in ("faster", "slower") for c in two.values())
        assert all(c.verdict == S.verdict(c.ci_low, c.ci_high) for c in one.values())
    print(f"any false verdict: {any_one / runs:.3f} one family, {any_two / runs:.3f} two")
    assert any_one / runs <= 0.06
    assert any_two / runs > 0.075  # the old design: the two families add up


def _run(df: pd.DataFrame) -> RunData:
    return RunData(
        manifest={"matrix": {"arms": {"base": [], "arm": []}, "baseline": "base"}},
        records=[],
        cells=[],
        df=df,
    )


def _category_frame(effects: dict[str, tuple[float, float]], seed: int = 3) -> pd.DataFrame:
    """base and arm, 4 launches, 3 prompts per category; ``effects``: category → (log effect,
    launch-to-launch sd of that category's effect)."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(LAUNCHES):
        for cat, (mu, sd) in effects.items():
            shift = rng.normal(mu, sd)
            for p in range(3):
                for arm, x in (("base", 0.0), ("arm", shift)):
                    rate = float(np.exp(3 + x + rng.normal(0, 0.005)))
                    rows.append(
                        {"arm": arm, "repeat": r, "prompt_id": f"{cat}{p}", "category": cat,
                         "workload": "w", "decode_tok_s": rate}
                    )  # fmt: skip
    return pd.DataFrame(rows)


def test_a_category_is_judged_while_its_arm_is_undetermined() -> None:
    """``copy`` is ×1.2 in every launch; ``chat`` is ×0.84 give or take 30 % from launch to launch,
    so the arm as a whole is undetermined. The category where the arm wins is still judged, at its
    share of the run's α (half the arm's α over two categories: 98.75 %), and reads "faster": a
    gatekept family (categories tested only once their arm is decided) would hide exactly this
    answer, and two families at α each (before) would let the run's error rate reach 2α."""
    run = _run(_category_frame({"copy": (0.18, 0.01), "chat": (-0.18, 0.3)}, seed=4))
    arm = comparisons(run)["arm"]
    assert arm.verdict == "undetermined" and arm.confidence == pytest.approx(0.975)
    copy = category_comparisons(run)["copy", "arm"]
    assert copy.verdict == "faster" and copy.confidence == pytest.approx(0.9875)
    assert copy.ci_low > 1
    assert copy.family == 3 and "one family of 1 arm and 2 category comparisons" in S.error_rate_text(copy)


def test_a_decided_arm_passes_its_alpha_to_its_categories() -> None:
    """Both categories ×1.2: the arm is decided at its half of α (97.5 %), its categories at their
    quarters (98.75 %) in the same step, all faster; every interval is the one its verdict was
    read at. A category left open after its arm is decided gets the arm's half too."""
    run = _run(_category_frame({"copy": (0.18, 0.01), "chat": (0.18, 0.01)}))
    arm = comparisons(run)["arm"]
    assert arm.verdict == "faster" and arm.confidence == pytest.approx(0.975)
    for c in category_comparisons(run).values():
        assert c.verdict == "faster" and c.confidence == pytest.approx(0.9875)


def test_shares_move_to_what_is_still_open() -> None:
    """The weights: half the arm's share to the arm, half to its categories; a decided arm's half
    goes to its open categories; an arm with every category decided takes its whole share."""

    cats = {"a": [("x", "a"), ("y", "a")]}
    every = {"a", ("x", "a"), ("y", "a")}
    assert shares(["a"], cats, every, ["a"]) == {"a": 0.5, ("x", "a"): 0.25, ("y", "a"): 0.25}
    assert shares(["a"], cats, every - {"a"}, ["a"]) == {("x", "a"): 0.5, ("y", "a"): 0.5}
    assert shares(["a"], cats, {"a"}, ["a"]) == {"a": 1.0}
    assert shares(["a"], cats, {("y", "a")}, ["a"]) == {("y", "a"): 1.0}


def test_a_low_n_arm_beside_a_decidable_one_is_read_and_its_categories_are_low_n(tmp_path: Path) -> None:
    """Arm B lost its third launch (interrupted or failed): B is LOW_N beside A. Its categories
    (one prompt per launch: two pairs each) were once read as a two-against-two ratio of medians,
    "faster", and, holding no share of α while A was open, crashed the family with a KeyError."""
    import json

    from specbench.analysis.rundata import load_run
    from tests.support import synth

    plan = synth.Plan(
        arms={"base": synth.Arm(decode_tok_s=30), "A": synth.spec(30.5), "B": synth.spec(45)},
        prompts_per_category=1, repeats=3,
    )  # fmt: skip
    root = synth.make_run(tmp_path / "run", plan)
    for name in ("records.jsonl", "cells.jsonl"):
        rows = [json.loads(x) for x in (root / name).read_text().splitlines()]
        keep = [r for r in rows if not (r.get("arm") == "B" and r.get("repeat") == 2)]
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in keep))
    run = load_run(root)
    b = comparisons(run)["B"]
    assert b.verdict == "undetermined" and b.low_n
    cats = [c for (_, arm), c in category_comparisons(run).items() if arm == "B"]
    assert cats and all(c.verdict == "undetermined" and c.low_n and c.paired for c in cats)
