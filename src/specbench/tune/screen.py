"""Screening for ``specbench tune``: measure a few candidates, predict the rest, skip the losers.

Every candidate is its own server launch on the pinned llama-server (per-request speculative
settings are compiled out), so the saving has to come from launching fewer of them. The first
:data:`SCREEN_ROUNDS` rounds of a tune are *screening rounds*: the baseline (with the forward
probe) and, per draft model or speculative type (a *group*), the candidate with the largest K.
From them, per group:

- α, the per-position acceptance, from the server's own drafted/accepted counts per request
  (A = Σ accepted / Σ drafted inverted at the screened K, :func:`alpha_from_acceptance`);
- S*, the screened candidate's speedup (geometric mean over prompts of its decode rate over the
  baseline's, paired by prompt);
- the round overhead o ≥ 0 (in target steps) that makes the theory reproduce S*::

      S(K) = τ(α, K) / (K·c + 1 + λ·(v(K+1) − 1) + o)

  with c the drafter's cost per drafted token (a draft model's share of the target's weight
  bytes; 0 for n-gram lookup), v(T) the forward probe's pass curve (1 without a probe) and
  λ = 1, unless S* is faster than the curve allows with no overhead at all: then o = 0 and λ < 1
  scales the curve's rise down (:func:`_calibrate`).

The interval of every prediction carries the screening's uncertainty: a bootstrap over its
requests (resampled within each launch: α and S*) with a launch-to-launch term on S* — the
spread of the screening launches' own speedups, at least :data:`LAUNCH_SD` (a noisy machine
widens every interval, and nothing is skipped that its launches cannot rule out). The
*leader* is the candidate with the best predicted speedup; any other candidate whose upper bound
on predicted / leader's (paired within each bootstrap replicate, so the calibration shared by a
group cancels) is below 1 − :data:`MARGIN` is dropped before it is launched, and the log says so
with its prediction. The leader and the best other candidate (the runner-up) always race, so
the answer is confirmed by measurement against the baseline across launches.

Dimensions the theory does not model (p-min, n-min, n-gram sizes: their effect depends on the
text) ride with their K: a candidate's prediction is its K's, and it races only if its K
survives, in the theory's order. The race then proceeds as before (:mod:`specbench.tune.race`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.analysis.launches import MIN_LAUNCHES
from specbench.matrix.tuneblock import Candidate, TuneSpec, candidate_name
from specbench.theory.formulas import acceptance_from_alpha
from specbench.tune.rounds import expected_rounds

LAUNCH_SD = 0.05  # the least launch-to-launch sd of a speedup assumed (two launches barely say)
SCREEN_ROUNDS = 2  # launches of the baseline and the screened candidates before the theory predicts
MARGIN = 0.03  # the theory's relative error between K values of one group, allowed before a skip
# The K just below the leader's: how far the constant-α model can under-predict it when acceptance
# falls with draft position (0.95 falling 0.08 a position: the best, K 4 of 12, read ×0.92 of K 8).
NEIGHBOUR_MARGIN = 0.10
BOOT = 300
LEVEL = 0.95
UNMODELLED = ("draft_p_min", "draft_n_min", "ngram_n", "ngram_m")
_ALPHA_GRID = np.linspace(0.0, 0.9999, 4001)
_ALPHA_TABLE = np.linspace(0.0, 0.999, 1000)  # α where the rounds of an answer are walked (rounds.py)


@dataclass(frozen=True)
class Request:
    """One prompt of the screening round: the screened candidate's draft counts and its decode
    rate over the baseline's on the same prompt."""

    drafted: float
    accepted: float
    ratio: float
    launch: int = 0  # the screening round it was measured in
    prompt_tokens: float = math.nan  # the prompt's tokens as the server counted them (NaN: not said)
    generated: float = math.nan  # tokens generated


@dataclass(frozen=True)
class Prediction:
    name: str
    point: float
    low: float
    high: float
    basis: str  # the screened candidate it rests on
    alpha: float
    vs_leader_high: float = float("nan")  # upper bound of predicted / leader's
    decision: str = ""  # leader | runner-up | races | skipped | unpredicted
    note: str = ""

    def label(self) -> str:
        return f"×{self.point:.3f} ({LEVEL * 100:.0f} % {self.low:.3f}–{self.high:.3f})"


def group_key(c: Candidate) -> tuple[tuple[str, str], ...]:
    """What the theory cannot vary inside a group: method and draft model."""
    return tuple((k, str(v)) for k, v in c.items() if k in ("method", "draft_model"))


def _least_active(c: Candidate) -> tuple[float, ...]:
    return (float(c.get("draft_p_min", 0)), float(c.get("draft_n_min", 0)))


def screen_picks(grid: Sequence[Candidate]) -> list[Candidate]:
    """Per group, the candidate with the largest K (unmodelled knobs at their least active:
    lowest p-min / n-min, else the first written)."""
    groups: dict[tuple[tuple[str, str], ...], list[Candidate]] = {}
    for c in grid:
        groups.setdefault(group_key(c), []).append(c)
    picks = []
    for members in groups.values():
        k_max = max(draft_length(c) for c in members)
        top = [c for c in members if draft_length(c) == k_max]
        picks.append(min(top, key=_least_active))
    return picks


def draft_length(c: Candidate) -> int:
    """K, the most tokens one round drafts (0: the engine's default). llama-server's n-gram
    types size their drafts by ``ngram_m`` (--spec-ngram-simple-size-m, --spec-ngram-mod-n-max),
    not by --spec-draft-n-max."""
    if str(c.get("method", "")).startswith("ngram") and "ngram_m" in c:
        return int(c["ngram_m"])
    return int(c.get("draft_n_max", 0))


def _unmodelled_dims(c: Candidate) -> list[str]:
    k_dim = "ngram_m" if str(c.get("method", "")).startswith("ngram") and "ngram_m" in c else "draft_n_max"
    return [k for k in UNMODELLED if k in c and k != k_dim]


def worth_screening(grid: Sequence[Candidate]) -> bool:
    """Screening pays only when some group has candidates beyond its screened one."""
    return len(grid) > len(screen_picks(grid))


@functools.cache
def _acceptance_table(k: int) -> np.ndarray:
    return np.array([acceptance_from_alpha(float(a), k) for a in _ALPHA_GRID])


def _alpha_of(acceptance: np.ndarray, k: int) -> np.ndarray:
    """Vectorised inverse of A(α, K) (monotone in α) on a fine grid."""
    table = _acceptance_table(k)
    return np.asarray(np.interp(np.clip(acceptance, 0.0, table[-1]), table, _ALPHA_GRID))


def _speedup(
    alpha: np.ndarray, k: int, cost: float, v: Callable[[int], float], fit: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    tau = (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
    rise, o = fit
    return np.asarray(tau / (k * cost + 1.0 + rise * (v(k + 1) - 1.0) + o))


def _calibrate(spare: np.ndarray, rise: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(λ, o) with ``spare`` = τ*/S* − K*·c − 1, the screened round's time beyond one step and
    the drafts, in steps. The overhead o ≥ 0 takes what the pass curve's rise leaves (λ = 1).
    A screened speedup faster than the curve allows even with no overhead means the probe's
    prefills overstate the verify pass (module passcurve: errors of 10–20 % measured): the rise
    is scaled by λ ∈ [0, 1] instead, o = 0. Both keep every K's denominator at least one step.
    :func:`_predict_by_rounds` passes a whole answer's spare and rise (per bootstrap replicate)."""
    rise = np.maximum(rise, 0.0)
    o = np.maximum(spare - rise, 0.0)
    lam = np.where(rise > 0, np.clip(spare / np.where(rise > 0, rise, 1.0), 0.0, 1.0), 1.0)
    return np.asarray(lam), o


def _replicates(
    reqs: Sequence[Request], rng: np.random.Generator, boot: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(acceptance A, accepted tokens per generated token after the first — NaN where a
    request's length is not said —, speedup S*) for the point (index 0) and ``boot``
    bootstrap replicates.

    Requests are resampled within each screening launch; S* is the mean over launches of each
    launch's mean log ratio, and carries a launch-to-launch term: the spread of the screening
    launches' own S* (sd of their logs), never less than :data:`LAUNCH_SD`, over √launches."""
    d = np.array([r.drafted for r in reqs])
    a = np.array([r.accepted for r in reqs])
    lr = np.log(np.array([r.ratio for r in reqs]))
    launches = sorted({r.launch for r in reqs})
    of = np.array([launches.index(r.launch) for r in reqs])
    idx = np.arange(len(reqs))[None, :].repeat(boot + 1, 0)
    for j in range(len(launches)):  # resample each launch's requests among themselves
        mine = np.flatnonzero(of == j)
        idx[1:, mine] = rng.choice(mine, (boot, len(mine)))
    acc = a[idx].sum(1) / np.maximum(d[idx].sum(1), 1e-9)
    after_first = np.array([r.generated - 1.0 for r in reqs])
    per_token = a[idx].sum(1) / np.maximum(after_first[idx].sum(1), 1e-9)
    per_launch = np.stack([lr[idx[:, of == j]].mean(1) for j in range(len(launches))], 1)
    spread = float(np.std(per_launch[0], ddof=1)) if len(launches) > 1 else 0.0
    sd = max(LAUNCH_SD, spread) / math.sqrt(len(launches))
    noise = np.concatenate([[0.0], rng.normal(0.0, sd, boot)])
    return acc, per_token, np.exp(per_launch.mean(1) + noise)


def predict_group(
    screened: Candidate,
    members: Sequence[Candidate],
    reqs: Sequence[Request],
    cost: float,
    v: Callable[[int], float],
    rng: np.random.Generator,
    boot: int = BOOT,
) -> dict[str, np.ndarray] | str:
    """Per member: its predicted speedup, point first then ``boot`` replicates; or why not."""
    k_star = draft_length(screened)
    usable = [r for r in reqs if r.ratio > 0 and np.isfinite(r.ratio)]
    if not usable:
        return "the screened candidate has no measured request"
    if sum(r.drafted for r in usable) <= 0:
        return "the screened candidate drafted nothing (the server reports no draft counts)"
    acc, per_token, s_star = _replicates(usable, rng, boot)
    if k_star < 1:
        return {candidate_name(c): s_star for c in members}  # no K to vary: variants ride along
    tokens = [r.generated for r in usable]
    if all(math.isfinite(t) and t >= 3 for t in tokens):  # the answers' lengths: walk their rounds
        return _predict_by_rounds(members, k_star, per_token, s_star, int(np.median(tokens)), cost, v)
    alpha = _alpha_of(acc, k_star)
    tau_star = (1.0 - alpha ** (k_star + 1)) / (1.0 - alpha)
    fit = _calibrate(tau_star / s_star - k_star * cost - 1.0, v(k_star + 1) - 1.0)
    out = {}
    for c in members:
        out[candidate_name(c)] = _speedup(alpha, draft_length(c) or k_star, cost, v, fit)
    out["_alpha"] = alpha
    return out


def _predict_by_rounds(
    members: Sequence[Candidate],
    k_star: int,
    per_token: np.ndarray,
    s_star: np.ndarray,
    tokens: int,
    cost: float,
    v: Callable[[int], float],
) -> dict[str, np.ndarray]:
    """The group's predictions with the answers' own rounds (:mod:`specbench.tune.rounds`): α
    is the one whose rounds at K* — the last drafts of an answer capped as the server caps
    them — accept what the server counted per generated token (so the screened rounds make as
    many tokens as they did), the screened speedup fixes λ and o as :func:`_calibrate` does (o
    paid once a drafting round), and every K is walked over the same answer length — the end of
    an answer caps the last drafts, most at the largest K."""
    table = expected_rounds(_ALPHA_TABLE, k_star, tokens, cost, v)
    alpha = np.asarray(np.interp(per_token, table.accepted / (table.tokens - 1), _ALPHA_TABLE))
    screened = expected_rounds(alpha, k_star, tokens, cost, v)
    spare = (screened.tokens - 1) / s_star - screened.steps  # the rounds' time beyond steps and drafts
    lam, overhead = _calibrate(spare, screened.rise)  # o over the whole answer: paid per drafting round
    o = overhead / np.maximum(screened.drafting, 1e-9)
    out = {}
    walked: dict[int, np.ndarray] = {}
    for c in members:
        k = draft_length(c) or k_star
        if k not in walked:
            walked[k] = expected_rounds(alpha, k, tokens, cost, v).speedup(lam, o)
        out[candidate_name(c)] = walked[k]
    out["_alpha"] = alpha
    return out


def decide(samples: Mapping[str, np.ndarray], margin: float = MARGIN) -> dict[str, Prediction]:
    """Leader, runner-up and skips from every predicted candidate's replicates (index 0: point)."""
    tail = (1 - LEVEL) / 2
    names = [n for n in samples if not n.startswith("_")]
    if not names:
        return {}
    lead = max(names, key=lambda n: float(samples[n][0]))
    out = {}
    for n in names:
        s = samples[n]
        rel = s[1:] / samples[lead][1:]
        out[n] = Prediction(
            n, float(s[0]), float(np.quantile(s[1:], tail)), float(np.quantile(s[1:], 1 - tail)),
            "", float("nan"), float(np.quantile(rel, 1 - tail)),
        )  # fmt: skip
    out[lead] = _with(out[lead], decision="leader")
    for n in names:
        if n != lead:
            out[n] = _with(out[n], decision="skipped" if out[n].vs_leader_high < 1 - margin else "races")
    if not any(p.decision == "races" for p in out.values()) and len(names) > 1:
        second = max((n for n in names if n != lead), key=lambda n: out[n].point)
        out[second] = _with(out[second], decision="runner-up")
    return out


def _with(p: Prediction, **kw: Any) -> Prediction:
    return Prediction(**{**p.__dict__, **kw})


def predict_all(
    grid: Sequence[Candidate],
    data: Mapping[str, Sequence[Request]],
    cost: Callable[[Candidate], float | None],
    v: Callable[[int], float],
    seed: int = 0,
    margin: float = MARGIN,
) -> dict[str, Prediction]:
    """Every candidate's prediction and decision (``unpredicted``: raced as today, with why)."""
    rng = np.random.default_rng(seed)
    samples: dict[str, np.ndarray] = {}
    basis: dict[str, tuple[str, float]] = {}
    out: dict[str, Prediction] = {}
    for pick in screen_picks(grid):
        members = [c for c in grid if group_key(c) == group_key(pick)]
        c_cost = cost(pick)
        why: str | dict[str, np.ndarray]
        if c_cost is None:
            why = "the theory has no drafter cost for this method"
        else:
            why = predict_group(pick, members, data.get(candidate_name(pick), []), c_cost, v, rng)
        if isinstance(why, str):
            nan = float("nan")
            for c in members:
                n = candidate_name(c)
                out[n] = Prediction(
                    n, nan, nan, nan, candidate_name(pick), nan, decision="unpredicted", note=why
                )
            continue
        alpha = float(why.pop("_alpha", np.array([np.nan]))[0])
        samples |= why
        basis |= {n: (candidate_name(pick), alpha) for n in why}
    decided = _keep_neighbours(grid, decide(samples, margin))
    for n, p in decided.items():
        values = next(c for c in grid if candidate_name(c) == n)
        dims = _unmodelled_dims(values)
        note = "; ".join(x for x in (p.note, "unmodelled: " + ", ".join(dims) if dims else "") if x)
        out[n] = _with(p, basis=basis[n][0], alpha=basis[n][1], note=note)
    return out


def _keep_neighbours(grid: Sequence[Candidate], preds: dict[str, Prediction]) -> dict[str, Prediction]:
    """For a draft model, the K just below the predicted leader's, in its group, races even when
    predicted out: the model holds acceptance per position constant at the screened (largest) K, and where
    acceptance falls with position (the usual case for a draft model) it under-predicts smaller K
    by more than :data:`MARGIN` — so the true best, when it is not the leader, sits below it. Only
    the candidate with the leader's other (unmodelled) values, and only within
    :data:`NEIGHBOUR_MARGIN` of the leader: one launch more where it could matter, none where the
    prediction is far below (a membound pair's K 4 at ×0.80 of K 8). Not for n-gram lookup."""
    lead = next((n for n, p in preds.items() if p.decision == "leader"), None)
    if lead is None:
        return preds
    by_name = {candidate_name(c): c for c in grid}
    if str(by_name[lead].get("method", "")).startswith("ngram"):
        return preds  # a lookup's drafts are copies, accepted whole or cut at the first miss
    group = [c for c in grid if group_key(c) == group_key(by_name[lead]) and candidate_name(c) in preds]
    ks = sorted({draft_length(c) for c in group})
    at = ks.index(draft_length(by_name[lead]))
    near = {ks[at - 1]} if at > 0 else set()
    out = dict(preds)
    leader = by_name[lead]
    for c in group:
        n = candidate_name(c)
        same_rest = all(c.get(d) == leader.get(d) for d in _unmodelled_dims(leader))  # p-min, …
        close = out[n].vs_leader_high >= 1 - NEIGHBOUR_MARGIN
        if draft_length(c) in near and same_rest and close and out[n].decision == "skipped":
            out[n] = _with(out[n], decision="races", note="the K below the leader's: raced, not skipped")
    return out


def screens(spec: TuneSpec) -> bool:
    """Whether a tune of ``spec`` opens with screening rounds: asked for, something to predict,
    and room after them for a verdict (MIN_LAUNCHES rounds) on the candidates they admit."""
    room = spec.max_rounds >= SCREEN_ROUNDS + MIN_LAUNCHES
    return spec.screen and room and worth_screening(spec.grid())


def screening_lines(screened: list[str], candidates: int) -> list[str]:
    """The dry run's account of the screening round and of launches per candidate."""
    return [
        f"  screening: rounds 1–2 measure the baseline (with the forward probe) and {', '.join(screened)}; "
        f"the theory calibrated on it predicts the other {candidates - len(screened)} candidates and skips "
        "those whose predicted upper bound is below the leader's; the rest race in its order",
        "  each candidate needs its own launch: the pinned llama-server ignores per-request speculative "
        "settings (compiled out); the screening checks that with a probe request and the answer says "
        "what it found",
    ]
