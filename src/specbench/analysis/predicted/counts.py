"""The cost model replayed on what the drafter actually did: a second prediction per arm.

The α-prediction assumes every step drafts K tokens and draws acceptance i.i.d.; an n-gram
drafter breaks both (it drafts only when the context repeats, and then variable lengths). The
run's counters say what happened, so the cost model can be checked on its own. Over an arm's
measured requests, with N generated tokens, d drafted, a accepted and R drafting rounds (the
``drafts`` counter of /metrics; d / K when the server does not count them)::

    passes  S' = N − n − a                 decode passes (n requests: each first token is prefill's;
                                           every pass emits its accepted tokens + 1)
    D̄       = d / R                        tokens drafted per drafting round
    time    = R · t_round(D̄) + (S' − R − P) · (t_step + h)
    speedup = (N − n) · t_step / time       the decode tokens, as the measured decode rate counts

where P is the number of replay passes (hybrid targets: one per rejecting round, already
costed in t_round; zero otherwise), h the host work a speculating server adds to every pass,
drafting or not (``Efficiency.spec_pass_s``, theory/measured/engines.py; in t_round for the rounds),
and t_round(D̄) the model's round (draft + verify of D̄+1 tokens + checkpoint + overhead) at D̄.
The difference between this and the measurement is the cost model's error alone; the difference
between this and the α-prediction is the acceptance model's.

The arm's figure is this replay per request (:func:`requests_of`), then the geometric mean of
the requests' ratios, the measured speedup's estimator (analysis/predicted/replay.py).

t_round(D̄) is the mean over the rounds' draft lengths, not the round at the mean
(:func:`round_lengths`): a verify's cost can step between two lengths (llama.cpp's CUDA f16
matmul leaves its small-batch kernel above 16 tokens), and an n-gram arm drafting 16 tokens in
most rounds and a few short ones averages 14.6; a round at 15.6 tokens sits halfway up a step
that nearly all of its rounds are past. The servers count rounds (per launch) and drafted
tokens (per request), not each round's length, so the split is the least-assumption one. Per
request, d_i drafted tokens need at least ⌈d_i / K⌉ rounds; when those add up to the counted R,
every request drafted ⌊d_i / K⌋ rounds at K and one round of the remainder (on the H200 n-gram
arm llama.cpp's log line "mean len = 15.62", which is 1 + accepted / rounds, gives 8 rounds for
117 tokens: the minimum, 7 × 16 + 5). Otherwise, over the arm: as many rounds at K as d allows
while every other round drafts at least one token, the rest at their mean. Where the cost is
linear in the length either equals the round at D̄.

The same counts turn the measured decode windows W (first to last token, summed over requests;
the first token is prefill's) into a measured round, to set beside the model's::

    round_measured = (W − (S' − R − P) · (t_step + h)) / R

with t_step the baseline's measured step: whatever the model leaves out (host work per round)
shows up as the gap between the two. The windows are the requests that did not stall (a paused
engine is not a round; analysis/stalls.py), with their share of the counted rounds
(:func:`level_rounds`). What is left is a remainder, and on a loaded machine with few rounds it is
the plain passes' slowdown and stalls spread over those rounds (a 2-core box, an n-gram arm: a
"round" of 62 s); :func:`round_not_a_measurement` names the figures no round can be.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from specbench.analysis.evidence.acceptance import spec_deltas


@dataclass(frozen=True)
class DraftCounts:
    """What one arm's drafter did over its measured requests."""

    tokens: float
    drafted: float
    accepted: float
    rounds: float
    rounds_counted: bool  # True: from /metrics "drafts"; False: estimated as drafted / K
    requests: int = 0
    window_s: float = math.nan  # Σ decode windows (first to last token), seconds
    longest_window_s: float = math.nan  # the longest one request's decode window, seconds
    drafted_each: tuple[float, ...] = ()  # d_i per request, for :func:`round_lengths`
    each: tuple[tuple[float, float, float], ...] = ()  # (N_i, d_i, a_i) per request, for :func:`requests_of`

    @property
    def steps(self) -> float:
        """S = N − a: target passes (each emits its accepted tokens plus one)."""
        return self.tokens - self.accepted

    @property
    def mean_draft(self) -> float:
        """D̄ = d / R (NaN without drafting rounds)."""
        return self.drafted / self.rounds if self.rounds > 0 else math.nan

    @property
    def decode_passes(self) -> float:
        """S' = N − n − a: the passes after each request's first (prefill) token."""
        return self.tokens - self.requests - self.accepted

    @property
    def drafting_share(self) -> float:
        """R / S: the share of target passes that verified a draft."""
        return self.rounds / self.steps if self.steps > 0 else math.nan


def round_lengths(counts: DraftCounts, k: int) -> tuple[tuple[float, float], ...]:
    """(draft length, share of the rounds) for R rounds drafting d tokens, at most ``k`` each
    (see the module docstring): per request when its minimum rounds are the counted R, else
    over the arm. Empty without rounds."""
    if not counts.rounds > 0:
        return ()
    each = _request_lengths(counts.drafted_each, k)
    if each and sum(each.values()) == counts.rounds:
        return tuple((length, n / counts.rounds) for length, n in sorted(each.items()))
    return _arm_lengths(counts.rounds, counts.drafted, k)


def _request_lengths(drafted_each: Iterable[float], k: int) -> dict[float, int]:
    """⌊d_i / K⌋ rounds at K and one of the remainder per request ({} unless every d_i is whole)."""
    lengths: dict[float, int] = {}
    for d in drafted_each:
        if not (d >= 0 and float(d).is_integer()) or k < 1:
            return {}
        full, rest = divmod(int(d), k)
        for length, n in ((float(k), full), (float(rest), 1 if rest else 0)):
            if n:
                lengths[length] = lengths.get(length, 0) + n
    return lengths


def _arm_lengths(rounds: float, drafted: float, k: int) -> tuple[tuple[float, float], ...]:
    """n_K = ⌊(d − R) / (K − 1)⌋ rounds at K (each other round drafts at least one token), the
    other R − n_K at their mean; one length when the mean is not below K (rounds estimated as
    d / K) or no round can be at K."""
    if k <= 1 or drafted >= rounds * k:
        return ((float(k), 1.0),)
    full = min(rounds - 1, max(0.0, math.floor((drafted - rounds) / (k - 1))))
    if full <= 0:
        return ((drafted / rounds, 1.0),)
    rest = rounds - full
    return ((float(k), full / rounds), ((drafted - full * k) / rest, rest / rounds))


def counted_rounds(cells: Iterable[Mapping[str, Any]], arm: str) -> float | None:
    """Σ over the arm's cells of the /metrics ``drafts`` delta; None if any cell lacks it."""
    deltas = [spec_deltas(c).get("drafts") for c in cells if c.get("arm") == arm]
    if not deltas or any(d is None for d in deltas):
        return None
    return float(sum(d for d in deltas if d is not None))


def draft_counts(
    df: pd.DataFrame,
    cells: Iterable[Mapping[str, Any]],
    arm: str,
    k: int,
    over: pd.DataFrame | None = None,
) -> DraftCounts:
    """The arm's totals from its request rows (``df``: one row per measured request). ``over``:
    the requests the cells' counters cover, when ``df`` is one level of a sweep (:func:`level_rounds`)."""
    rows = df[df["arm"] == arm]
    drafted = float(rows["draft_n"].sum())
    counted = counted_rounds(cells, arm)
    if counted is not None and over is not None:
        counted = level_rounds(counted, _drafted_each(rows), _drafted_each(over[over["arm"] == arm]), k)
    rounds = counted if counted is not None else drafted / k
    # the decode window (first to last token) is tpot · (N − 1); a one-token request has none
    window = (rows["tpot_ms"] * (rows["output_tokens"] - 1) / 1000.0).where(rows["output_tokens"] > 1, 0.0)
    tokens = float(rows["output_tokens"].sum())
    windows = window.notna().all() and len(window) > 0
    return DraftCounts(
        tokens=tokens,
        drafted=drafted,
        accepted=emitted_accepted(float(rows["draft_accepted"].sum()), tokens, len(rows), rounds),
        rounds=rounds,
        rounds_counted=counted is not None,
        requests=len(rows),
        window_s=float(window.sum()) if windows else math.nan,
        longest_window_s=float(window.max()) if windows else math.nan,
        drafted_each=tuple(_drafted_each(rows)),
        each=_each(rows),
    )


def requests_of(counts: DraftCounts, k: int) -> list[DraftCounts]:
    """Each request's own counts (empty when the arm's are not per request).

    The servers count drafted and accepted tokens per request but rounds per launch: a request
    drafting d_i tokens took at least ⌈d_i / K⌉ rounds, and gets its share of the counted rounds
    beyond the arm's minimum in proportion to its own (:func:`level_rounds`; on the H200 n-gram
    arm every request drafted its minimum). Rounds estimated as d / K stay d_i / K."""
    if not counts.each:
        return []
    drafted = [d for _, d, _ in counts.each]
    least, extra = _least_rounds(drafted, k), 0.0
    if counts.rounds_counted and least > 0:
        extra = max(0.0, counts.rounds - least) / least
    out = []
    for n, d, a in counts.each:
        own = math.ceil(d / k) if d > 0 else 0
        rounds = own * (1 + extra) if counts.rounds_counted else d / k
        out.append(
            DraftCounts(
                tokens=n,
                drafted=d,
                accepted=emitted_accepted(a, n, 1, rounds),
                rounds=rounds,
                rounds_counted=counts.rounds_counted,
                requests=1,
                drafted_each=(d,),
            )
        )
    return out


def geometric_mean(ratios: Iterable[float]) -> float:
    """exp(mean(log r)) over the finite positive ratios (NaN without any): the paired speedup's
    estimator (analysis/stats.py), so a replay aggregated this way compares with it."""
    logs = [math.log(r) for r in ratios if r > 0 and math.isfinite(r)]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


def _each(rows: pd.DataFrame) -> tuple[tuple[float, float, float], ...]:
    """(N_i, d_i, a_i) of each request row."""
    n, d, a = rows["output_tokens"], rows["draft_n"].fillna(0.0), rows["draft_accepted"].fillna(0.0)
    return tuple((float(x), float(y), float(z)) for x, y, z in zip(n, d, a, strict=True))


def level_rounds(counted: float, level: Iterable[float], launch: Iterable[float], k: int) -> float:
    """One level's share of rounds counted over launches that ran several levels.

    /metrics is scraped once a launch, and a sweep's launch runs every level, so its ``drafts``
    delta is the rounds of all of them. Each request needs at least ⌈d_i / K⌉ rounds; the level
    gets its requests' minimum and the share of the launches' rounds beyond the minimum that its
    minimum is of theirs. Where the launches drafted their minimum (on the H200 sweeps, every
    draft arm), that is the level's own count exactly."""
    least = _least_rounds(level, k)
    everyone = _least_rounds(launch, k)
    if not everyone > 0:
        return 0.0
    return least + max(0.0, counted - everyone) * least / everyone


def _least_rounds(drafted: Iterable[float], k: int) -> float:
    return float(sum(math.ceil(d / k) for d in drafted if d > 0))


def _drafted_each(rows: pd.DataFrame) -> list[float]:
    return [float(d) for d in rows["draft_n"].fillna(0.0)]


def emitted_accepted(accepted: float, tokens: float, requests: int, rounds: float) -> float:
    """The accepted draft tokens that reached the output: at most N − n − R.

    Each request's first token is prefill's and every drafting round's pass emits one token of
    its own beside its accepted drafts, so N ≥ n + R + a. vLLM counts a round's accepted tokens
    before max_tokens cuts the answer (a 128-token answer counted 1 + 48 rounds + 82 accepted =
    131), which would leave fewer passes than rounds and a drafting share above 100 %; the
    accepted tokens cut off never reached the output, so they are not counted."""
    if not math.isfinite(rounds):
        return accepted
    return min(accepted, max(0.0, tokens - requests - rounds))


def replayed_speedup(
    counts: DraftCounts, step_s: float, round_s: float, replays: float = 0.0, pass_s: float = 0.0
) -> float:
    """(N − n) · t_step / (R · t_round + (S' − R − P) · (t_step + h)), see the module docstring.

    ``replays`` P: target passes that re-run an accepted prefix after a restore (hybrid targets).
    Each emits a token and drafts nothing, so the counts see it as a pass of its own; its cost is
    already in ``round_s``, so it is taken out of the plain passes. ``pass_s`` h: the host work a
    speculating server adds to each pass that tried to draft and found nothing
    (``Efficiency.spec_pass_s``; ``round_s`` holds it for the rounds).
    """
    time = counts.rounds * round_s + _plain_time(counts, step_s, replays, pass_s)
    return (counts.tokens - counts.requests) * step_s / time if time > 0 else math.nan


def measured_round_s(counts: DraftCounts, step_s: float, replays: float = 0.0, pass_s: float = 0.0) -> float:
    """(W − (S' − R − P) · (t_step + h)) / R: one drafting round as measured, replays included
    (see :func:`replayed_speedup` for P and h, and the module docstring); NaN when it is not
    measurable (:func:`round_not_measurable` says why), never a negative time."""
    if round_not_measurable(counts, step_s, replays, pass_s) is not None:
        return math.nan
    return (counts.window_s - _plain_time(counts, step_s, replays, pass_s)) / counts.rounds


def round_not_measurable(
    counts: DraftCounts, step_s: float, replays: float = 0.0, pass_s: float = 0.0
) -> str | None:
    """Why the arm's decode windows give no drafting round, or None when they do.

    The round is what is left of the windows W after the plain (non-drafting) passes, each
    costed at the *baseline's* step (plus the speculating server's ``pass_s``). When the arm's
    plain steps ran faster than the baseline's (another load on the machine during the baseline,
    a warmer cache), that remainder can be zero or negative: no round time can be read off, and
    printing "−224.8 ms" would be a figure no round can take.
    """
    if not counts.rounds > 0:
        return "the arm drafted no round"
    if not math.isfinite(counts.window_s):
        return "the arm's requests have no decode windows"
    plain = _plain_time(counts, step_s, replays, pass_s)
    if counts.window_s - plain <= 0:
        return (
            f"its {_plain_passes(counts, replays):.0f} plain passes at the baseline's"
            f" {(step_s + pass_s) * 1e3:.2f} ms step ({plain:.2f} s) take longer than all its decode windows"
            f" ({counts.window_s:.2f} s), so the rounds' share cannot be read off"
        )
    return None


MIN_ROUNDS = 10  # fewer counted rounds than this: the remainder is noise and stalls, not rounds


def round_not_a_measurement(counts: DraftCounts, round_s: float) -> str | None:
    """Why a measured round of ``round_s`` (:func:`measured_round_s`) is no measurement, or None.

    The round is the windows' remainder after the plain passes, divided by R. With few rounds,
    every millisecond the plain passes ran slower than the baseline's step (load on the machine)
    lands on those few: a loaded 2-core box gave an n-gram arm a 62-second "round". A round cannot
    be longer than the longest request's whole decode window, and a handful of rounds cannot
    carry the remainder of hundreds of passes."""
    if counts.rounds < MIN_ROUNDS:
        return (
            f"only {counts.rounds:.0f} drafting rounds (fewer than {MIN_ROUNDS}): the decode windows'"
            " remainder after the plain passes is their slowdown and stalls, not rounds"
        )
    if round_s > counts.longest_window_s:
        return (
            f"it would come to {round_s:.2f} s, longer than the longest request's whole decode window"
            f" ({counts.longest_window_s:.2f} s): the plain passes ran slower than the baseline's step"
            " (load on the machine), and that time is not the rounds'"
        )
    return None


def round_for_speedup(
    counts: DraftCounts, step_s: float, speedup: float, replays: float = 0.0, pass_s: float = 0.0
) -> float:
    """The t_round at which :func:`replayed_speedup` equals ``speedup`` (its inverse; may be < 0
    when the speedup is more than the counts allow with free rounds)."""
    return (
        (counts.tokens - counts.requests) * step_s / speedup - _plain_time(counts, step_s, replays, pass_s)
    ) / (counts.rounds)


def _plain_time(counts: DraftCounts, step_s: float, replays: float, pass_s: float) -> float:
    """(S' − R − P) · (t_step + h): the plain passes at the baseline's step plus the speculating
    server's host work per pass."""
    return _plain_passes(counts, replays) * (step_s + pass_s)


def _plain_passes(counts: DraftCounts, replays: float) -> float:
    """S' − R − P: the passes that neither verified a draft nor replayed (never below zero)."""
    return max(0.0, counts.decode_passes - counts.rounds - replays)
