"""Tune's screening round (specbench.tune.screen): measure the largest K per draft model, predict
the other candidates from its acceptance and round cost, skip those the theory rules out before
they are launched, race the rest. Simulated launches with known true speedups; no engine."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.specprobe import describe, per_request_probe, verdict
from specbench.matrix.tuneblock import TuneSpec, candidate_name
from specbench.theory.formulas import leviathan_speedup
from specbench.tune.race import initial_state, race, tune_answer
from specbench.tune.screen import SCREEN_ROUNDS, Request, predict_all, screen_picks, screens
from specbench.tune.screenrun import (
    apply_screen,
    screen_lines,
    screen_requests,
    start_screening,
    theory_errors,
)
from tests.fakes.common import Request as FakeRequest
from tests.fakes.common import Response as FakeResponse
from tests.fakes.common import mock_client
from tests.support.tunemeasure import RowsMeasure

COST = 0.05  # the draft's share of the target's bytes
PROMPTS = 4


def _spec(**dims: list[Any]) -> TuneSpec:
    dims = dims or {"draft_model": ["d.gguf"], "draft_n_max": [1, 2, 4, 8], "draft_p_min": [0.0, 0.8]}
    return TuneSpec.model_validate({"dimensions": dims, "max_rounds": 6, "refine": False})


def _truth(spec: TuneSpec, alpha: float) -> dict[str, float]:
    return {"baseline": 1.0} | {
        candidate_name(c): leviathan_speedup(alpha, int(c["draft_n_max"]), COST, 1.0)
        * (1 - 0.05 * float(c.get("draft_p_min", 0)))
        for c in spec.grid()
    }


def _requests(
    alpha: float, k: int, ratio: float, rng: np.random.Generator, n: int = PROMPTS
) -> list[Request]:
    out = []
    for _ in range(n):
        a = np.minimum(rng.geometric(1 - alpha, 40) - 1, k) if alpha > 0 else np.zeros(40)
        out.append(Request(40.0 * k, float(a.sum()), ratio * math.exp(rng.normal(0, 0.01))))
    return out


class ScreenMeasure(RowsMeasure):
    """Launches with known true speedups; the screening round's requests carry draft counts."""

    def __init__(self, truth: dict[str, float], alpha: float, ks: dict[str, int], seed: int = 0) -> None:
        self.truth, self.alpha, self.ks = truth, alpha, ks
        self.rng = np.random.default_rng(seed)
        super().__init__()

    def run_round(self, round_no: int, arms: list[str]) -> None:
        self.rounds.append(arms)
        for arm in arms:
            launch = math.exp(self.rng.normal(0, 0.01))
            for p in range(PROMPTS):
                rate = 100 * self.truth[arm] * launch * math.exp(self.rng.normal(0, 0.005))
                row = {"arm": arm, "repeat": round_no, "prompt_id": f"p{p}", "decode_tok_s": rate}
                if arm in self.ks:
                    k = self.ks[arm]
                    accepted = (
                        np.minimum(self.rng.geometric(1 - self.alpha, 30) - 1, k) if self.alpha else [0]
                    )
                    row |= {"draft_n": 30.0 * k, "draft_accepted": float(np.sum(accepted))}
                self.rows.append(row)


def _tune(spec: TuneSpec, alpha: float, screening: bool = True) -> tuple[Any, ScreenMeasure]:
    grid = spec.grid()
    ks = {candidate_name(c): int(c["draft_n_max"]) for c in grid}
    m = ScreenMeasure(_truth(spec, alpha), alpha, ks)
    state = initial_state(spec, "baseline", lambda c: None)

    def screen(s: Any) -> None:
        if s.rounds < SCREEN_ROUNDS:
            return
        df = pd.DataFrame(m.rows)
        data = {
            candidate_name(c): screen_requests(df, candidate_name(c), "baseline") for c in screen_picks(grid)
        }
        apply_screen(s, predict_all(grid, data, lambda c: COST, lambda t: 1.0), lambda x: None)

    if screening:
        start_screening(state, grid)
    return race(spec, state, m, PROMPTS, screen=screen if screening else None), m


def test_the_screened_candidate_is_the_largest_k_per_draft_model_with_p_min_off() -> None:
    spec = _spec(draft_model=["a.gguf", "b.gguf"], draft_n_max=[2, 8, 4], draft_p_min=[0.5, 0.0])
    assert [candidate_name(c) for c in screen_picks(spec.grid())] == ["dma-k8-p0_0", "dmb-k8-p0_0"]


def test_predictions_rest_on_the_screened_acceptance_and_reproduce_its_speedup() -> None:
    spec, alpha = _spec(), 0.8
    truth = _truth(spec, alpha)
    reqs = _requests(alpha, 8, truth["dmd-k8-p0_0"], np.random.default_rng(1), n=8)
    preds = predict_all(spec.grid(), {"dmd-k8-p0_0": reqs}, lambda c: COST, lambda t: 1.0)
    assert preds["dmd-k8-p0_0"].alpha == pytest.approx(alpha, abs=0.05)
    assert preds["dmd-k8-p0_0"].point == pytest.approx(truth["dmd-k8-p0_0"], rel=0.03)
    for k in (1, 2, 4):  # the calibrated theory recovers the other K's true speedup
        p = preds[f"dmd-k{k}-p0_0"]
        assert p.point == pytest.approx(truth[f"dmd-k{k}-p0_0"], rel=0.05)
        assert p.low < p.point < p.high


def test_a_pass_curve_that_overstates_the_verify_is_scaled_down_to_the_screened_speedup() -> None:
    spec, alpha = _spec(draft_model=["d.gguf"], draft_n_max=[1, 2, 4, 8]), 0.8

    def true(k: int) -> float:  # verify passes rise 0.1 step per token; the probe says 0.25
        return leviathan_speedup(alpha, k, COST, 1 + 0.1 * k)

    reqs = _requests(alpha, 8, true(8), np.random.default_rng(3), n=8)
    preds = predict_all(spec.grid(), {"dmd-k8": reqs}, lambda c: COST, lambda t: 1 + 0.25 * (t - 1))
    assert preds["dmd-k8"].point == pytest.approx(true(8), rel=0.03)  # no overhead could explain it
    for k in (1, 2, 4):
        assert preds[f"dmd-k{k}"].point == pytest.approx(true(k), rel=0.05)


def test_candidates_predicted_below_the_leader_are_skipped_and_p_min_rides_with_its_k() -> None:
    spec, alpha = _spec(), 0.8
    reqs = _requests(alpha, 8, _truth(spec, alpha)["dmd-k8-p0_0"], np.random.default_rng(2))
    preds = predict_all(spec.grid(), {"dmd-k8-p0_0": reqs}, lambda c: COST, lambda t: 1.0)
    decisions = {n: p.decision for n, p in preds.items()}
    assert decisions["dmd-k8-p0_0"] == "leader"
    assert decisions["dmd-k8-p0_8"] == "races"  # p-min is not modelled: it races with its K
    # K 4 at the leader's p-min races although predicted out (×0.91 of K 8): the K just below
    # the leader's, within what falling acceptance per position could hide
    skipped = {f"dmd-k{k}-p{p}" for k in (1, 2, 4) for p in ("0_0", "0_8")} - {"dmd-k4-p0_0"}
    assert {n for n, d in decisions.items() if d == "skipped"} == skipped
    assert decisions["dmd-k4-p0_0"] == "races" and "below the leader" in preds["dmd-k4-p0_0"].note
    assert "draft_p_min" in preds["dmd-k8-p0_8"].note


def test_when_acceptance_falls_with_position_the_k_below_the_leader_still_races() -> None:
    """Acceptance 0.95 at the first draft position, falling 0.08 per position: the screened K 12
    reads a low mean α, the constant-α model then leads with K 8 and under-predicts K 4 (the true
    best: ×3.24 against K 8's ×3.18) by more than the margin; K 4 must race rather than be skipped
    (a review found the true best skipped in 8 of 80 such grids)."""
    spec = _spec(draft_model=["d.gguf"], draft_n_max=[2, 4, 8, 12])
    rng = np.random.default_rng(5)
    per_pos = np.clip(0.95 - 0.08 * np.arange(12), 0, 1)

    def accepted(k: int) -> float:  # expected accepted per round: P(first j all accepted), summed
        return float(np.cumprod(per_pos[:k]).sum())

    def truth(k: int) -> float:
        return (1 + accepted(k)) / (k * COST + 1)

    reqs = [
        Request(40.0 * 12, 40 * accepted(12), truth(12) * math.exp(rng.normal(0, 0.01))) for _ in range(8)
    ]
    preds = predict_all(spec.grid(), {"dmd-k12": reqs}, lambda c: COST, lambda t: 1.0)
    best = max((2, 4, 8, 12), key=truth)
    assert best == 4 and preds["dmd-k8"].decision == "leader"  # the premise: the model leads wrongly
    assert preds["dmd-k4"].decision == "races"


def test_a_method_without_a_cost_is_not_predicted_and_races() -> None:
    spec = _spec(method=["mtp"], draft_n_max=[1, 2, 4])
    preds = predict_all(spec.grid(), {}, lambda c: None, lambda t: 1.0)
    assert {p.decision for p in preds.values()} == {"unpredicted"}


def test_screening_finds_the_winner_with_far_fewer_launches_and_never_launches_the_skipped() -> None:
    spec = _spec()
    screened, m = _tune(spec, 0.8)
    full, _ = _tune(spec, 0.8, screening=False)
    assert tune_answer(screened).serve == tune_answer(full).serve == "dmd-k8-p0_0"
    launched = {a for r in m.rounds for a in r}
    skipped = {e.name for e in screened.entries if e.reason.startswith("skipped before launch")}
    assert skipped and not skipped & launched
    assert m.rounds[:2] == [["baseline", "dmd-k8-p0_0"], ["dmd-k8-p0_0", "baseline"]]  # screening
    assert sum(map(len, m.rounds)) * 3 <= (len(spec.grid()) + 1) * spec.max_rounds  # ≤ ⅓ of the grid
    errors = {n: meas / pred - 1 for n, pred, meas, _ in theory_errors(screened)}
    assert "dmd-k8-p0_8" in errors  # predicted (as its K) and measured: the error is shown
    text = "\n".join(screen_lines(screened))
    assert "screening: measured dmd-k8-p0_0" in text and "theory's error" in text


def test_when_nothing_wins_the_answer_is_the_baseline() -> None:
    spec = _spec(draft_model=["d.gguf"], draft_n_max=[1, 2, 4, 8])
    state, _ = _tune(spec, 0.0)  # nothing is ever accepted: every K is slower
    ans = tune_answer(state)
    assert ans.serves_baseline and ans.serve == "baseline" and ans.beats_baseline == "no"
    assert any(e.reason.startswith("skipped before launch") for e in state.entries)


def test_the_probe_tells_honoured_from_ignored_per_request_settings() -> None:
    assert verdict([10.0, 10.0]) is False and verdict([9.0, 40.0]) is True and verdict([0.0, 0.0]) is None
    assert "needs its own launch" in describe({"honoured": False, "drafted": [77.0, 77.0]})
    assert "detected, not yet used" in describe({"honoured": True, "drafted": [9.0, 40.0]})

    def server(request: FakeRequest) -> FakeResponse:  # a build that honours n_max
        n_max = int(json.loads(request.content)["speculative.n_max"])
        return FakeResponse(200, json={"timings": {"draft_n": 5 * n_max}})

    async def go() -> dict[str, Any] | None:
        async with mock_client(server) as client:
            engine = LlamaCppEngine.__new__(LlamaCppEngine)
            return await per_request_probe(client, engine, "http://x")

    probe = asyncio.run(go())
    assert probe == {"n_max": [1, 8], "drafted": [5.0, 40.0], "honoured": True}


def test_screening_needs_room_for_a_verdict_after_it_and_something_to_predict() -> None:
    assert screens(_spec())
    short = TuneSpec.model_validate({"dimensions": {"draft_n_max": [1, 2]}, "max_rounds": 4})
    assert not screens(short)  # two screening rounds leave two: no verdict on what they admit
    assert not screens(_spec(draft_model=["a.gguf", "b.gguf"], draft_n_max=[8]))  # only the screened
