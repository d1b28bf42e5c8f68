"""Issue 31: the faster paths of loading and summarising a run give numpy's own numbers, bit for bit.

Each is compared with the per-request computation it replaces: the request frame's order
statistics taken over stacks of equal-length streams (rowbatch.py) against ``metrics.frame``;
the bootstrap's medians taken through ranks against ``np.median`` of the same resamples; the
stall check's median against ``np.median``, signed zeros included.
"""

from __future__ import annotations

import inspect
import random
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest
import scipy.stats as sps

from specbench.analysis import metrics, stats
from specbench.analysis._arrays import RankedMedian, median_1d
from specbench.analysis.packed import pack
from specbench.analysis.rowbatch import RowBatch
from specbench.engines import read_record


def _record(rng: random.Random, i: int) -> dict[str, Any]:
    """A request of random length and shape: counts or none, int or float stamps, reasoning,
    one-chunk and empty streams, an error, an imported row with its own figures."""
    n = rng.choice([0, 1, 2, 3, 7, 8, 64, 64, 64, 65, 255, 256])
    t, rows, sent = 30_000_000, [], 0
    for k in range(n):
        t += rng.choice([5, 20_000, 20_000_000, 33_000_000, 400_000_000])
        step = rng.choice([1, 1, 2, 3])
        sent += step
        content = rng.choice(["a", "bc", "", None]) if k else " w"
        rows.append(
            [t if i % 4 else t + 0.5, content, "r" if i % 9 == 0 and k == 0 else None, None, None, sent]
        )
    if rows:
        rows[-1][4] = "length"
    if i % 3 == 0:
        rows = [r[:5] for r in rows]  # schema 1: no running counts
    rec: dict[str, Any] = {
        "arm": rng.choice(["baseline", "spec"]), "workload": "w", "category": "c", "prompt_id": f"p{i % 5}",
        "repeat": i % 3, "seq": i, "warmup": False, "chunks": rows, "t_end_ns": t + 100_000,
        "usage": {"completion_tokens": sent, "prompt_tokens": 20},
        "timings": {"predicted_n": sent, "predicted_ms": t / 1e6, "predicted_per_second": 40.0},
        "error": "boom" if i % 23 == 0 else None,
    }  # fmt: skip
    if i % 17 == 0:
        rec["imported"] = {"itl_ms": 1.25, "chunk_itl_ms": 2.5}
    return rec


@pytest.mark.parametrize("packed", [False, True])
def test_batched_order_statistics_are_the_per_request_ones(packed: bool) -> None:
    rng = random.Random(7)
    records = [_record(rng, i) for i in range(3000)]  # more than one batch of 2048
    want = metrics.frame(records)
    batch = RowBatch()
    for rec in records:
        batch.add(read_record(pack(dict(rec)) if packed else rec))
    got = metrics.frame_of(batch.rows())
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert want["itl_ms"].notna().sum() > 1000 and want["itl_ms"].isna().any()
    assert (want["itl_ms"] == 1.25).any()  # an imported figure kept


def test_medians_through_ranks_are_np_medians_of_the_same_resamples() -> None:
    rng = np.random.default_rng(3)
    for n in (2, 3, 4, 5, 101, 1000, 1001):
        for x in (rng.lognormal(size=n), np.round(rng.normal(size=n), 1) + 5, rng.integers(1, 4, n) * 0.1):
            ranked = RankedMedian(x)
            draws = rng.integers(0, n, (50, n))
            want = np.median(x[draws], axis=-1)
            np.testing.assert_array_equal(ranked(ranked.ranks[draws]), want)
            assert ranked(ranked.ranks) == np.median(x)


def np_median_bootstrap(x: npt.NDArray[np.float64], seed: int) -> tuple[float, float]:
    """The interval as median_ci took it up to 0.2.0: scipy's bootstrap of ``np.median``."""
    if np.ptp(x) == 0:
        return float(np.median(x)), float(np.median(x))
    rng_kw = "rng" if "rng" in inspect.signature(sps.bootstrap).parameters else "random_state"
    res = sps.bootstrap(
        (x,), np.median, n_resamples=2000, confidence_level=0.95, method="percentile", vectorized=True,
        batch=max(1, stats.BOOT_BATCH_VALUES // x.size), **{rng_kw: np.random.default_rng(seed)},
    )  # fmt: skip
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@pytest.mark.parametrize("n", [2, 5, 40, 3333, 3334])
def test_median_interval_is_the_np_median_bootstrap(n: int) -> None:
    rng = np.random.default_rng(n)
    for x in (rng.lognormal(size=n), np.round(rng.normal(size=n), 1), np.ones(n)):
        want = np_median_bootstrap(x, seed=0)
        got = stats.median_ci(x, seed=0)[1:]
        assert [repr(v) for v in got] == [repr(v) for v in want]


def test_median_1d_is_np_median_signed_zeros_included() -> None:
    rng = np.random.default_rng(1)
    for n in [*range(1, 40), 255, 256]:
        for _ in range(30):
            x = np.round(rng.normal(size=n), 1) * rng.choice([1.0, -1.0])
            assert repr(median_1d(x)) == repr(float(np.median(x)))
