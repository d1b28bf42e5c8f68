"""`specbench tune` vs the full grid with a fixed protocol, on a lab pair with known acceptance
(prints figures; asserts nothing).

1. The full grid: every candidate of the search space as an arm, ``--repeats`` interleaved
   launches each (a fixed protocol), measured on the real llama-server.
2. The tune race replayed on the grid's own launches: round r of the race reads launch r of the
   arms it still races, so both designs see exactly the same measurements and the only difference
   is which launches each pays for. Requests and wall time are counted from what each consumed
   (wall time: the consumed cells' own durations). Refinement is off: its values are not in the grid.
3. With ``--live``, ``specbench tune`` itself runs too (its own launches, budget = the grid's).

    flock /tmp/specbench-engine.lock .venv/bin/python bench/tune_vs_grid.py --size tiny
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from specbench import api
from specbench.analysis import comparisons, load_run, stats
from specbench.analysis.metrics import frame
from specbench.cli.demo import ensure_llama_server
from specbench.engines.tuning import candidate_args
from specbench.lab.check import lab_dir
from specbench.lab.make import LabSpec, cached_pair
from specbench.matrix.tuneblock import TuneSpec, candidate_name
from specbench.store.rundir import RunStore
from specbench.theory.formulas import leviathan_speedup
from specbench.tune.race import answer, initial_state, race
from specbench.tune.screen import SCREEN_ROUNDS, draft_length, predict_all, screen_picks, screens
from specbench.tune.screenrun import apply_screen, pass_ratio, screen_requests, start_screening, theory_errors

PROMPTS = [{"id": f"p{i}", "prompt": f"Write note {i}."} for i in range(8)]


class Replay:
    """The race's measurement, answered from the grid's records: launch r of each arm raced."""

    def __init__(self, records: list[dict[str, Any]], df: pd.DataFrame, cells: dict[Any, float]) -> None:
        self.records, self.df, self.cells = records, df, cells
        self.used: set[tuple[str, int]] = set()

    @classmethod
    def of_run(cls, run_dir: Path) -> Replay:
        store = RunStore(run_dir)
        records = store.records()
        return cls(records, frame(records), {(c["arm"], c["repeat"]): _seconds(c) for c in store.cells()})

    def run_round(self, round_no: int, arms: list[str]) -> None:
        self.used |= {(a, round_no) for a in arms}

    def compare(self, arm: str, other: str, confidence: float) -> stats.Comparison | None:
        keep = [(a, r) in self.used for a, r in zip(self.df["arm"], self.df["repeat"], strict=True)]
        try:
            return stats.speedup(self.df[keep], arm, other, "decode_tok_s", confidence=confidence)
        except ValueError:
            return None

    def spent(self) -> tuple[int, int]:
        return len(self.used), sum((r["arm"], r["repeat"]) in self.used for r in self.records)

    def failed(self, arm: str) -> str | None:
        return None

    def seconds(self) -> float:
        return sum(self.cells.get(k, 0.0) for k in self.used)


def _seconds(cell: dict[str, Any]) -> float:
    start, end = cell.get("started_at"), cell.get("ended_at")
    if not start or not end:
        return 0.0
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def grid_matrix(folder: Path, pair: Path, binary: Path, spec: TuneSpec, a: argparse.Namespace) -> Path:
    arms: dict[str, list[str]] = {"baseline": []}
    for c in spec.grid():
        arms[candidate_name(c)] = list(candidate_args("llamacpp", c))
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS[: a.prompts]))
    workload = {
        "suite": "natural",
        "max_tokens": a.max_tokens,
        "prompts": a.prompts,
        "prompt_file": "prompts.jsonl",
        "ignore_eos": True,
    }
    body = {
        "model": str(pair / "target.gguf"),
        "engine_binary": str(binary),
        "forward_probe": True,  # the baseline's pass curve, for the screening
        "common_args": ["-c", "2048", "-np", "1"],
        "arms": arms,
        "repeats": a.repeats,
        "workload": workload,
    }
    path = folder / "grid.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def _answer_arm(cmps: dict[str, stats.Comparison]) -> tuple[str, stats.Comparison]:
    """The grid's answer: its best candidate when shown faster than the baseline, else the baseline."""
    best = max(cmps.values(), key=lambda c: c.ratio)
    return (best.arm if best.verdict == "faster" else "baseline"), best


def _draft_rows(rng: np.random.Generator, alpha: float, k: int, tokens: int) -> tuple[int, int]:
    """(drafted, accepted) of one request: rounds of K drafts, accepted prefix ~ min(K, geometric)."""
    drafted = accepted = made = 0
    while made < tokens:
        a = min(k, int(rng.geometric(1 - alpha)) - 1) if alpha < 1 else k
        drafted, accepted, made = drafted + k, accepted + a, made + a + 1
    return drafted, accepted


def _sim_rows(
    rng: np.random.Generator, a: argparse.Namespace, truth: dict[str, float], ks: dict[str, int]
) -> list[dict[str, Any]]:
    rows = []
    for r in range(a.repeats):
        for arm, true in truth.items():
            launch = rng.normal(0, a.launch_sd)
            for p in range(a.prompts + 1):  # the first is the warm-up: stored, never compared
                rate = 20 * true * np.exp(launch + rng.normal(0, 0.01))
                row = {"arm": arm, "repeat": r, "prompt_id": f"p{p}", "decode_tok_s": rate}
                if arm in ks and r < SCREEN_ROUNDS:  # the screening reads the server's draft counts
                    row["draft_n"], row["draft_accepted"] = _draft_rows(rng, a.alpha, ks[arm], a.max_tokens)
                rows.append(row)
    return rows


def screen_hook(spec: TuneSpec, df: pd.DataFrame, cost: float, v: Any, say: Any = lambda s: None) -> Any:
    """The screening step of the race, on the replayed (or simulated) round 0."""

    def screen(state: Any) -> None:
        if state.rounds < SCREEN_ROUNDS:
            return
        data = {
            candidate_name(c): screen_requests(df, candidate_name(c), "baseline")
            for c in screen_picks(spec.grid())
        }
        preds = predict_all(spec.grid(), data, lambda c: cost, v)
        apply_screen(state, preds, say)

    return screen


def _race(spec: TuneSpec, replay: Replay, prompts: int, screen: Any) -> Any:
    state = initial_state(spec, "baseline", lambda c: None)
    if screen is not None and screens(spec):
        start_screening(state, spec.grid())
    return race(spec, state, replay, prompts, screen=screen)


def simulate(a: argparse.Namespace, spec: TuneSpec, truth: dict[str, float], cost: float) -> None:
    """The same comparison on simulated launches (no engine): per-launch noise ``--launch-sd``,
    per-request noise 1 %, true speedups from the theory, each off by ``--model-error`` (a
    lognormal sd per candidate, so the theory's skips can be wrong); seeded, ``--simulate`` runs."""
    rng = np.random.default_rng(a.seed)
    ks = {candidate_name(c): draft_length(c) for c in screen_picks(spec.grid())}
    fractions, inside, same, goal, skipped = [], 0, 0, 0, []
    errs: list[float] = []
    skipped_errs: list[float] = []
    for _ in range(a.simulate):
        off = {
            k: v * float(np.exp(rng.normal(0, a.model_error))) if k != "baseline" else v
            for k, v in truth.items()
        }
        rows = _sim_rows(rng, a, off, ks)
        df = pd.DataFrame(rows)
        records = [{"arm": x["arm"], "repeat": x["repeat"]} for x in rows]
        cmps = {k: stats.speedup(df, k, "baseline", n_resamples=500) for k in truth if k != "baseline"}
        grid_arm, best = _answer_arm(cmps)
        replay = Replay(records, df, {})
        screen = None if a.no_screen else screen_hook(spec, df, cost, lambda t: 1.0)
        state = _race(spec, replay, a.prompts + 1, screen)
        ans = answer(state)
        fraction = replay.spent()[1] / len(records)
        fractions.append(fraction)
        hit_in = ans.serve == grid_arm or (
            grid_arm != "baseline"
            and ans.serve != "baseline"
            and best.ci_low <= cmps[ans.serve].ratio <= best.ci_high
        )
        inside += hit_in
        same += ans.serve == grid_arm
        goal += hit_in and fraction <= 1 / 3 + 1e-9
        skipped.append(sum(e.reason.startswith("skipped") for e in state.entries))
        errs += [m / p - 1 for _, p, m, screened in theory_errors(state) if not screened]
        skipped_errs += [  # the skipped candidates against the grid's measurement of them
            cmps[e.name].ratio / float(e.screen["point"]) - 1
            for e in state.entries
            if e.screen and e.screen.get("point") and e.reason.startswith("skipped")
        ]
    n = a.simulate
    err = (
        f"; theory error on raced unscreened candidates: median {np.median(np.abs(errs)):.1%}" if errs else ""
    )
    if skipped_errs:
        err += f", on the skipped ones (vs the grid): median {np.median(np.abs(skipped_errs)):.1%}"
    print(
        f"simulated ({n} runs, seed {a.seed}, launch sd {a.launch_sd:g}, model error {a.model_error:g}, "
        f"screening {'off' if a.no_screen else 'on'}): tune used {np.mean(fractions):.2f} of the grid's "
        f"requests (max {np.max(fractions):.2f}); skipped {np.mean(skipped):.1f} candidates on average; "
        f"answer = the grid's answer in {same / n:.0%}, inside the grid winner's interval in "
        f"{inside / n:.0%}; "
        f"both that and ≤ ⅓ of the requests in {goal / n:.0%}{err}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="tiny", choices=["tiny", "small", "membound"])
    p.add_argument("--alpha", type=float, default=0.8)
    p.add_argument("--k", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--p-min", type=float, nargs="+", default=[0.0, 0.8])
    p.add_argument("--repeats", type=int, default=6, help="the grid's fixed launches per arm")
    p.add_argument("--prompts", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--out", type=Path, default=None, help="keep the grid run here (default: a temp dir)")
    p.add_argument("--simulate", type=int, default=0, help="simulated experiments instead of the engine")
    p.add_argument("--launch-sd", type=float, default=0.03, help="with --simulate: launch-to-launch sd")
    p.add_argument("--model-error", type=float, default=0.0, help="with --simulate: the theory's error sd")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--replay", action="store_true", help="replay the race on the grid kept in --out")
    p.add_argument(
        "--force-screen", action="store_true", help="screen even where tune would not (max_rounds < 5)"
    )
    p.add_argument("--no-screen", action="store_true", help="race every candidate (the tune before #32)")
    p.add_argument("--method", default="draft", choices=["draft", "ngram-simple"])
    p.add_argument("--ngram-n", type=int, nargs="+", default=[2, 4], help="with ngram-simple: match sizes")
    a = p.parse_args()
    pair = cached_pair(LabSpec(arch="dense", alpha=a.alpha, size=a.size), lab_dir())
    draft = str(pair / "draft.gguf")
    if a.method == "draft":
        dims: dict[str, Any] = {"draft_model": [draft], "draft_n_max": a.k, "draft_p_min": a.p_min}
        c_ratio = (pair / "draft.gguf").stat().st_size / (pair / "target.gguf").stat().st_size
    else:  # llama-server sizes n-gram drafts by ngram_m (the K); the match size n is not modelled
        dims, c_ratio = {"method": [a.method], "ngram_m": a.k, "ngram_n": a.ngram_n}, 0.0
    spec = TuneSpec.model_validate({"dimensions": dims, "max_rounds": a.repeats, "refine": False})
    if a.simulate:
        truth = {"baseline": 1.0} | {
            candidate_name(c): leviathan_speedup(a.alpha, draft_length(c), c_ratio, 1.0)
            * (1 - 0.05 * float(c.get("draft_p_min", 0)))  # p-min: a small made-up cost, so candidates differ
            * (1 - 0.01 * float(c.get("ngram_n", 0)))  # and so does the n-gram match size
            for c in spec.grid()
        }
        simulate(a, spec, truth, c_ratio)
        return
    folder = a.out or Path(tempfile.mkdtemp(prefix="tune-vs-grid-"))
    run_dir = folder / "grid"
    t0 = time.monotonic()
    if not a.replay:  # --replay: the race again on a grid measured before (no engine)
        folder.mkdir(parents=True, exist_ok=True)
        binary = ensure_llama_server(None)
        api.run_matrix(grid_matrix(folder, pair, binary, spec, a), run_dir)
    grid_wall = time.monotonic() - t0

    cmps = comparisons(load_run(run_dir))
    grid_best = max(cmps.values(), key=lambda c: c.ratio)
    replay = Replay.of_run(run_dir)

    def predict(c: dict[str, Any]) -> float:
        return leviathan_speedup(a.alpha, draft_length(c), c_ratio, 1.0)

    screen = None
    if not a.no_screen:
        df = frame(replay.records)
        base = df[(df["arm"] == "baseline") & (df["repeat"] < SCREEN_ROUNDS)]["decode_tok_s"].median()
        cells = [c for c in RunStore(run_dir).cells() if c["repeat"] < SCREEN_ROUNDS]
        v = pass_ratio(cells, "baseline", 1.0 / base)
        screen = screen_hook(spec, df, c_ratio, v, print)
    state = initial_state(spec, "baseline", predict)
    if screen is not None and (screens(spec) or a.force_screen):
        start_screening(state, spec.grid())
    state = race(spec, state, replay, a.prompts + 1, screen=screen)
    ans = answer(state)
    won = ans.best.name if ans.best else None
    in_interval = won is not None and grid_best.ci_low <= cmps[won].ratio <= grid_best.ci_high
    grid_requests, grid_seconds = len(replay.records), sum(replay.cells.values())
    launches, requests = replay.spent()
    tune_s = replay.seconds()
    won_ratio = f"grid ratio ×{cmps[won].ratio:.3f}" if won else "-"
    lines = [
        f"lab pair {pair.name}: α {a.alpha}, {a.method}, K {a.k}, "
        f"{'p-min ' + str(a.p_min) if a.method == 'draft' else 'n ' + str(a.ngram_n)}, "
        f"{a.prompts} prompts × {a.max_tokens} tokens",
        f"grid: {len(cmps)} candidates + baseline × {a.repeats} launches = {len(replay.cells)} launches, "
        f"{grid_requests} requests, {grid_seconds:.0f} s serving ({grid_wall:.0f} s wall)",
        f"grid winner {grid_best.arm}: ×{grid_best.ratio:.3f} "
        f"(95 % CI {grid_best.ci_low:.3f}–{grid_best.ci_high:.3f}), {stats.verdict_text(grid_best)}",
        f"tune (replayed on the grid's launches): {launches} launches, {requests} requests "
        f"= {requests / grid_requests:.2f} of the grid's, {tune_s:.0f} s serving "
        f"= {tune_s / max(grid_seconds, 1e-9):.2f}; stopped: {state.stop_reason}",
        f"tune winner {won} ({won_ratio}): {'inside' if in_interval else 'OUTSIDE'} the grid winner's "
        f"interval; tune says: {ans.text}",
        "dropped: " + "; ".join(f"{e.name} @{e.dropped_round}" for e in state.entries if e.dropped_round),
        f"answer: grid {_answer_arm(cmps)[0]}, tune {ans.serve} "
        f"({'same' if _answer_arm(cmps)[0] == ans.serve else 'DIFFERENT'})",
    ]
    print("\n".join(lines))
    by_name = {e.name: e for e in state.entries}
    rows = []
    for k, c in cmps.items():
        sc = by_name[k].screen or {}
        point = sc.get("point")
        rows.append(
            {
                "candidate": k,
                "grid ×": round(c.ratio, 3),
                "verdict": c.verdict,
                "predicted ×": round(point, 3) if point is not None else None,
                "interval": f"{sc['low']:.3f}–{sc['high']:.3f}" if point is not None else "",
                "decision": sc.get("decision", ""),
                "error": f"{c.ratio / point - 1:+.1%}" if point else "",
            }
        )
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
