"""The rounds of an answer as llama-server drafts them (specbench.tune.rounds) and the screening
that predicts from them: a server that caps the last drafts at the tokens left."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.matrix.tuneblock import TuneSpec, candidate_name
from specbench.tune.rounds import expected_rounds
from specbench.tune.screen import Request, predict_all

COST = 0.05


def _server(rng: np.random.Generator, alpha: float, k: int, tokens: int) -> tuple[int, int, int]:
    """(drafted, accepted, rounds) of one answer drawn as the pinned server drafts: the first
    token from the prompt's pass, then rounds of min(K, tokens left − 1) drafts (a plain step
    when 0), each accepting a prefix ~ min(draft, geometric)."""
    drafted = accepted = rounds = 0
    made = 1
    while made < tokens:
        draft = min(k, tokens - made - 1)
        a = min(draft, int(rng.geometric(1 - alpha)) - 1)
        drafted, accepted, made, rounds = drafted + draft, accepted + a, made + a + 1, rounds + (draft > 0)
    return drafted, accepted, rounds


@pytest.mark.parametrize(("k", "tokens"), [(8, 32), (4, 32), (1, 20), (16, 64)])
def test_the_walk_expects_what_the_server_drafts_and_accepts(k: int, tokens: int) -> None:
    rng = np.random.default_rng(k * 1000 + tokens)
    draws = np.array([_server(rng, 0.8, k, tokens) for _ in range(4000)])
    walked = expected_rounds(np.array([0.8]), k, tokens, COST, lambda t: 1.0)
    drafted, accepted, rounds = draws.mean(0)
    assert walked.drafted[0] == pytest.approx(drafted, rel=0.02)
    assert walked.accepted[0] == pytest.approx(accepted, rel=0.02)
    assert walked.drafting[0] == pytest.approx(rounds, rel=0.02)
    if k > 1:  # the end of the answer caps the last drafts (K 1 drafts 1 or, last, nothing)
        assert walked.drafted[0] < k * walked.drafting[0]


def test_a_long_answer_walks_to_the_closed_form() -> None:
    alpha, k, o = np.array([0.8]), 4, 0.2

    def v(t: int) -> float:
        return 1 + 0.05 * (t - 1)

    tau = (1 - alpha ** (k + 1)) / (1 - alpha)
    closed = tau / (k * COST + 1 + 0.05 * k + o)
    assert expected_rounds(alpha, k, 512, COST, v).speedup(1.0, o)[0] == pytest.approx(closed[0], rel=0.005)


def test_the_screening_of_short_answers_predicts_each_k_as_the_server_runs_it() -> None:
    """32-token answers: the screened K 8 drafts ~7 a round, not 8. Predicted with the answers'
    own rounds, the smaller K come out as the server runs them; held at full K (as before),
    the screened round's shortfall read as overhead and K 1 came out far too slow."""
    alpha, tokens = 0.8, 32
    spec = TuneSpec.model_validate({"dimensions": {"draft_model": ["d.gguf"], "draft_n_max": [1, 2, 4, 8]}})

    def true(k: int) -> float:
        return float(expected_rounds(np.array([alpha]), k, tokens, COST, lambda t: 1.0).speedup(1.0, 0.0)[0])

    rng = np.random.default_rng(5)
    reqs = []
    for launch in (0, 1):
        for _ in range(4):
            drafted, accepted, _ = _server(rng, alpha, 8, tokens)
            ratio = true(8) * math.exp(rng.normal(0, 0.01))
            reqs.append(Request(drafted, accepted, ratio, launch, prompt_tokens=30, generated=tokens))
    preds = predict_all(spec.grid(), {"dmd-k8": reqs}, lambda c: COST, lambda t: 1.0)
    assert preds["dmd-k8"].point == pytest.approx(true(8), rel=0.03)
    for k in (1, 2, 4):
        assert preds[f"dmd-k{k}"].point == pytest.approx(true(k), rel=0.06), k
    unsaid = [Request(r.drafted, r.accepted, r.ratio, r.launch) for r in reqs]  # lengths not said
    held = predict_all(spec.grid(), {"dmd-k8": unsaid}, lambda c: COST, lambda t: 1.0)
    assert held["dmd-k1"].point < 0.93 * true(1)  # the full-K form's error this walk removes
    assert candidate_name(spec.grid()[0]) == "dmd-k1"
