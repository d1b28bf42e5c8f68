"""The cost model replayed on an arm's measured draft counts, request by request.

The arithmetic of one replay is analysis/predicted/counts.py's; this module costs its rounds
with the theory (the model's round at each draft length the counts imply) and aggregates the
requests the way the measured speedup does.

**Per request, then the geometric mean.** The measured speedup of a paired run is the geometric
mean of per-request ratios (analysis/stats.py): every request weighs the same, whatever its
length in time. A replay over the arm's pooled counts is a ratio of summed times instead, where
the slow requests weigh most. An n-gram arm is where the two part: on the H200 lab pair five
prompts drafted 117 of their 127 decode tokens and ran ~6x, one drafted 23 and ran 1.1x; pooled,
the one slow request holds half the arm's time and the replay said 3.78x for a measured 4.67x.
So each request is replayed on its own counts (its drafted and accepted tokens, its rounds:
counts.requests_of) and the replays are averaged as the measurement averages them. Where the
counts are not per request, the pooled replay is all there is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from specbench.analysis.evidence import stalls
from specbench.analysis.predicted import counts as C
from specbench.analysis.predicted.models import ArmMethod, draft_weights, run_path
from specbench.analysis.predicted.setup import RunSetup
from specbench.analysis.predicted.stored import read_stored
from specbench.theory.cost import Efficiency
from specbench.theory.measured.engines import catchup_drafts, method_efficiency
from specbench.theory.methods import replay_tokens
from specbench.theory.speedup import Prediction, predict_architecture


def predict_arm(setup: RunSetup, spec: ArmMethod, acceptance: float, eff: Efficiency) -> Prediction:
    """The α-prediction of ``spec``'s arm on ``setup`` at the measured acceptance."""
    path, stored = spec.draft_path, read_stored(setup.run_dir, spec.draft_path)
    if path and setup.run_dir is not None:
        path = run_path(setup.run_dir, path)
    draft = draft_weights(path, stored) if path else None
    return predict_architecture(
        setup.models.target,
        setup.gpu,
        spec.method,
        spec.draft_max,
        acceptance=acceptance,
        draft=draft,
        concurrency=setup.concurrency,
        context=setup.context,
        efficiency=arm_efficiency(setup, spec, eff),
        target_pass=setup.curve,
        replay=setup.replays,
        step_context_slope_s=setup.context_slope_s,
        verify_floor=setup.verify_floor,
        catchup_drafts=catchup_drafts(setup.engine),
    )


def arm_efficiency(setup: RunSetup, spec: ArmMethod, eff: Efficiency) -> Efficiency:
    """``eff`` with the engine's host costs for the arm's method (theory/measured/engines.py)."""
    return method_efficiency(setup.engine, setup.gpu, eff, spec.method)


@dataclass(frozen=True)
class Replay:
    """The replayed speedup and the round figures that go beside it."""

    replayed_speedup: float
    mean_draft: float
    drafting_share: float
    round_ms_measured: float
    round_ms_model: float
    round_note: str | None


class Rounds:
    """The model's round at each draft length, computed once per length (a replay costs every
    request's lengths, and the interval replays every scenario)."""

    def __init__(self, setup: RunSetup, spec: ArmMethod, acceptance: float, eff: Efficiency) -> None:
        self.setup, self.spec, self.acceptance, self.eff = setup, spec, acceptance, eff
        self._at: dict[float, tuple[float, float, float]] = {}
        self.pass_s = arm_efficiency(setup, spec, eff).spec_pass_s

    def at(self, length: float) -> tuple[float, float, float]:
        """(t_step, t_round, P(replay) per round) at a fractional draft length, linear between
        the two whole K around it (the probe's curve is linear there too). P is 1 − α^K on a
        hybrid target that replays (theory/methods.py), else 0."""
        if length not in self._at:
            self._at[length] = self._compute(length)
        return self._at[length]

    def _compute(self, mean_draft: float) -> tuple[float, float, float]:
        low = max(1, math.floor(mean_draft))
        w = min(1.0, max(0.0, mean_draft - low))
        # α is re-derived from A (measured at the arm's K) at each whole K: it only shapes the
        # checkpoint and replay terms here, the counts fix everything else.
        bds = [
            predict_arm(self.setup, replace(self.spec, draft_max=k), self.acceptance, self.eff).breakdown
            for k in (low, low + 1)
        ]
        replays = [
            replay_tokens(b.alpha, k)[0] if b.replay_s > 0 else 0.0
            for b, k in zip(bds, (low, low + 1), strict=True)
        ]
        round_s = (1 - w) * bds[0].round_s + w * bds[1].round_s
        return bds[0].target_step_s, round_s, (1 - w) * replays[0] + w * replays[1]

    def over(self, counts: C.DraftCounts) -> tuple[float, float, float]:
        """(t_step, t_round, P(replay)) averaged over the rounds' draft lengths
        (counts.round_lengths), not taken at their mean: the verify cost can step between two
        lengths, and the mean of a step is not the step at the mean."""
        parts = [(share, self.at(length)) for length, share in C.round_lengths(counts, self.spec.draft_max)]
        step_s = parts[0][1][0] if parts else self.at(1.0)[0]
        return (
            step_s,
            sum(share * r[1] for share, r in parts),
            sum(share * r[2] for share, r in parts),
        )


def replayed_speedup(counts: C.DraftCounts, rounds: Rounds, extra_round_s: float = 0.0) -> float:
    """The arm's replayed speedup: each request's, then their geometric mean (module docstring);
    the pooled replay when the counts are not per request. ``extra_round_s`` adds to every round
    (the ``--fit-arm`` search)."""
    requests = C.requests_of(counts, rounds.spec.draft_max)
    if not requests:
        return _replay_one(counts, rounds, extra_round_s)
    return C.geometric_mean(_replay_one(c, rounds, extra_round_s) for c in requests)


def _replay_one(counts: C.DraftCounts, rounds: Rounds, extra_round_s: float) -> float:
    step_s, round_s, p_replay = rounds.over(counts)
    if not counts.rounds > 0:
        round_s = p_replay = 0.0
    replays = counts.rounds * p_replay
    return C.replayed_speedup(counts, step_s, round_s + extra_round_s, replays, rounds.pass_s)


def round_for_speedup(counts: C.DraftCounts, rounds: Rounds, speedup: float) -> float:
    """The amount to add to every round for the replay to equal ``speedup`` (the ``--fit-arm``
    fit; the replay falls as rounds grow, so a bisection finds it). At least ``-round_s``:
    rounds without the per-round overhead are the fastest a fit may make them."""
    floor = -rounds.eff.round_s

    def miss(extra: float) -> float:
        return replayed_speedup(counts, rounds, extra) - speedup

    if miss(floor) <= 0:
        return floor
    high = max(1e-3, rounds.over(counts)[0])
    while miss(high) > 0:
        high *= 2.0
    return _bisect(miss, floor, high)


def _bisect(f: Callable[[float], float], low: float, high: float) -> float:
    """The root of a decreasing ``f`` between ``low`` (f > 0) and ``high`` (f ≤ 0)."""
    for _ in range(200):
        mid = (low + high) / 2
        if f(mid) > 0:
            low = mid
        else:
            high = mid
        if high - low <= 1e-15 * max(1.0, abs(high)):
            break
    return (low + high) / 2


def replay(setup: RunSetup, arm: str, spec: ArmMethod, acceptance: float, eff: Efficiency) -> Replay | None:
    """The arm's replay (None when it drafted no round)."""
    counts = arm_counts(setup, arm, spec)
    if not counts.rounds > 0:
        return None
    rounds = Rounds(setup, spec, acceptance, eff)
    step_s, round_s, p_replay = rounds.over(counts)
    clean = round_counts(setup, arm, spec, counts)
    measured_ms, note = measured_round(clean, step_s, p_replay, rounds.pass_s)
    return Replay(
        replayed_speedup=replayed_speedup(counts, rounds),
        mean_draft=counts.mean_draft,
        drafting_share=counts.drafting_share,
        round_ms_measured=measured_ms,
        round_ms_model=round_s * 1e3,
        round_note=note,
    )


def measured_round(
    counts: C.DraftCounts, step_s: float, p_replay: float, pass_s: float
) -> tuple[float, str | None]:
    """(round ms as measured, None) or (NaN, why it is not a measurement): the arithmetic must
    leave a positive remainder, and that remainder must be something a round can be."""
    replays = counts.rounds * p_replay
    note = C.round_not_measurable(counts, step_s, replays, pass_s)
    if note is not None:
        return math.nan, note
    round_s = C.measured_round_s(counts, step_s, replays, pass_s)
    note = C.round_not_a_measurement(counts, round_s)
    return (math.nan, note) if note is not None else (round_s * 1e3, None)


def arm_counts(setup: RunSetup, arm: str, spec: ArmMethod) -> C.DraftCounts:
    """The arm's draft counts; at one level of a sweep, its share of the launches' rounds."""
    over = setup.sweep.df if setup.sweep is not None else None
    return C.draft_counts(setup.run.df, setup.run.cells, arm, spec.draft_max, over)


def round_counts(setup: RunSetup, arm: str, spec: ArmMethod, counts: C.DraftCounts) -> C.DraftCounts:
    """The counts the measured round is read from: the arm's requests less the stalled ones (a
    paused engine is not a round; its seconds would be spread over the rounds), with their share
    of the counted rounds (:func:`counts.level_rounds`, as for one level of a sweep)."""
    run = setup.run
    clean = stalls.without_stalls(run.df, run.records, {a for a in run.arms if run.speculates(a)})
    if len(clean[clean["arm"] == arm]) == len(run.df[run.df["arm"] == arm]):
        return counts
    over = setup.sweep.df if setup.sweep is not None else run.df
    return C.draft_counts(clean, run.cells, arm, spec.draft_max, over)
