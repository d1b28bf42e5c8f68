"""The race's progress line, said before every round: where the tune is, what it has spent, and
the most the rest of this stage can still cost — a tune runs for many minutes, and how long it
may still take depends on drops nobody can foresee, so the line gives a bound on launches and
an estimate of the time that bound would take.

The bound: this round's launches, then every round the stage has left (``max_rounds``) with the
baseline and every candidate not yet dropped (racing, or waiting to be admitted) — capped by what
the budget has left in launches and requests. Drops only lower it; a refinement stage, if the
race ends with a leader and the budget pays for one, comes on top and is said so. A server that
crashes and is restarted spends a launch more than its round (the budget counts it; the bound
does not foresee it). The time is the bound at this tune's own seconds per launch so far
(capped by what ``budget.minutes`` leaves): an estimate, not a bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.matrix.tuneblock import TuneSpec


@dataclass(frozen=True)
class Where:
    """The race at the start of a round (what :mod:`specbench.tune.race` hands over)."""

    round_no: int  # rounds already run, all stages
    stage: str
    stage_round: int  # rounds already run in this stage
    statuses: Sequence[str]  # every candidate's: racing | waiting | dropped
    minutes: float  # spent so far, resumes included


def most_launches(spec: TuneSpec, at: Where, arms: int, spent: tuple[int, int], prompts: int) -> int:
    """The most launches this stage can still spend, this round's ``arms`` included."""
    rounds_left = spec.max_rounds - at.stage_round - 1
    alive = 1 + sum(s in ("racing", "waiting") for s in at.statuses)
    most = arms + max(rounds_left, 0) * alive
    budget = spec.budget
    if budget.launches is not None:
        most = min(most, budget.launches - spent[0])
    if budget.requests is not None and prompts > 0:
        most = min(most, (budget.requests - spent[1]) // prompts)
    return max(most, arms)


def round_line(spec: TuneSpec, at: Where, arms: int, spent: tuple[int, int], prompts: int) -> str:
    """``round 4 (race, 4 of at most 8): 5 launches; so far 14 launches, 56 requests in 3:10;
    at most 25 more launches (≈ 5:40 at 13.6 s a launch); candidates 4 racing, 2 dropped, 0 waiting``."""
    most = most_launches(spec, at, arms, spent, prompts)
    seconds = at.minutes * 60
    eta = ""
    if spent[0] > 0 and seconds > 0:
        per = seconds / spent[0]
        left = most * per
        if spec.budget.minutes is not None:
            left = min(left, max(spec.budget.minutes * 60 - seconds, 0.0))
        eta = f" (≈ {_clock(left)} at {per:.1f} s a launch)"
    count = {s: sum(x == s for x in at.statuses) for s in ("racing", "dropped", "waiting")}
    refine = " + a refinement stage if one is paid for" if spec.refine and at.stage != "refine" else ""
    return (
        f"round {at.round_no + 1} ({at.stage}, {at.stage_round + 1} of at most "
        f"{spec.max_rounds}): {arms} launches; so far {spent[0]} launches, {spent[1]} requests in "
        f"{_clock(seconds)}; at most {most} more launches{eta}{refine}; candidates {count['racing']} "
        f"racing, {count['dropped']} dropped, {count['waiting']} waiting"
    )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
