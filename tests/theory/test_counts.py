"""The cost model replayed on measured draft counts (analysis/predicted/counts.py)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from specbench.analysis.predicted.counts import (
    DraftCounts,
    counted_rounds,
    draft_counts,
    measured_round_s,
    replayed_speedup,
    round_lengths,
    round_not_measurable,
)


def cell(arm: str, before: float | None, after: float | None) -> dict[str, Any]:
    spec_before = {} if before is None else {"drafts": before}
    spec_after = {} if after is None else {"drafts": after}
    return {"arm": arm, "metrics_before": {"spec": spec_before}, "metrics_after": {"spec": spec_after}}


def frame() -> pd.DataFrame:
    rows = [
        {"arm": "ngram", "output_tokens": 64, "draft_n": 48, "draft_accepted": 48, "tpot_ms": 10.0},
        {"arm": "ngram", "output_tokens": 64, "draft_n": 0, "draft_accepted": 0, "tpot_ms": 20.0},
        {"arm": "baseline", "output_tokens": 64, "draft_n": 0, "draft_accepted": 0, "tpot_ms": 20.0},
    ]
    return pd.DataFrame(rows)


def test_steps_mean_draft_and_share_follow_the_definitions() -> None:
    c = DraftCounts(tokens=128, drafted=48, accepted=48, rounds=3, rounds_counted=True)
    assert c.steps == 80  # 128 tokens, 48 of them came free with a verify
    assert c.mean_draft == 16
    assert c.drafting_share == pytest.approx(3 / 80)


def test_rounds_come_from_the_metrics_deltas_of_the_arms_cells() -> None:
    cells = [cell("ngram", 10, 12), cell("ngram", 0, 1), cell("baseline", 0, 0)]
    assert counted_rounds(cells, "ngram") == 3
    counts = draft_counts(frame(), cells, "ngram", k=64)
    assert (counts.tokens, counts.drafted, counts.rounds, counts.rounds_counted) == (128, 48, 3, True)


def test_without_a_drafts_counter_rounds_are_drafted_over_k() -> None:
    cells = [cell("ngram", None, None)]
    assert counted_rounds(cells, "ngram") is None
    counts = draft_counts(frame(), cells, "ngram", k=16)
    assert counts.rounds == 3 and not counts.rounds_counted


def test_replayed_speedup_is_tokens_over_weighted_passes() -> None:
    # 3 rounds of 16 accepted drafts at 4 steps each, 77 plain steps: 128 tokens in 89 step-times
    c = DraftCounts(tokens=128, drafted=48, accepted=48, rounds=3, rounds_counted=True)
    assert replayed_speedup(c, step_s=1.0, round_s=4.0) == pytest.approx(128 / (3 * 4 + 77))


def test_a_verify_as_cheap_as_a_step_with_full_acceptance_is_the_token_ratio() -> None:
    c = DraftCounts(tokens=100, drafted=80, accepted=80, rounds=20, rounds_counted=True)
    assert replayed_speedup(c, step_s=0.01, round_s=0.01) == pytest.approx(100 / 20)


def test_nothing_generated_is_nan() -> None:
    c = DraftCounts(tokens=0, drafted=0, accepted=0, rounds=0, rounds_counted=True)
    assert math.isnan(replayed_speedup(c, 1.0, 1.0)) and math.isnan(c.mean_draft)


def test_the_measured_round_is_the_window_left_after_the_plain_steps() -> None:
    counts = draft_counts(frame(), [cell("ngram", 0, 3)], "ngram", k=16)
    assert counts.requests == 2 and counts.window_s == pytest.approx((63 * 10 + 63 * 20) / 1000)
    # passes in the windows: 128 − 2 − 48 = 78, of which 3 verified drafts and 75 were plain steps
    assert measured_round_s(counts, step_s=0.02) == pytest.approx((1.89 - 75 * 0.02) / 3)


def test_no_rounds_no_measured_round() -> None:
    c = DraftCounts(tokens=10, drafted=0, accepted=0, rounds=0, rounds_counted=True, requests=1, window_s=1.0)
    assert math.isnan(measured_round_s(c, 0.1))


def test_replay_passes_are_taken_out_of_the_plain_passes() -> None:
    # one request: 99 decode tokens in S' = 100 − 1 − 30 = 69 passes, 10 drafting rounds, 2 replays
    c = DraftCounts(
        tokens=100, drafted=40, accepted=30, rounds=10, rounds_counted=True, requests=1, window_s=8.0
    )
    assert c.decode_passes == 69
    assert replayed_speedup(c, 0.1, 0.5, replays=2) == pytest.approx(99 * 0.1 / (10 * 0.5 + 57 * 0.1))
    assert measured_round_s(c, 0.1, replays=2) == pytest.approx((8.0 - 57 * 0.1) / 10)


def test_a_round_that_would_come_out_negative_is_not_measurable_with_the_reason() -> None:
    # the plain passes at the baseline's step (57 × 0.1 s) take longer than the whole 3 s window:
    # the arm's steps ran faster than the baseline's, and (3.0 − 5.7) / 10 = −270 ms is no round
    c = DraftCounts(
        tokens=100, drafted=40, accepted=30, rounds=10, rounds_counted=True, requests=1, window_s=3.0
    )
    assert math.isnan(measured_round_s(c, 0.1, replays=2))
    reason = round_not_measurable(c, 0.1, replays=2)
    assert reason is not None and "57 plain passes" in reason and "3.00 s" in reason
    assert round_not_measurable(c, 0.01, replays=2) is None and measured_round_s(c, 0.01, replays=2) > 0


def test_the_first_token_of_each_request_is_prefill_not_a_decode_pass() -> None:
    one = DraftCounts(tokens=64, drafted=48, accepted=48, rounds=12, rounds_counted=True, requests=0)
    two = DraftCounts(tokens=64, drafted=48, accepted=48, rounds=12, rounds_counted=True, requests=1)
    # 63 decode tokens in 15 passes (12 rounds of 2 steps, 3 plain) vs 64 in 16 counted with prefill
    assert replayed_speedup(two, 1.0, 2.0) == pytest.approx(63 / (12 * 2 + 3))
    assert replayed_speedup(one, 1.0, 2.0) == pytest.approx(64 / (12 * 2 + 4))


def test_accepted_tokens_cut_off_by_max_tokens_are_not_counted() -> None:
    # A real vLLM draft arm: a 128-token answer whose counters say 48 rounds and 82 accepted
    # (1 + 48 + 82 = 131 > 128: the last round's accepted tokens ran past max_tokens). Counting
    # them left 45 passes for 48 rounds, a drafting share of 104 %.
    rows = [{"arm": "draft", "output_tokens": 128, "draft_n": 96, "draft_accepted": 82, "tpot_ms": 5.0}]
    counts = draft_counts(pd.DataFrame(rows), [cell("draft", 0, 48)], "draft", k=2)
    assert counts.accepted == 79 and counts.decode_passes == 48
    assert counts.drafting_share <= 1.0


def test_each_requests_drafts_are_rounds_at_k_and_one_of_the_remainder() -> None:
    # The H200 n-gram arm (n_max 16): requests drafting 117, 119 and 23 tokens, 8 + 8 + 2 rounds
    # counted; llama-server's log says 117 in 8 rounds (mean accepted length 1 + 117/8 = 15.62).
    rows = [
        {"arm": "ngram", "output_tokens": 128, "draft_n": d, "draft_accepted": d, "tpot_ms": 1.0}
        for d in (117, 119, 23)
    ]
    counts = draft_counts(pd.DataFrame(rows), [cell("ngram", 0, 18)], "ngram", k=16)
    assert counts.mean_draft == pytest.approx(259 / 18)  # 14.4: a 15.4-token verify at the mean
    assert _flat(round_lengths(counts, 16)) == pytest.approx([5, 1 / 18, 7, 2 / 18, 16, 15 / 18])


def test_without_per_request_rounds_as_many_as_the_tokens_allow_are_at_k() -> None:
    # 102 tokens in 7 counted rounds (more than the 6 a single request would need): 6 rounds at
    # 16 would leave 6 tokens for the seventh; one round of at least one token each is kept
    c = DraftCounts(tokens=500, drafted=102, accepted=90, rounds=7, rounds_counted=True)
    assert _flat(round_lengths(c, 16)) == pytest.approx([16, 6 / 7, 6, 1 / 7])
    # 20 tokens in 10 rounds: 0 rounds can be at 16 (each other round needs one), so the mean
    c = DraftCounts(tokens=500, drafted=20, accepted=20, rounds=10, rounds_counted=True)
    assert round_lengths(c, 16) == ((2.0, 1.0),)


def test_round_lengths_without_rounds_or_with_estimated_rounds() -> None:
    assert round_lengths(DraftCounts(tokens=9, drafted=0, accepted=0, rounds=0, rounds_counted=True), 4) == ()
    estimated = DraftCounts(tokens=90, drafted=30, accepted=20, rounds=7.5, rounds_counted=False)
    assert round_lengths(estimated, 4) == ((4.0, 1.0),)  # d / K rounds: all at K


def _flat(lengths: tuple[tuple[float, float], ...]) -> list[float]:
    return [x for pair in lengths for x in pair]
