"""Issue 31: the launch-level fit's cost is linear in the pairs, with the same numbers as before.

The reference below is the dense one-hot least squares the fit used up to 0.2.0 (kept here
verbatim): the new solver must give its residual sum of squares to 1e-9 relative and its
degrees of freedom exactly, on balanced, unbalanced, disconnected and many-prompt designs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from specbench.analysis import launches as L


def dense_residual_ss(pairs: pd.DataFrame) -> tuple[float, int]:
    """The 0.2.0 implementation: one column per launch and per prompt, lstsq and SVD rank."""
    launches = pd.get_dummies(pairs["launch"].astype(str), drop_first=False, dtype=float)
    prompts = pd.get_dummies(pairs["prompt"], drop_first=True, dtype=float)
    x = np.hstack([launches.to_numpy(), prompts.to_numpy()])
    y = pairs["d"].to_numpy(np.float64)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    rank = int(np.linalg.matrix_rank(x))
    return float(np.sum((y - x @ coef) ** 2)), int(y.size - rank)


def design(launches: int, prompts: int, seed: int, drop: float = 0.0) -> pd.DataFrame:
    """Pairs d = μ + prompt + launch + noise, a share ``drop`` of them missing."""
    rng = np.random.default_rng(seed)
    p_eff, l_eff = rng.normal(0, 0.1, prompts), rng.normal(0, 0.05, launches)
    rows = [
        {"launch": r, "prompt": f"w/p{i}", "d": 0.2 + p_eff[i] + l_eff[r] + rng.normal(0, 0.02)}
        for r in range(launches)
        for i in range(prompts)
        if rng.random() >= drop
    ]
    return pd.DataFrame(rows)


def disconnected() -> pd.DataFrame:
    """Launches 0–2 ran prompts a–c, launches 3–5 prompts d–f: two components, one rank less."""
    a, b = design(3, 3, 1), design(3, 3, 2)
    b = b.assign(launch=b["launch"] + 3, prompt=b["prompt"].str.replace("w/p", "w/q"))
    return pd.concat([a, b], ignore_index=True)


CASES: dict[str, Any] = {
    "balanced": lambda: design(5, 6, 0),
    "more prompts than launches": lambda: design(3, 40, 3),
    "more launches than prompts": lambda: design(60, 4, 4),
    "unbalanced": lambda: design(8, 12, 5, drop=0.3),
    "one prompt": lambda: design(6, 1, 6),
    "disconnected": disconnected,
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_residual_fit_matches_the_dense_least_squares(case: str) -> None:
    pairs = CASES[case]()
    rss, dof = L._residual_ss(pairs)
    want_rss, want_dof = dense_residual_ss(pairs)
    assert dof == want_dof
    assert rss == pytest.approx(want_rss, rel=1e-9, abs=1e-15)


def test_the_launch_fit_never_builds_a_column_per_launch_and_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """300 launches × 6 prompts: whatever is solved has at most as many columns as the smaller
    factor has levels (a dense design had 305; at 100k requests it did not fit in memory)."""
    widest: list[int] = []
    real = np.linalg.lstsq

    def watched(a: Any, b: Any, *args: Any, **kw: Any) -> Any:
        widest.append(int(np.shape(a)[1]))
        return real(a, b, *args, **kw)

    monkeypatch.setattr(np.linalg, "lstsq", watched)
    fit = L.fit(design(300, 6, 7))
    assert fit.n_launches == 300 and fit.n_pairs == 1800
    assert widest and max(widest) <= 6


def test_the_median_bootstrap_resamples_in_bounded_batches_to_the_same_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """30,000 requests × 2,000 resamples held at once were half a gigabyte; in batches the
    interval is the one the single batch gave."""
    from scipy import stats as sps

    from specbench.analysis import stats as S

    values = np.random.default_rng(3).lognormal(3.0, 0.2, 30_000)
    batches: list[Any] = []
    real = sps.bootstrap

    def watched(*args: Any, **kw: Any) -> Any:
        batches.append(kw.get("batch"))
        return real(*args, **kw)

    monkeypatch.setattr(S.sps, "bootstrap", watched)
    _, low, high = S.median_ci(values)
    assert batches and batches[0] is not None and batches[0] * values.size <= S.BOOT_BATCH_VALUES
    whole = real((values,), np.median, n_resamples=2000, confidence_level=0.95, method="percentile",
                 vectorized=True, rng=np.random.default_rng(0))  # fmt: skip
    assert (low, high) == (whole.confidence_interval.low, whole.confidence_interval.high)
