"""``specbench tune --dry-run``: what a tune will do, and roughly how long it will take, before
anything is launched.

Per workload: the candidates in the order they enter the race (with the theory's prediction and
their arguments), which of them the budget admits to the first round (the rule of
:func:`specbench.tune.race.admitted_at_start`: a verdict, three rounds with the baseline, must be paid
for every candidate racing; the others wait for launches that drops free), the rounds, launches
and requests the race may spend (a range: at least three rounds of everything admitted, at most
``max_rounds`` — plus a refinement stage — or the budget), and the wall time of that range by
:func:`specbench.run.plan.estimate` (prefill counted, an earlier run as basis where there is one).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specbench.analysis.launches import MIN_LAUNCHES
from specbench.engines.base import Engine
from specbench.engines.tuning import candidate_args
from specbench.errors import StoreError
from specbench.matrix.config import Matrix, RequestSpec, WorkloadSpec
from specbench.matrix.tuneblock import NUMERIC, Budget, Candidate, TuneSpec, candidate_name
from specbench.run.plan import Estimate, estimate, prompt_tokens
from specbench.store.redact import mask_args
from specbench.tune.race import RaceState, admitted_at_start, initial_state, look_confidence
from specbench.tune.screen import SCREEN_ROUNDS, screen_picks, screening_lines, screens
from specbench.tune.silent import STATELESS_LOOKUP
from specbench.workloads.suites import build_requests


@dataclass(frozen=True)
class CandidatePlan:
    name: str
    predicted: float | None
    args: list[str]


@dataclass(frozen=True)
class WorkloadPlan:
    """One workload's race as planned: counts are per workload (the budget is per workload)."""

    workload: str
    measured: int  # measured requests per launch
    warmups: int  # warm-up requests per launch
    candidates: list[CandidatePlan]
    order: str
    admitted: list[str]
    launches: tuple[int, int]  # the race's least and most, refinement included in the most
    requests: tuple[int, int]
    refine: str  # what the refinement stage may add, or why there is none
    estimate: Estimate
    resumed_rounds: int = 0  # rounds a --resume finds already done
    screening: tuple[str, ...] = ()  # the candidates round 1 measures before the theory predicts the rest

    def lines(self) -> list[str]:
        n, admitted = len(self.candidates), set(self.admitted)
        out = [
            f"workload {self.workload}: {self.measured} measured + {self.warmups} warm-up requests "
            "per launch",
            f"  candidates ({n}, in race order: {self.order}):",
        ]
        for i, c in enumerate(self.candidates, 1):
            predicted = f"×{c.predicted:.2f} predicted" if c.predicted is not None else "no prediction"
            start = "races from round 1" if c.name in admitted else "waits (budget)"
            if self.screening:
                start = "screened in rounds 1–2" if c.name in self.screening else "predicted after round 2"
            out.append(f"    {i}. {c.name} ({predicted}; {start}): {shlex.join(c.args)}")
        waiting = [c.name for c in self.candidates if c.name not in admitted]
        if self.screening:
            out += screening_lines(list(self.screening), n)
        elif waiting:
            out.append(
                f"  the budget admits {len(self.admitted)} of {n} candidates at the start (a verdict is "
                f"{MIN_LAUNCHES} rounds with the baseline); waiting, measured only if drops free launches: "
                + ", ".join(waiting)
            )
        else:
            out.append(f"  the budget admits all {n} candidates from the first round")
        (l_lo, l_hi), (r_lo, r_hi) = self.launches, self.requests
        out.append(f"  launches: {l_lo} to {l_hi}; requests: {r_lo} to {r_hi} (warm-ups included)")
        out.append(f"  refinement: {self.refine}")
        if self.resumed_rounds:
            out.append(
                f"  --resume: {self.resumed_rounds} rounds already done; the counts are for a fresh start"
            )
        out.append(f"  estimated wall time: {self.estimate.text()} ({self.estimate.basis})")
        return out


@dataclass(frozen=True)
class TunePlan:
    out: Path
    baseline_command: list[str]
    budget: Budget
    max_rounds: int
    confidence: float
    workloads: list[WorkloadPlan]

    def lines(self) -> list[str]:
        budget = (
            ", ".join(f"{v:g} {k}" for k, v in self.budget.model_dump().items() if v is not None)
            or "none (max_rounds bounds the race)"
        )
        return [
            f"tune plan for {self.out} (dry run: nothing launched)",
            f"budget per workload: {budget}; max_rounds {self.max_rounds} per stage; drops at "
            f"{self.confidence * 100:.1f} % confidence per look",
            f"baseline (speculation off): {shlex.join(self.baseline_command)}",
            *(line for w in self.workloads for line in w.lines()),
        ]


def plan_workload(
    matrix: Matrix,
    spec: TuneSpec,
    name: str,
    workload: WorkloadSpec,
    base: Path,
    out: Path,
    saved: RaceState | None,
    predict: Callable[[Candidate], float | None],
    probe: bool = True,
) -> WorkloadPlan:
    """The plan of one workload's race (``predict``: the theory's per-candidate speedup)."""
    state = initial_state(spec, matrix.baseline, predict)
    wl_matrix = matrix.model_copy(update={"workload": workload, "workloads": (), "adaptive": False})
    requests, warmup, _ = build_requests(wl_matrix, base)
    per_launch = len(requests) + len(warmup)
    admitted = admitted_at_start(spec, state, per_launch)
    arms = len(admitted) + 1
    least = MIN_LAUNCHES * arms if admitted else 0
    race_most = spec.max_rounds * arms
    numeric = sum(1 for d in spec.dimensions if d in NUMERIC)
    refine_most = spec.max_rounds * (2 + 2 * numeric) if spec.refine and numeric else 0
    most = _capped(spec.budget, race_most + refine_most, per_launch)
    screened = tuple(candidate_name(c) for c in screen_picks(spec.grid())) if screens(spec) else ()
    if screened:  # the screening rounds: baseline + screened; then a leader and a runner-up
        least = SCREEN_ROUNDS * (len(screened) + 1) + (MIN_LAUNCHES - SCREEN_ROUNDS) * 3
        if all(c.get("method") == STATELESS_LOOKUP for c in screen_picks(spec.grid())):
            least = SCREEN_ROUNDS * (len(screened) + 1)  # a lookup drafting nothing answers all
    least = min(least, most)
    return WorkloadPlan(
        workload=name,
        measured=len(requests),
        warmups=len(warmup),
        candidates=[
            CandidatePlan(e.name, e.predicted, list(candidate_args(matrix.engine, e.values)))
            for e in state.entries
        ],
        order=state.order_reason,
        admitted=admitted,
        launches=(least, most),
        requests=(least * per_launch, most * per_launch),
        refine=_refine_text(spec, numeric),
        estimate=_estimate(
            wl_matrix, spec.budget, (least, most), arms, (requests, warmup), out / name, probe
        ),
        resumed_rounds=saved.rounds if saved else 0,
        screening=screened,
    )


def _candidate(matrix: Matrix, name: str, predicted: float | None, values: Candidate) -> CandidatePlan:
    return CandidatePlan(name, predicted, mask_args(list(candidate_args(matrix.engine, values))))


def _capped(budget: Budget, launches: int, per_launch: int) -> int:
    if budget.launches is not None:
        launches = min(launches, budget.launches)
    if budget.requests is not None:
        launches = min(launches, budget.requests // max(per_launch, 1))
    return launches


def _refine_text(spec: TuneSpec, numeric: int) -> str:
    if not spec.refine:
        return "none (refine: false)"
    if not numeric:
        return "none (no numeric dimension to refine)"
    dims = f"{numeric} numeric dimension{'s' if numeric > 1 else ''}"
    return (
        f"midpoints around the leader on {dims}, only if the race finds a leader and what is left of "
        "the budget pays for a verdict on them (counted in the most above)"
    )


def _estimate(
    matrix: Matrix,
    budget: Budget,
    launches: tuple[int, int],
    arms: int,
    reqs: tuple[tuple[RequestSpec, ...], tuple[RequestSpec, ...]],
    out: Path,
    probe: bool,
) -> Estimate:
    """Wall time of the least and the most launches; a minutes budget caps the most (the race
    starts no round after it, and a started round finishes)."""
    each = [*reqs[0], *reqs[1]]
    tokens, prompt = sum(r.max_tokens for r in each), sum(prompt_tokens(r) for r in each)

    def seconds(n: int) -> Estimate:
        return estimate(matrix, n, n * tokens, out, probe, n * prompt)

    high = seconds(launches[1])
    if high.seconds is None:
        return high
    cap = f"from {MIN_LAUNCHES} rounds of the admitted candidates to max_rounds, refinement or the budget"
    top = high.seconds
    if budget.minutes is not None:
        one_round = seconds(arms).seconds or 0.0
        top = min(top, budget.minutes * 60 + one_round)
        cap += f" (budget minutes {budget.minutes:g}: no round starts after it)"
    low = min(seconds(launches[0]).seconds or 0.0, top)
    return Estimate(top, high.basis, low, cap)


def saved_states(out: Path, resume: bool) -> dict[str, RaceState]:
    """The race states a ``--resume`` would continue; refuses what ``tune`` would refuse."""
    path = out / "tune.json"
    if not path.exists():
        return {}
    if not resume:
        raise StoreError(f"{out} already holds a tune: pass --resume to continue it, or another --out")
    try:
        log = json.loads(path.read_text())
        return {k: RaceState.from_dict(v["state"]) for k, v in (log.get("workloads") or {}).items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise StoreError(f"{path}: not a tune log this version can read ({exc})") from None


def make_tune_plan(
    matrix_path: Path,
    matrix: Matrix,
    spec: TuneSpec,
    engine: Engine,
    out: Path,
    *,
    resume: bool = False,
    probe: bool = True,
) -> TunePlan:
    """What ``specbench tune`` would do with ``matrix`` (loaded from ``matrix_path``) on ``engine``;
    launches nothing. Refuses an existing tune without ``--resume``; the caller
    (:func:`specbench.api.plan_tune`, the entry point) has already refused what the tune block or
    the engine would."""
    from specbench.tune.execute import SERVE_PORT, predictor, tune_workloads

    saved = saved_states(out, resume)
    predict = predictor(matrix, spec)
    workloads = [
        plan_workload(matrix, spec, name, w, matrix_path.parent, out, saved.get(name), predict, probe)
        for name, w in tune_workloads(matrix, spec, matrix_path.parent).items()
    ]
    command = engine.command(matrix.model, matrix.arm_args(matrix.baseline), matrix.host, SERVE_PORT)
    return TunePlan(
        out, mask_args(command), spec.budget, spec.max_rounds, look_confidence(spec, matrix.alpha), workloads
    )
