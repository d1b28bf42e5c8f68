"""``repeats: auto``'s looks on SYNTHETIC launches (no engine): with several arms an arm stops only
on its Holm-adjusted verdict, the one the report prints (the engine test: test_adaptive_engine.py)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from specbench.analysis import sequential
from specbench.analysis import stats as S
from specbench.analysis.launches import POSITION
from specbench.analysis.rundata import RunData, comparisons
from specbench.executors.base import CellJob
from specbench.matrix.config import Cell
from specbench.run import adaptive
from specbench.run.order import round_orders

Rows = Callable[[str, int], list[dict[str, Any]]]  # the requests one launch (arm, repeat) measures


@dataclass
class FakeStore:
    data: dict[str, Any] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        return self.data

    def update_manifest(self, **fields: Any) -> None:
        self.data.update(fields)


@dataclass
class FakeJob:
    """The runner as the adaptive executor sees it; "serving" a cell appends its synthetic rows."""

    matrix: SimpleNamespace
    rows: Rows
    store: FakeStore = field(default_factory=FakeStore)
    measured: list[dict[str, Any]] = field(default_factory=list)
    ran: list[tuple[str, int]] = field(default_factory=list)

    def arm_failed(self, arm: str) -> bool:
        return False

    def observe(self, event: str, info: dict[str, Any]) -> None:
        pass

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.measured)


class FakeInner:
    kind = "fake"

    def run_cells(self, cells: Sequence[Cell], job: FakeJob) -> None:
        for c in cells:
            job.ran.append((c.arm, c.repeat))
            job.measured += job.rows(c.arm, c.repeat)


def run_adaptive(
    monkeypatch: pytest.MonkeyPatch, arms: list[str], max_repeats: int, rows: Rows, seed: int = 0
) -> FakeJob:
    """``repeats: auto`` over ``arms`` (the first the baseline) in runorder's rounds."""
    matrix = SimpleNamespace(
        arms={a: () for a in arms}, baseline=arms[0], repeats=max_repeats, alpha=0.05, max_minutes=None
    )
    job = FakeJob(matrix, rows)
    monkeypatch.setattr(adaptive, "observed", lambda runner: runner.frame())
    orders = round_orders(arms, max_repeats, seed)
    cells = [SimpleNamespace(arm=a, repeat=r) for r, order in enumerate(orders) for a in order]
    adaptive.AdaptiveExecutor(FakeInner()).run_cells(cast(list[Cell], cells), cast(CellJob, job))
    return job


def report_verdicts(job: FakeJob) -> dict[str, S.Comparison]:
    """What the report says on the same data (analysis.rundata.comparisons, Holm at α′)."""
    manifest = {
        "matrix": {"baseline": job.matrix.baseline, "arms": dict(job.matrix.arms)},
        "adaptive": job.store.data["adaptive"],
    }
    return comparisons(RunData(manifest=manifest, records=[], cells=[], df=job.frame()))


PROMPTS = [100.0, 80.0, 130.0, 60.0]
DELTA = 0.02


def marginal(alpha: float) -> Rows:
    """Each arm's launch-pair log-ratios μ + (δ, −δ, δ, −δ, …), identical across prompts: after
    three launches its t lies between the α′ and the α′/2 critical values (2 dof; se = δ/√2 with
    the two orders weighted equally)."""
    se = DELTA / math.sqrt(2)
    k = (sps.t.ppf(1 - alpha / 2, 2) + sps.t.ppf(1 - alpha / 4, 2)) / 2
    mu = math.log(1.01) + k * se

    def rows(arm: str, repeat: int) -> list[dict[str, Any]]:
        d = 0.0 if arm == "baseline" else mu + (DELTA if repeat % 2 == 0 else -DELTA)
        return [
            {
                "arm": arm,
                "workload": "w",
                "prompt_id": f"p{i}",
                "repeat": repeat,
                "decode_tok_s": v * math.exp(d),
            }
            for i, v in enumerate(PROMPTS)
        ]

    return rows


def test_two_arms_each_decided_alone_but_not_under_holm_keep_running(monkeypatch: pytest.MonkeyPatch) -> None:
    max_repeats = 4
    alpha = sequential.nominal_alpha(max_repeats)
    rows = marginal(alpha)
    three = pd.DataFrame([r for arm in ("baseline", "a") for rep in range(3) for r in rows(arm, rep)])
    # The premise: faster at 1 − α′ on its own, undetermined at Holm's first level 1 − α′/2.
    assert S.speedup(three, "a", "baseline", confidence=1 - alpha).verdict == "faster"
    assert S.speedup(three, "a", "baseline", confidence=1 - alpha / 2).verdict == "undetermined"

    job = run_adaptive(monkeypatch, ["baseline", "a", "b"], max_repeats, rows)
    assert {("a", 3), ("b", 3), ("baseline", 3)} <= set(job.ran)  # not stopped after three launches
    state = job.store.data["adaptive"]["arms"]
    assert state["a"]["launches"] == state["b"]["launches"] == 4
    report = report_verdicts(job)
    assert {arm: state[arm]["verdict"] for arm in "ab"} == {arm: report[arm].verdict for arm in "ab"}


def test_one_arm_is_its_own_family_and_stops_at_alpha_prime(monkeypatch: pytest.MonkeyPatch) -> None:
    max_repeats = 4
    job = run_adaptive(
        monkeypatch, ["baseline", "a"], max_repeats, marginal(sequential.nominal_alpha(max_repeats))
    )
    state = job.store.data["adaptive"]["arms"]["a"]
    assert state["launches"] == 3 and state["verdict"] == "faster" and ("a", 3) not in job.ran


def noisy(seed: int, effects: dict[str, float], arms: list[str], max_repeats: int) -> Rows:
    """Launches with their own factor (sd 2 %) and requests with their own noise (1 %), each
    launch's values fixed by (seed, arm, repeat) whichever arms still run; the launch position
    from runorder, as the report's frame carries it."""
    orders = round_orders(arms, max_repeats, seed)

    def rows(arm: str, repeat: int) -> list[dict[str, Any]]:
        rng = np.random.default_rng([seed, arms.index(arm), repeat])
        launch = effects.get(arm, 1.0) * math.exp(rng.normal(0, 0.02))
        return [
            {
                "arm": arm, "workload": "w", "prompt_id": f"p{i}", "repeat": repeat,
                "decode_tok_s": v * launch * math.exp(rng.normal(0, 0.01)),
                POSITION: float(orders[repeat].index(arm)),
            }
            for i, v in enumerate(PROMPTS)
        ]  # fmt: skip

    return rows


def test_every_verdict_the_loop_stopped_on_is_the_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four arms (×1.10, ×1.03, ×1.0, ×0.97), 8 seeded runs of up to 6 launch pairs: every arm's
    stopping verdict (decided early, or at the budget) is the report's verdict on the same data —
    arms stopped early included, whose comparison the report reads after the others ran on."""
    arms = ["baseline", "a", "b", "c", "d"]
    effects = {"a": 1.10, "b": 1.03, "c": 1.0, "d": 0.97}
    early = 0
    for seed in range(8):
        job = run_adaptive(monkeypatch, arms, 6, noisy(seed, effects, arms, 6), seed)
        state, report = job.store.data["adaptive"]["arms"], report_verdicts(job)
        for arm in arms[1:]:
            assert state[arm]["verdict"] == report[arm].verdict, (seed, arm, state[arm], report[arm])
            early += state[arm]["launches"] < 6 and state[arm]["verdict"] != "undetermined"
    assert early >= 2  # not vacuous: arms stopped early on a verdict
