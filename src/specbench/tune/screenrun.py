"""The screening (:mod:`specbench.tune.screen`) on a race and a run directory: start it, read the
screening rounds' requests and probes, apply its predictions to the race's entries, and say what
it did (the answer's lines, the theory's error on candidates both predicted and measured)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import pandas as pd

from specbench.analysis.launches import MIN_LAUNCHES
from specbench.analysis.metrics import frame
from specbench.analysis.predicted.setup import forward_curve
from specbench.engines.specprobe import describe
from specbench.matrix.tuneblock import Candidate, TuneSpec, candidate_name
from specbench.theory.passcurve import PassCurve
from specbench.tune.race import Entry, RaceState
from specbench.tune.screen import SCREEN_ROUNDS, Prediction, Request, predict_all, screen_picks
from specbench.tune.silent import silent_step


def start_screening(state: RaceState, grid: Sequence[Candidate]) -> None:
    """The screening rounds race only the screened candidates; the others wait for its verdict."""
    picks = {candidate_name(c) for c in screen_picks(grid)}
    for e in state.entries:
        e.status = "racing" if e.name in picks else "waiting"
    state.stage = "screen"
    _event(state, "screen_start", screened=sorted(picks))


def apply_screen(state: RaceState, preds: Mapping[str, Prediction], say: Callable[[str], None]) -> None:
    """Record every prediction on its entry, drop the skipped ones (before any launch of theirs)
    and put the waiting candidates in the theory's order (unpredicted ones after, as written);
    the race then goes on (stage ``race``)."""
    state.stage = "race"
    lead = next((p.name for p in preds.values() if p.decision == "leader"), None)
    skipped = []
    for e in state.entries:
        p = preds.get(e.name)
        if p is None:
            continue
        e.screen = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(p).items()
        }
        if p.decision == "skipped" and e.status != "dropped":
            how = "skipped before launch" if e.status == "waiting" else "dropped after the screening"
            e.status, e.dropped_round = "dropped", state.rounds
            e.reason = (
                f"{how}: predicted {p.label()}, at most ×{p.vs_leader_high:.3f} of "
                f"the leader {lead}'s (theory calibrated on {p.basis}'s screening rounds)"
            )
            skipped.append(e.name)
            say(f"skip {e.name}: {e.reason}")

    def rank(e: Entry) -> float:
        point = e.screen.get("point") if e.screen else None
        return -float(point) if point is not None else math.inf

    state.entries.sort(key=rank)  # stable: unpredicted candidates keep their written order
    _event(state, "screen", leader=lead, skipped=skipped)
    kept = [e.name for e in state.entries if e.status != "dropped"]
    if kept:
        say(f"screened: leader {lead}; racing in the theory's order: {', '.join(kept)}")
    else:
        say("screened: no candidate left to race")


def theory_errors(state: RaceState) -> list[tuple[str, float, float, bool]]:
    """(name, predicted, measured, screened) for every candidate both predicted and measured over
    at least MIN_LAUNCHES launches: measured / predicted − 1 is the theory's error."""
    out = []
    for e in state.entries:
        screen, m = e.screen or {}, e.measured or {}
        point = screen.get("point")
        if point is not None and m.get("n_launches", 0) >= MIN_LAUNCHES:
            out.append((e.name, float(point), float(m["ratio"]), screen.get("basis") == e.name))
    return out


def screen_lines(state: RaceState) -> list[str]:
    """The answer's account of the screening: measured vs predicted, and how far to trust it."""
    predicted = [e for e in state.entries if e.screen]
    if not predicted:
        return []
    basis = sorted({str(e.screen["basis"]) for e in predicted if e.screen and e.screen.get("basis")})
    silent = {str(ev["candidate"]) for ev in state.events if ev.get("event") == "silent"}
    skipped = [e.name for e in predicted if e.reason.startswith("skipped before launch")]
    quiet = sum(n in silent for n in skipped)  # known to draft nothing (specbench.tune.silent)
    theory = [e for e in predicted if e.screen and e.screen.get("point") is not None]
    measured = [e.name for e in state.entries if e.measured]
    probe = next((ev["text"] for ev in state.events if ev.get("event") == "spec_probe"), None)
    lines = [
        f"  screening: measured {', '.join(basis)} with the baseline in rounds 1–2; the theory predicted "
        f"{len(theory) - len(set(basis) & {e.name for e in theory})} more and skipped "
        f"{len(skipped) - quiet} of them before launch"
        + (f"; {quiet} more known to draft nothing were skipped" if quiet else "")
        + (" (below: not measured)" if skipped else ""),
        *[
            f"  screening round {int(ev['round']) + 1}: {', '.join(ev['picks'])} with the baseline (the "
            "other n values of a lookup that drafted nothing)"
            for ev in state.events
            if ev.get("event") == "silent_screen"
        ],
        f"  measured: {', '.join(measured) or 'none'}",
        *([f"  {probe}"] if probe else []),
    ]
    errs = theory_errors(state)
    if errs:
        parts = [f"{n} {m / p - 1:+.1%}{' (screened)' if s else ''}" for n, p, m, s in errs]
        lines.append("  theory's error (measured / predicted − 1): " + ", ".join(parts))
    return lines


def screen_requests(
    df: pd.DataFrame, arm: str, baseline: str, rounds: int = SCREEN_ROUNDS, first: int = 0
) -> list[Request]:
    """The requests of ``arm`` in rounds ``first`` … ``rounds`` − 1 (default: the screening
    rounds), paired by prompt and round with the baseline's."""
    out = []
    for repeat in range(first, rounds):
        rnd = df[df["repeat"] == repeat]
        base = rnd[rnd["arm"] == baseline].groupby("prompt_id")["decode_tok_s"].mean()
        for _, row in rnd[rnd["arm"] == arm].iterrows():
            b = base.get(row["prompt_id"])
            drafted = float(row.get("draft_n", math.nan))
            accepted = float(row.get("draft_accepted", math.nan))
            if b and b > 0 and math.isfinite(drafted) and math.isfinite(accepted):  # NaN: no counts
                ratio = float(row["decode_tok_s"]) / float(b)
                sizes = {"prompt_tokens": _num(row, "prompt_tokens"), "generated": _num(row, "output_tokens")}
                out.append(Request(drafted, accepted, ratio, repeat, **sizes))
    return out


def _num(row: Any, key: str) -> float:
    value = row.get(key)
    return float(value) if value is not None else math.nan


def pass_ratio(cells: Sequence[Mapping[str, Any]], baseline: str, step_s: float) -> Callable[[int], float]:
    """v(T) from the baseline's forward probes (1 when there are none: a flat curve)."""
    curve = forward_curve(
        c["forward_probe"] for c in cells if c.get("arm") == baseline and c.get("forward_probe")
    )
    if not curve or min(curve) > 1 or step_s <= 0:
        return lambda t: 1.0
    return PassCurve.from_probe(curve, step_s).ratio


def drafter_cost(target: str, c: Candidate) -> float | None:
    """Drafter cost per drafted token in target steps: a draft model's share of the target's
    weight bytes (CPU decode reads every weight once per token), 0 for n-gram lookup, None for
    methods the theory has no cost for (mtp, eagle3)."""
    method = str(c.get("method", "draft"))
    if method.startswith("ngram"):
        return 0.0
    if method in ("draft", "draft-simple") and "draft_model" in c and os.path.isfile(target):
        return os.path.getsize(str(c["draft_model"])) / os.path.getsize(target)
    return None


def _event(state: RaceState, kind: str, **info: Any) -> None:
    state.events.append({"round": state.rounds, "event": kind, **info})


def screen_from_run(
    spec: TuneSpec, records: Callable[[], list[dict[str, Any]]], cells: Callable[[], list[dict[str, Any]]],
    model: str, say: Callable[[str], None],
) -> Callable[[RaceState], None]:  # fmt: skip
    """The race's screening step on a run directory's round 0 (``records``/``cells``: the store's)."""

    def screen(state: RaceState) -> None:
        if state.rounds < SCREEN_ROUNDS:
            return
        df = frame(records())
        if silent_step(
            state, spec.grid(), lambda arm, a, b: screen_requests(df, arm, state.baseline, b, a), say
        ):
            return  # one more screening round (the other n values of a lookup that drafted nothing)
        base = df[(df["arm"] == state.baseline) & (df["repeat"] < SCREEN_ROUNDS)]["decode_tok_s"].median()
        v = pass_ratio(cells(), state.baseline, 1.0 / base if base and base > 0 else 0.0)
        picks = screen_picks(spec.grid())
        data = {candidate_name(c): screen_requests(df, candidate_name(c), state.baseline) for c in picks}
        preds = predict_all(spec.grid(), data, lambda c: drafter_cost(model, c), v)
        probes = [c["spec_probe"] for c in cells() if isinstance(c.get("spec_probe"), dict)]
        probe = next((p for p in probes if p.get("honoured") is not None), probes[0] if probes else None)
        _event(state, "spec_probe", result=probe, text=describe(probe))
        say(describe(probe))
        apply_screen(state, preds, say)

    return screen
