"""Tests for specbench.analysis.stats on seeded synthetic data with known properties."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

from specbench.analysis import bimodality as B
from specbench.analysis import stats as S
from specbench.analysis.findings import stability as W

FloatArray = npt.NDArray[np.float64]


def frame(
    arms: dict[str, FloatArray],
    metric: str = "decode_tok_s",
    workload: str = "chat",
    categories: list[str] | None = None,
    launches: int = 1,
) -> pd.DataFrame:
    """One row per value; request i of every arm shares prompt_id p{i mod n/launches} in launch
    (repeat) i div n/launches; seq interleaves arms."""
    parts = []
    for j, (arm, values) in enumerate(arms.items()):
        n = len(values)
        cats = categories if categories is not None else ["general"] * n
        parts.append(
            pd.DataFrame(
                {
                    "arm": arm,
                    "workload": workload,
                    "category": cats,
                    "prompt_id": [f"p{i % (n // launches)}" for i in range(n)],
                    "repeat": [i // (n // launches) for i in range(n)],
                    "seq": np.arange(n) * len(arms) + j,
                    metric: values,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def paired_values(
    rng: np.random.Generator, n: int, effect: float, sigma: float = 0.1, prompt_sigma: float = 0.3
) -> tuple[FloatArray, FloatArray]:
    """Baseline and arm throughputs sharing a per-prompt factor; arm = effect × baseline in law."""
    prompt = 50.0 * rng.lognormal(0.0, prompt_sigma, n)
    base = prompt * rng.lognormal(0.0, sigma, n)
    arm = effect * prompt * rng.lognormal(0.0, sigma, n)
    return base, arm


# --------------------------------------------------------------------------- describe


def test_describe_known_array_ignores_nan() -> None:
    s = S.describe([*range(1, 11), math.nan])
    assert s.n == 10
    assert s.median == 5.5 and s.mean == 5.5
    assert s.min == 1 and s.max == 10
    assert s.std == pytest.approx(math.sqrt(82.5 / 9))
    assert s.p90 == pytest.approx(9.1) and s.p99 == pytest.approx(9.91)
    assert s.cv == pytest.approx(s.std / 5.5)


def test_describe_empty_is_nan() -> None:
    s = S.describe([math.nan])
    assert s.n == 0 and math.isnan(s.median) and math.isnan(s.cv)


def test_describe_frame_long_table() -> None:
    df = pd.concat(
        [
            frame({"base": np.arange(1.0, 11.0), "spec": np.arange(11.0, 21.0)}, workload="chat"),
            frame({"base": np.full(5, 7.0)}, workload="code"),
        ]
    )
    out = S.describe_frame(df, metrics=["decode_tok_s"])
    assert list(out[["arm", "workload"]].itertuples(index=False, name=None)) == [
        ("base", "chat"),
        ("base", "code"),
        ("spec", "chat"),
    ]
    spec = out[(out["arm"] == "spec")].iloc[0]
    assert spec["metric"] == "decode_tok_s" and spec["n"] == 10 and spec["median"] == 15.5
    assert out[out["workload"] == "code"].iloc[0]["std"] == 0.0
    assert set(S.describe_frame(df)["metric"]) == {"decode_tok_s"}  # defaults: only present columns
    with pytest.raises(ValueError, match="ttft_ms"):
        S.describe_frame(df, metrics=["ttft_ms"])


# --------------------------------------------------------------------------- speedup


def test_verdict_needs_ci_beyond_noise_band() -> None:
    assert S.verdict(1.005, 1.30) == "undetermined"
    assert S.verdict(1.02, 1.30) == "faster"
    assert S.verdict(0.70, 0.98) == "slower"
    assert S.verdict(0.70, 0.995) == "undetermined"
    assert S.verdict(0.992, 1.008) == "equivalent"
    assert S.verdict(math.nan, math.nan) == "undetermined"


def test_paired_speedup_detects_true_twenty_percent() -> None:
    base, arm = paired_values(np.random.default_rng(1), 40, effect=1.2)
    c = S.speedup(frame({"base": base, "spec": arm}, launches=4), "spec", "base")
    assert c.paired and c.n_pairs == 40 and c.n_launches == 4
    assert c.estimator.startswith(
        "order-balanced mean of launch-pair log-ratios; mixed model over 4 launches"
    )
    assert c.verdict == "faster"
    assert c.ci_low <= 1.2 <= c.ci_high
    assert c.ratio == pytest.approx(1.2, abs=0.05)
    assert c.p_value < 0.01


def test_speedup_is_reproducible_with_seed() -> None:
    base, arm = paired_values(np.random.default_rng(2), 20, effect=1.05)
    df = frame({"base": base, "spec": arm}, launches=4)
    assert S.speedup(df, "spec", "base", seed=7) == S.speedup(df, "spec", "base", seed=7)


@pytest.mark.parametrize("paired", [True, False])
def test_clearly_slower_arm_is_slower(paired: bool) -> None:
    base, arm = paired_values(np.random.default_rng(3), 30, effect=0.7)
    c = S.speedup(frame({"base": base, "spec": arm}, launches=3), "spec", "base", paired=paired)
    assert c.paired is paired
    assert c.verdict == "slower" and c.ci_high < 0.99
    assert c.ratio < 0.85


def test_latency_speedup_above_one_when_arm_is_faster() -> None:
    rng = np.random.default_rng(4)
    base_ms = 20.0 * rng.lognormal(0.0, 0.05, 30)
    arm_ms = 0.8 * 20.0 * rng.lognormal(0.0, 0.05, 30)  # 20 % less latency → 1.25× speedup
    df = frame({"base": base_ms, "spec": arm_ms}, metric="tpot_ms", launches=3)
    c = S.speedup(df, "spec", "base", metric="tpot_ms")
    assert not c.higher_is_better
    assert c.ratio == pytest.approx(1.25, rel=0.05) and c.verdict == "faster"
    assert c.ci_low > 1.0
    flipped = S.speedup(df, "spec", "base", metric="tpot_ms", higher_is_better=True)
    assert flipped.ratio == pytest.approx(1 / c.ratio) and flipped.verdict == "slower"


def test_falls_back_to_unpaired_with_fewer_than_three_pairs() -> None:
    rng = np.random.default_rng(5)
    df = frame({"base": 50 * rng.lognormal(0, 0.05, 20), "spec": 60 * rng.lognormal(0, 0.05, 20)})
    df.loc[df["arm"] == "spec", "prompt_id"] = [f"other{i}" for i in range(20)]
    df.loc[(df["arm"] == "spec") & (df["seq"] < 4), "prompt_id"] = ["p0", "p1"]  # only 2 shared keys
    c = S.speedup(df, "spec", "base")
    assert not c.paired and c.n_pairs == 0 and c.estimator == "ratio of medians"
    assert (c.n_a, c.n_b) == (20, 20)
    assert c.ratio == pytest.approx(1.2, rel=0.05) and c.verdict == "faster"


def test_speedup_rejects_unknown_direction_and_an_empty_arm_is_low_n() -> None:
    df = frame({"base": np.ones(5), "spec": np.ones(5)}, metric="accept_rate")
    with pytest.raises(ValueError, match="higher_is_better"):
        S.speedup(df, "spec", "base", metric="accept_rate")
    c = S.speedup(df, "missing", "base", metric="accept_rate", higher_is_better=True)
    assert c.too_few and c.low_n and c.verdict == "undetermined" and math.isnan(c.ci_low)
    assert S.verdict_text(c) == "undetermined (LOW_N: 5 base / 0 missing values)"


@pytest.mark.parametrize("paired", [True, False])
def test_aa_experiments_rarely_claim_a_difference(paired: bool) -> None:
    """200 seeded A/A experiments (identical lognormal laws, n = 12 per arm in 3 launches): a 95 %
    CI plus the ±1 % noise band must give a false "faster"/"slower" in at most ~5 % of them."""
    rng = np.random.default_rng(2024)
    wrong = 0
    for i in range(200):
        base, arm = paired_values(rng, 12, effect=1.0, sigma=0.3, prompt_sigma=0.2)
        df = frame({"base": base, "spec": arm}, launches=3)
        c = S.speedup(df, "spec", "base", paired=paired, n_resamples=500, seed=i)
        assert c.paired is paired
        wrong += c.verdict in ("faster", "slower")
    assert wrong / 200 <= 0.07


# --------------------------------------------------------------------------- bimodality


def test_two_mode_sample_is_bimodal_with_right_modes() -> None:
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.normal(60, 5, 60), rng.normal(135, 8, 40)])
    b = B.bimodality(rng.permutation(x))
    assert b.bimodal
    assert b.modes[0] == pytest.approx(60, abs=4) and b.modes[1] == pytest.approx(135, abs=4)
    assert b.coefficient > 5 / 9 and b.ashman_d > 3
    assert b.fractions == pytest.approx((0.6, 0.4))


@pytest.mark.parametrize(
    "make",
    [
        lambda r: r.normal(100, 10, 200),
        lambda r: r.lognormal(4.0, 0.5, 200),
        lambda r: r.lognormal(4.0, 1.0, 200),
    ],
    ids=["normal", "lognormal-0.5", "lognormal-1.0"],
)
def test_one_mode_samples_are_not_bimodal(make: Callable[[np.random.Generator], FloatArray]) -> None:
    x = make(np.random.default_rng(7))
    b = B.bimodality(x)
    assert not b.bimodal, b.method
    assert len(b.modes) == 1 and b.modes[0] == pytest.approx(float(np.median(x)))


def test_heavy_tail_passes_sarle_but_fails_kde_dip() -> None:
    """Sarle's b alone flags a lognormal(σ=1) sample; the KDE valley check is what rejects it."""
    b = B.bimodality(np.random.default_rng(7).lognormal(4.0, 1.0, 200))
    assert b.coefficient > 5 / 9 and b.ashman_d > 3
    assert b.dip_ratio > 0.9 and not b.bimodal


def test_tiny_sample_is_not_bimodal() -> None:
    assert not B.bimodality([1.0, 1.0, 100.0, 100.0, math.nan]).bimodal


CATS = ["chat", "qa", "summarize", "code", "math", "extract"]


def category_frame(rng: np.random.Generator, centres: list[float], per_cat: int = 30) -> pd.DataFrame:
    values = np.concatenate([rng.normal(c, 0.05 * c, per_cat) for c in centres])
    cats = [c for c in CATS[: len(centres)] for _ in range(per_cat)]
    return frame({"spec": values}, categories=cats)


def test_category_bimodality_finds_the_split() -> None:
    df = category_frame(np.random.default_rng(8), [60, 62, 58, 135, 130, 140])
    cb = B.category_bimodality(df, "spec")
    assert cb.bimodal, cb.method
    assert set(cb.low) == {"chat", "qa", "summarize"} and set(cb.high) == {"code", "math", "extract"}
    assert cb.modes[0] == pytest.approx(60, abs=3) and cb.modes[1] == pytest.approx(135, abs=6)
    assert cb.p_value < 0.05 and len(cb.category_medians) == 6


def test_category_bimodality_rejects_spread_and_too_few_categories() -> None:
    spread = B.category_bimodality(
        category_frame(np.random.default_rng(9), [60, 75, 90, 105, 120, 135]), "spec"
    )
    assert not spread.bimodal and spread.low == () and spread.high == ()
    few = B.category_bimodality(category_frame(np.random.default_rng(9), [60, 135]), "spec")
    assert not few.bimodal and "need ≥ 3" in few.method


# --------------------------------------------------------------------------- warnings


def warn_frame(rng: np.random.Generator, n: int = 40) -> pd.DataFrame:
    """Two arms × two workloads, CV ≈ 3 %, no drift."""
    return pd.concat(
        [
            frame(
                {"base": 50 * rng.lognormal(0, 0.03, n), "spec": 70 * rng.lognormal(0, 0.03, n)}, workload=w
            )
            for w in ("chat", "code")
        ],
        ignore_index=True,
    )


def test_clean_data_has_no_warnings() -> None:
    assert W.stability_warnings(warn_frame(np.random.default_rng(10)), baseline="base") == []


def test_low_n_fires_only_for_the_small_cell() -> None:
    df = warn_frame(np.random.default_rng(11))
    small = df[(df["arm"] == "spec") & (df["workload"] == "code")].index[5:]
    ws = W.stability_warnings(df.drop(index=small), baseline="base")
    assert [(w.code, w.arm, w.workload) for w in ws] == [("LOW_N", "spec", "code")]
    assert "only 5" in ws[0].message and "10" in ws[0].message


def test_unstable_fires_on_high_cv() -> None:
    df = warn_frame(np.random.default_rng(12))
    cell = (df["arm"] == "spec") & (df["workload"] == "chat")
    df.loc[cell, "decode_tok_s"] = 70 * np.random.default_rng(13).lognormal(0, 0.3, int(cell.sum()))
    ws = W.stability_warnings(df, baseline="base")
    assert [(w.code, w.arm, w.workload) for w in ws] == [("UNSTABLE", "spec", "chat")]
    assert "CV" in ws[0].message and "10%" in ws[0].message


def test_drift_fires_on_baseline_slowdown_only() -> None:
    df = warn_frame(np.random.default_rng(14))
    for arm in ("base", "spec"):
        cell = (df["arm"] == arm) & (df["workload"] == "chat")
        order = df.loc[cell, "seq"].rank().to_numpy() - 1
        df.loc[cell, "decode_tok_s"] *= 1 - 0.15 * order / order.max()  # −15 % across the run
    ws = W.stability_warnings(df, baseline="base")
    assert [(w.code, w.arm, w.workload) for w in ws] == [("DRIFT", "base", "chat")]
    assert "Mann-Whitney p=" in ws[0].message and "%" in ws[0].message
    every_arm = W.stability_warnings(df)
    assert {(w.code, w.arm) for w in every_arm} == {("DRIFT", "base"), ("DRIFT", "spec")}


def test_spread_across_prompts_is_not_instability_but_across_repeats_is() -> None:
    import pandas as pd

    from specbench.analysis.evidence.noise import repeat_cv
    from specbench.analysis.findings.stability import stability_warnings

    rows = [
        {
            "arm": "a",
            "workload": "w",
            "prompt_id": f"p{p}",
            "repeat": r,
            "seq": 10 * p + r,
            "decode_tok_s": 50.0 + 40 * p + 0.1 * r,
        }
        for p in range(4)
        for r in range(3)
    ]
    steady = pd.DataFrame(rows)
    assert repeat_cv(steady, "decode_tok_s")[0] < 0.01
    assert not [w for w in stability_warnings(steady, min_n=1) if w.code == "UNSTABLE"]
    shaky = steady.assign(decode_tok_s=[100.0 * (1 + 0.3 * (r % 2)) for p in range(4) for r in range(3)])
    (warning,) = [w for w in stability_warnings(shaky, min_n=1) if w.code == "UNSTABLE"]
    assert "median over 4 prompts" in warning.message


def test_three_wild_pairs_in_one_launch_are_undetermined_with_no_interval() -> None:
    import pandas as pd

    from specbench.analysis.stats import speedup

    rows = [
        {"arm": a, "workload": "w", "prompt_id": f"p{i}", "repeat": 0, "decode_tok_s": v}
        for i, (x, y) in enumerate([(10.0, 1.0), (10.0, 300.0), (10.0, 9.0)])
        for a, v in (("base", x), ("spec", y))
    ]
    cmp = speedup(pd.DataFrame(rows), "spec", "base")
    assert cmp.n_pairs == 3 and cmp.n_launches == 1 and cmp.verdict == "undetermined" and cmp.low_n
    assert math.isnan(cmp.ci_low) and math.isnan(cmp.ci_high) and cmp.launches_needed is None


def test_launch_level_noise_does_not_make_aa_runs_significant() -> None:
    """Requests in one server launch share its state: a per-launch factor (sd 8 %) shared by all
    prompts of a cell must not turn A/A runs into 'faster'/'slower' (the unit is the launch)."""
    import numpy as np
    import pandas as pd

    from specbench.analysis.stats import speedup

    rng = np.random.default_rng(7)
    false = 0
    for _ in range(200):
        rows = []
        for arm in ("a", "b"):
            for rep in range(4):
                launch = np.exp(rng.normal(0, 0.08))
                rows += [
                    {
                        "arm": arm,
                        "workload": "w",
                        "prompt_id": f"p{i}",
                        "repeat": rep,
                        "decode_tok_s": 50 * launch * np.exp(rng.normal(0, 0.02)),
                    }
                    for i in range(6)
                ]
        false += speedup(pd.DataFrame(rows), "b", "a").verdict in ("faster", "slower")
    assert false / 200 <= 0.07


def _undetermined(n_launches: int, needed: int | None) -> S.Comparison:
    more = None if needed is None else needed - n_launches
    return S.Comparison(
        "arm", "base", "decode_tok_s", 1.0, 0.96, 1.05, 0.95, True, 24, 24, 24, "undetermined",
        0.5, "geometric mean", True, n_launches, needed, more_launches=more,
        more_range=None if more is None else (more // 2, more * 3),
    )  # fmt: skip


def test_an_undetermined_verdict_always_says_how_far_it_is_from_settling() -> None:
    # the number printed is how many MORE launches, with its range (issue 28.3), never "~N launches"
    assert (
        S.verdict_text(_undetermined(3, 297)) == "undetermined (about 294 more launches, between 147 and 882)"
    )
    # an effect on the band's edge has no finite count: out of reach, said so (not a bare word)
    assert S.verdict_text(_undetermined(3, None)) == "undetermined (over 1,000 more launches)"
    # an open upper end reads as words, never "4–> 1000" (issue 44)
    assert S.launch_span(4, None) == ", between 4 and over 1,000"
    assert S.verdict_text(_undetermined(2, None)).startswith("undetermined (LOW_N")
