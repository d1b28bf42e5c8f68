"""The race behind ``specbench tune``: spend launches on contenders only.

Candidates enter in the theory's order (highest predicted speedup first) and are measured in
rounds: one launch of the baseline and of every candidate still racing, interleaved (the order
reverses every round, as ABBA does for ``run``). Each round is an ordinary repeat of the run
directory, so candidates measured in the same round are paired by prompt and launch exactly like
an arm and its baseline. From the third round a candidate has
(:data:`~specbench.analysis.launches.MIN_LAUNCHES`)
it is compared with the leader (the best point estimate over the baseline) by the launch-level
estimator, at the sequential rule's nominal confidence (:func:`specbench.analysis.sequential.nominal_alpha`):

- interval of candidate / leader entirely below ×0.99 → dropped, "slower than the leader";
- interval inside ×0.99–×1.01 → dropped, "equivalent to the leader" (a tie: the leader keeps
  racing; the answer says "ship either" and names the one drafting fewer tokens);
- otherwise it races on.

The race ends when one candidate is left, when every candidate left is decided slower than the
baseline ("no setting wins"), after ``max_rounds`` rounds, or before a round the budget cannot
pay for. With ``refine``, values between the leader and its grid neighbours then join a second
stage against the leader. Everything decided is logged (``events``) so an interrupted tune
resumes from its state and the run directory's records.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from copy import deepcopy
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from specbench.analysis.launches import MIN_LAUNCHES
from specbench.analysis.sequential import ALPHA, nominal_alpha
from specbench.analysis.stats import Comparison, ci_label
from specbench.matrix.tuneblock import Budget, Candidate, TuneSpec, candidate_name, neighbours
from specbench.tune.progress import Where, round_line
from specbench.tune.screen import draft_length


class RaceMeasure(Protocol):
    """What the race needs from the world: run one round, compare two arms, say what was spent."""

    def run_round(self, round_no: int, arms: list[str]) -> None: ...

    def compare(self, arm: str, other: str, confidence: float) -> Comparison | None: ...

    def spent(self) -> tuple[int, int]:
        """(launches, requests) used so far in this workload."""
        ...

    def failed(self, arm: str) -> str | None:
        """Why ``arm``'s engine failed (None: it did not)."""
        ...


@dataclass
class Entry:
    """One candidate: its values, its arm, the theory's prediction and what happened to it."""

    name: str
    values: Candidate
    predicted: float | None = None
    joined: int = 0  # first round it was measured in
    status: str = "waiting"  # waiting (not admitted yet) | racing | dropped
    dropped_round: int | None = None
    reason: str = ""
    measured: dict[str, Any] | None = None  # last comparison with the baseline
    screen: dict[str, Any] | None = None  # the screening round's prediction (specbench.tune.screen)


@dataclass
class RaceState:
    baseline: str
    entries: list[Entry]
    rounds: int = 0
    stage: str = "race"  # screen (the first rounds: specbench.tune.screen) | race | refine | done
    stage_start: int = 0
    stop_reason: str = ""
    minutes: float = 0.0
    order_reason: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)

    def racing(self) -> list[Entry]:
        return [e for e in self.entries if e.status == "racing"]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RaceState:
        entries = [Entry(**e) for e in d["entries"]]
        return cls(**{**d, "entries": entries})


def initial_state(spec: TuneSpec, baseline: str, predict: Callable[[Candidate], float | None]) -> RaceState:
    """Candidates in the theory's order; grid order (stated) where it cannot predict them all."""
    entries = [Entry(candidate_name(c), c, predict(c)) for c in spec.grid()]
    if entries and all(e.predicted is not None for e in entries):
        entries.sort(key=lambda e: -(e.predicted or 0.0))
        why = "theory's predicted speedup, highest first"
    else:
        why = (
            "grid order: the theory cannot predict every candidate "
            "(set tune.acceptance, or tune a method it models)"
        )
    return RaceState(baseline=baseline, entries=entries, order_reason=why)


def look_confidence(spec: TuneSpec, alpha: float = ALPHA) -> float:
    """Per-look confidence: the Pocock level for looks 3 … max_rounds at the matrix's ``alpha``
    (docs/statistics.md)."""
    return 1 - nominal_alpha(spec.max_rounds, alpha)


def _fits(budget: Budget, spent: tuple[int, int], minutes: float, launches: int, requests: int) -> str | None:
    """Why the next round does not fit the budget (None: it does)."""
    if budget.launches is not None and spent[0] + launches > budget.launches:
        return f"budget: next round needs {launches} launches, {budget.launches - spent[0]} left"
    if budget.requests is not None and spent[1] + requests > budget.requests:
        return f"budget: next round needs {requests} requests, {budget.requests - spent[1]} left"
    if budget.minutes is not None and minutes >= budget.minutes:
        return f"budget: {budget.minutes:g} minutes spent"
    return None


def race(
    spec: TuneSpec,
    state: RaceState,
    measure: RaceMeasure,
    prompts: int,
    save: Callable[[RaceState], None] = lambda s: None,
    say: Callable[[str], None] = lambda s: None,
    screen: Callable[[RaceState], None] | None = None,
    alpha: float = ALPHA,
) -> RaceState:
    """Run (or resume) the race until it stops; ``save`` is called after every round and decision.
    A state in stage ``screen`` runs its screening rounds first (``screen`` is called after each and
    says when it has enough), then ``screen`` predicts and skips
    (:func:`specbench.tune.screenrun.apply_screen`) and the race goes on with the survivors."""
    started, spent_before = time.monotonic(), state.minutes
    conf = look_confidence(spec, alpha)
    while state.stage != "done":
        if state.stage == "screen" and state.rounds:
            if screen is None:
                state.stage = "race"
            else:
                screen(state)  # moves the race on once it has its screening rounds
            if state.stage != "screen":
                save(state)
        _admit(state, _afford(spec, state, measure, prompts), say)
        racing = state.racing()
        stop = _stop_reason(spec, state)
        if stop is None:
            arms = [state.baseline, *(e.name for e in racing)]
            arms = arms if state.rounds % 2 == 0 else arms[::-1]
            minutes = spent_before + (time.monotonic() - started) / 60
            stop = _fits(spec.budget, measure.spent(), minutes, len(arms), len(arms) * prompts)
        if stop is not None:
            if not _next_stage(spec, state, stop, say, _afford(spec, state, measure, prompts)):
                state.stage, state.stop_reason = "done", stop
                _event(state, "stop", why=stop)
                say(f"stop after {state.rounds} rounds: {stop}")
            save(state)
            continue
        at = Where(state.rounds, state.stage, state.rounds - state.stage_start,
                   [e.status for e in state.entries], minutes)  # fmt: skip
        say(round_line(spec, at, len(arms), measure.spent(), prompts))
        measure.run_round(state.rounds, arms)
        state.rounds += 1
        state.minutes = spent_before + (time.monotonic() - started) / 60
        _look(state, measure, conf, say)
        save(state)
    return state


def _admit(state: RaceState, afford: Callable[[int], bool], say: Callable[[str], None]) -> None:
    """Admit waiting candidates in the theory's order while the budget pays for a verdict on
    every candidate racing (three rounds of them and the baseline): with a tight budget the
    predicted best race first and the rest join as drops free their launches."""
    if state.stage != "race":
        return
    for e in [e for e in state.entries if e.status == "waiting"]:
        if not afford(len(state.racing()) + 2):
            break
        e.status, e.joined = "racing", state.rounds
        if state.rounds:
            _event(state, "admit", candidate=e.name)
            say(f"admit {e.name} at round {state.rounds}")
    waiting = [e.name for e in state.entries if e.status == "waiting"]
    if waiting and not state.rounds:  # said before the first launch: the user sees what is left out
        say(
            f"the budget admits {len(state.entries) - len(waiting)} of {len(state.entries)} candidates; "
            f"waiting (measured only if drops free launches): {', '.join(waiting)}"
        )


class _Unspent:
    """A measure before anything ran: what a dry run asks of the admission rule."""

    def run_round(self, round_no: int, arms: list[str]) -> None:
        raise AssertionError("a plan launches nothing")

    def compare(self, arm: str, other: str, confidence: float) -> Comparison | None:
        return None

    def spent(self) -> tuple[int, int]:
        return 0, 0

    def failed(self, arm: str) -> str | None:
        return None


def admitted_at_start(spec: TuneSpec, state: RaceState, prompts: int) -> list[str]:
    """The candidates the race's first round admits (``prompts``: requests per launch, warm-ups
    included), by the same rule as :func:`race`: a dry run shows what the budget pays for."""
    trial = RaceState.from_dict(deepcopy(state.to_dict()))
    _admit(trial, _afford(spec, trial, _Unspent(), prompts), lambda s: None)
    return [e.name for e in trial.racing()]


def _stop_reason(spec: TuneSpec, state: RaceState) -> str | None:
    racing = state.racing()
    waiting = sum(e.status == "waiting" for e in state.entries)  # _admit could not pay for them
    if not racing:
        return "budget: cannot pay for a verdict on any candidate" if waiting else "no candidate left"
    if state.rounds - state.stage_start >= spec.max_rounds:
        return f"max_rounds {spec.max_rounds} reached in stage {state.stage}"
    ready = [e for e in racing if e.measured and e.measured["n_launches"] >= MIN_LAUNCHES]
    if len(racing) == 1 and ready:
        unreached = f"; {waiting} never admitted (budget)" if waiting else ""
        return f"one candidate left ({racing[0].name}){unreached}"
    if (
        ready
        and len(ready) == len(racing)
        and all(e.measured and e.measured["verdict"] == "slower" for e in ready)
    ):
        return "every candidate left is slower than the baseline: no setting wins"
    return None


def _afford(spec: TuneSpec, state: RaceState, measure: RaceMeasure, prompts: int) -> Callable[[int], bool]:
    """Whether the budget pays for MIN_LAUNCHES rounds of ``n`` arms (a refinement stage's least)."""

    def afford(n: int) -> bool:
        launches, requests = measure.spent()
        after = (launches + (MIN_LAUNCHES - 1) * n, requests + (MIN_LAUNCHES - 1) * n * prompts)
        return _fits(spec.budget, after, state.minutes, n, n * prompts) is None

    return afford


def _next_stage(
    spec: TuneSpec, state: RaceState, why: str, say: Callable[[str], None], afford: Callable[[int], bool]
) -> bool:
    """Refinement around the leader, once, if the race found one and the budget pays for a
    verdict's worth of rounds (a candidate added and never measured would be a hole in the run)."""
    if state.stage != "race" or not spec.refine or why.startswith("budget") or "no setting" in why:
        return False
    lead = leader(state)
    if lead is None:
        return False
    added = neighbours(spec, lead.values, [e.values for e in state.entries])
    new = [Entry(candidate_name(c), c, None, joined=state.rounds, status="racing") for c in added]
    if new and not afford(1 + len(state.racing()) + len(new)):  # the baseline, all still racing, the new
        _event(state, "no_refine", why="the budget cannot pay for a verdict on the refinement")
        return False
    if not new:
        return False
    state.entries += new
    state.stage, state.stage_start = "refine", state.rounds
    _event(state, "refine", leader=lead.name, added=[e.name for e in new], after=why)
    say(f"refine around {lead.name}: {', '.join(e.name for e in new)}")
    return True


def leader(state: RaceState) -> Entry | None:
    """The racing candidate with the best measured speedup over the baseline (among those with a
    verdict's worth of rounds when there are any: two launches should not lead a race)."""
    measured = [e for e in state.racing() if e.measured]
    settled = [e for e in measured if e.measured and e.measured["n_launches"] >= MIN_LAUNCHES]
    measured = settled or measured
    return max(measured, key=lambda e: float(e.measured["ratio"]) if e.measured else 0.0, default=None)


def _look(state: RaceState, measure: RaceMeasure, conf: float, say: Callable[[str], None]) -> None:
    for e in state.racing():
        failed = measure.failed(e.name)
        if failed:
            _drop(state, e, f"its engine failed: {failed}", say)
            continue
        c = measure.compare(e.name, state.baseline, conf)
        e.measured = _brief(c) if c is not None else None
    lead = leader(state)
    if lead is None:
        return
    for e in state.racing():
        if e is lead or state.rounds - e.joined < MIN_LAUNCHES:
            continue
        c = measure.compare(e.name, lead.name, conf)
        if c is None or c.verdict not in ("slower", "equivalent"):
            continue
        what = "slower than" if c.verdict == "slower" else "equivalent to"
        why = (
            f"{what} the leader {lead.name}: ×{c.ratio:.3f} ({ci_label(c)} CI {c.ci_low:.3f}–{c.ci_high:.3f})"
        )
        _drop(state, e, why, say)


def _drop(state: RaceState, e: Entry, why: str, say: Callable[[str], None]) -> None:
    e.status, e.dropped_round, e.reason = "dropped", state.rounds, why
    _event(state, "drop", candidate=e.name, why=why)
    say(f"drop {e.name} after {state.rounds} rounds: {why}")


def _brief(c: Comparison) -> dict[str, Any]:
    return {"ratio": c.ratio, "ci_low": c.ci_low, "ci_high": c.ci_high, "verdict": c.verdict,
            "n_launches": c.n_launches, "confidence": c.confidence}  # fmt: skip


def _event(state: RaceState, kind: str, **info: Any) -> None:
    state.events.append({"round": state.rounds, "event": kind, **info})


@dataclass(frozen=True)
class TuneAnswer:
    """What a user can paste: the arm to serve, the best candidate and whether it beats the
    baseline, and the runner-up. Only a candidate shown faster than the baseline is served: when
    none is, the answer is the baseline (speculation off) and the best candidate's interval is
    information, not a recommendation."""

    best: Entry | None
    beats_baseline: str  # yes | no | undetermined
    runner_up: Entry | None
    text: str
    serve: str = ""  # the arm to serve: the best candidate when beats_baseline is yes, else the baseline

    @property
    def serves_baseline(self) -> bool:
        return self.beats_baseline != "yes"


KEEP_OFF = "keep speculation off (serve the baseline)"


def tune_answer(state: RaceState) -> TuneAnswer:
    best = leader(state)
    if best is None or best.measured is None:
        silent = _silent_text(state)
        if silent:
            return TuneAnswer(None, "no", None, f"no setting wins: {KEEP_OFF}; {silent}", state.baseline)
        return TuneAnswer(
            None, "undetermined", None, f"no candidate was measured: {KEEP_OFF}", state.baseline
        )
    m = best.measured
    verdict = str(m["verdict"])
    beats = {"faster": "yes", "slower": "no", "equivalent": "no"}.get(verdict, "undetermined")
    others = [e for e in state.entries if e is not best and e.measured]
    runner = max(others, key=lambda e: float(e.measured["ratio"]) if e.measured else 0.0, default=None)
    interval = f"×{m['ratio']:.3f} ({m['confidence'] * 100:.1f} % CI {m['ci_low']:.3f}–{m['ci_high']:.3f})"
    if beats == "yes":
        text = f"best {best.name}: {interval} over the baseline{_tie_text(state, best)}"
        return TuneAnswer(best, beats, runner, text, best.name)
    if beats == "no":
        how = "slower than" if verdict == "slower" else "equivalent to"
        text = (
            f"no setting wins: {KEEP_OFF}; the best candidate, {best.name}, is {how} the baseline: {interval}"
        )
    else:
        text = (
            f"no setting is shown faster: {KEEP_OFF}; the best candidate, {best.name}, {interval}, "
            "is undetermined vs the baseline"
        )
    return TuneAnswer(best, beats, runner, text, state.baseline)


def _tie_text(state: RaceState, best: Entry) -> str:
    """Candidates the race dropped as equivalent to the best (the whole interval of candidate /
    best inside the analysis' ±1 % band): either can be shipped, and the one drafting the fewest
    tokens per round spends the least on drafts."""
    tied = [e for e in state.entries if e.reason.startswith(f"equivalent to the leader {best.name}:")]
    if not tied:
        return ""
    cheaper = min([best, *tied], key=lambda e: draft_length(e.values))
    names = ", ".join(e.name for e in tied)
    return (
        f"; equivalent within ±1 %: {names} — ship either, the cheaper one ({cheaper.name}: "
        f"K {draft_length(cheaper.values)}) drafts the fewest tokens"
    )


def _silent_text(state: RaceState) -> str:
    """Every candidate dropped, some for drafting nothing (:mod:`specbench.tune.silent`): why."""
    silent = sum(ev.get("event") == "silent" for ev in state.events)
    if not silent or any(e.status != "dropped" for e in state.entries):
        return ""
    n = len(state.entries)
    who = "every candidate drafts" if silent == n else f"{silent} of {n} candidates draft"
    rest = "" if silent == n else "; the others were dropped"
    return f"{who} nothing on this workload{rest} (below: why)"


def unmeasured(state: RaceState) -> list[Entry]:
    """Candidates the race never measured against the baseline: never admitted (status
    ``waiting``: the budget could not pay for a verdict on them as well), or admitted and never
    measured (an engine that failed at once: dropped, with its reason)."""
    return [e for e in state.entries if e.measured is None]
