"""The replay request by request, averaged as the measured speedup is (analysis/predicted/replay.py).

The H200 lab pair's n-gram arm (issue #43): five prompts drafted 117 of their 127 decode tokens,
one drafted 23. The measured speedup is the geometric mean of per-request ratios; a replay of the
pooled counts weighs the one slow request by its time and said 3.78x for a measured 4.67x."""

from __future__ import annotations

import math

import pytest

from specbench.analysis.predicted.counts import DraftCounts, geometric_mean, replayed_speedup, requests_of

H200_NGRAM = ((128.0, 117.0, 117.0),) * 5 + ((128.0, 23.0, 23.0),)


def arm(each: tuple[tuple[float, float, float], ...], rounds: float, counted: bool = True) -> DraftCounts:
    tokens, drafted, accepted = (sum(x[i] for x in each) for i in range(3))
    return DraftCounts(tokens, drafted, accepted, rounds, counted, requests=len(each), each=each)


def test_each_request_gets_its_minimum_rounds_and_its_share_of_the_rest() -> None:
    exact = requests_of(arm(H200_NGRAM, 5 * 8 + 2), 16)
    assert [c.rounds for c in exact] == [8] * 5 + [2]
    more = requests_of(arm(H200_NGRAM, 1.5 * (5 * 8 + 2)), 16)
    assert [c.rounds for c in more] == pytest.approx([12] * 5 + [3])
    assert sum(c.drafted for c in more) == 5 * 117 + 23
    estimated = requests_of(arm(H200_NGRAM, (5 * 117 + 23) / 16, counted=False), 16)
    assert estimated[0].rounds == pytest.approx(117 / 16)


def test_the_accepted_tokens_of_a_request_never_exceed_what_its_passes_emitted() -> None:
    (one,) = requests_of(arm(((10.0, 16.0, 16.0),), 1), 16)
    assert one.accepted == 10 - 1 - 1  # prefill's token and the round's own


def test_the_geometric_mean_of_the_requests_is_not_the_pooled_replay() -> None:
    step, round_s = 2.2e-3, 4.4e-3
    pooled = replayed_speedup(arm(H200_NGRAM, 42), step, round_s)
    each = [replayed_speedup(c, step, round_s) for c in requests_of(arm(H200_NGRAM, 42), 16)]
    paired = geometric_mean(each)
    assert paired == pytest.approx(math.exp(sum(math.log(r) for r in each) / 6))
    assert pooled < 4.0 < paired  # the slow request holds half the pooled time
    assert each[-1] == pytest.approx(127 * step / (2 * round_s + 102 * step))


def test_the_geometric_mean_skips_what_is_no_ratio() -> None:
    assert geometric_mean([4.0, 1.0, math.nan, 0.0]) == pytest.approx(2.0)
    assert math.isnan(geometric_mean([]))
    assert requests_of(DraftCounts(10, 4, 4, 1, True), 4) == []
