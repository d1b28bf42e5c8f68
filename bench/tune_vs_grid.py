"""`specbench tune` vs the full grid with a fixed protocol, on a lab pair with known acceptance
(prints figures; asserts nothing).

1. The full grid: every candidate of the search space as an arm, ``--repeats`` interleaved
   launches each (a fixed protocol), measured on the real llama-server.
2. The tune race replayed on the grid's own launches: round r of the race reads launch r of the
   arms it still races, so both designs see exactly the same measurements and the only difference
   is which launches each pays for. Requests and serving time are counted from what each consumed
   (the consumed launches' own request durations). Refinement is off: its values are not in the grid.
3. ``--replay`` races again on a grid kept with ``--out`` (no engine); ``--simulate N`` runs
   both designs N times on simulated launches (docs/tune.md, "Simulated").

    flock /tmp/specbench-engine.lock .venv/bin/python bench/tune_vs_grid.py --size tiny
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
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
from specbench.tune.race import initial_state, race, tune_answer
from specbench.tune.rounds import expected_rounds
from specbench.tune.screen import SCREEN_ROUNDS, draft_length, predict_all, screen_picks, screens
from specbench.tune.screenrun import apply_screen, pass_ratio, screen_requests, start_screening, theory_errors
from specbench.tune.silent import never_drafts, silent_step

PROMPTS = [{"id": f"p{i}", "prompt": f"Write note {i}."} for i in range(8)]
PROMPT_TOKENS = 30  # these prompts in the lab pairs' chat template, as llama-server counted them


class Replay:
    """The race's measurement, answered from the grid's records: launch r of each arm raced."""

    def __init__(self, records: list[dict[str, Any]], df: pd.DataFrame, cells: dict[Any, float]) -> None:
        self.records, self.df, self.cells = records, df, cells
        self.used: set[tuple[str, int]] = set()

    @classmethod
    def of_run(cls, run_dir: Path) -> Replay:
        records = RunStore(run_dir).records()
        return cls(records, frame(records), _serving_seconds(records))

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


def _serving_seconds(records: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """Seconds each launch spent serving: its requests' own durations (sent one after another;
    warm-ups included). The cells' timestamps have whole seconds, too coarse for a tiny pair."""
    out: dict[tuple[str, int], float] = {}
    for r in records:
        key = (str(r["arm"]), int(r["repeat"]))
        out[key] = out.get(key, 0.0) + float(r.get("t_end_ns") or 0) / 1e9
    return out


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
    """(drafted, accepted) of one request of ``tokens`` tokens, as llama-server drafts them: the
    first token comes from the prompt's pass, each round drafts min(K, tokens left − 1) (a plain
    step when that is 0) and accepts a prefix ~ min(draft, geometric). K 0 drafts nothing (an
    n-gram lookup that never matches, or m < n)."""
    if k <= 0:
        return 0, 0
    drafted = accepted = 0
    made = 1
    while made < tokens:
        draft = min(k, tokens - made - 1)
        a = min(draft, int(rng.geometric(1 - alpha)) - 1) if alpha < 1 else draft
        drafted, accepted, made = drafted + draft, accepted + a, made + a + 1
    return drafted, accepted


def _walked(alpha: float, k: int, tokens: int, cost: float) -> float:
    """The theory's speedup over an answer of ``tokens`` tokens as llama-server drafts it (the
    last drafts capped by the tokens left; :mod:`specbench.tune.rounds`), flat verify cost:
    the simulated truth, consistent with the draft counts :func:`_draft_rows` draws."""
    return float(expected_rounds(np.array([alpha]), k, tokens, cost, lambda t: 1.0).speedup(1.0, 0.0)[0])


def _drafts(a: argparse.Namespace, c: dict[str, Any]) -> int:
    """K of a simulated candidate's rounds; 0 where llama-server's lookup drafts nothing: m < n
    (ngram-simple never drafts then), or an n-gram pair at α 0 (the lab's tiny pair: no lookup
    ever matched, 0 drafted tokens in all 8 candidates of the real grid)."""
    lookup = str(c.get("method", "")).startswith("ngram")
    return 0 if never_drafts(c) or (lookup and a.alpha == 0) else draft_length(c)


def _sim_rows(
    rng: np.random.Generator,
    a: argparse.Namespace,
    spec: TuneSpec,
    truth: dict[str, float],
    ks: dict[str, int],
) -> list[dict[str, Any]]:
    rows = []
    picks = {candidate_name(c) for c in screen_picks(spec.grid())}
    other = np.random.default_rng([a.seed, 1])
    for r in range(a.repeats):
        for arm, true in truth.items():
            launch = rng.normal(0, a.launch_sd)
            for p in range(a.prompts + 1):  # the first is the warm-up: stored, never compared
                rate = 20 * true * np.exp(launch + rng.normal(0, 0.01))
                row = {"arm": arm, "repeat": r, "prompt_id": f"p{p}", "decode_tok_s": rate}
                if arm in ks:  # the screening reads the server's draft counts (and the prompt's tokens)
                    # the screened candidates' rounds 1–2 from the run's generator, as before; the
                    # others (read only by an extra screening round) from their own
                    own = rng if arm in picks and r < SCREEN_ROUNDS else other
                    row["draft_n"], row["draft_accepted"] = _draft_rows(own, a.alpha, ks[arm], a.max_tokens)
                    row["prompt_tokens"], row["output_tokens"] = PROMPT_TOKENS, a.max_tokens
                rows.append(row)
    return rows


def screen_hook(spec: TuneSpec, df: pd.DataFrame, cost: float, v: Any, say: Any = lambda s: None) -> Any:
    """The screening step of the race, on the replayed (or simulated) round 0."""

    def screen(state: Any) -> None:
        if state.rounds < SCREEN_ROUNDS:
            return
        if silent_step(state, spec.grid(), lambda arm, a, b: screen_requests(df, arm, "baseline", b, a), say):
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


def launch_spread(df: pd.DataFrame) -> str:
    """The grid's launch-to-launch spread: per arm, the sd over its launches of each launch's
    mean log decode rate (what no design can average away with fewer launches)."""
    per_launch = np.log(df["decode_tok_s"].astype(float)).groupby([df["arm"], df["repeat"]]).mean()
    sd = per_launch.groupby(level=0).std(ddof=1).dropna()
    return f"launch-to-launch sd of the grid's arms: median {sd.median():.1%} ({sd.min():.1%}–{sd.max():.1%})"


def _found(df: pd.DataFrame, grid_arm: str, serve: str) -> bool:
    """Whether tune found the grid's answer: the same arm, or — where the grid's own best are
    closer than it can resolve — a candidate the grid measured within the analysis' ±1 % of its
    winner (paired, the grid's launches) that the grid could not separate from it either (its
    95 % interval vs the winner not below the band). Only a candidate counts for a candidate:
    the baseline is found only where the grid answers the baseline."""
    if serve == grid_arm:
        return True
    if "baseline" in (serve, grid_arm):
        return False
    c = stats.speedup(df, serve, grid_arm, n_resamples=500)
    return c.ratio >= 1 - c.threshold and c.verdict != "slower"  # the analysis' own ±1 % band


def simulate(a: argparse.Namespace, spec: TuneSpec, truth: dict[str, float], cost: float) -> None:
    """The same comparison on simulated launches (no engine): per-launch noise ``--launch-sd``,
    per-request noise 1 %, true speedups from the theory, each off by ``--model-error`` (a
    lognormal sd per candidate, so the theory's skips can be wrong); seeded, ``--simulate`` runs.

    Every speculative request carries draft counts drawn from α and the prompt's tokens (the
    screened candidates' rounds 1–2 from the run's generator, as before; the rest, read only by
    an extra screening round, from their own). A candidate llama-server would never let draft —
    ngram-simple with m < n, or an n-gram lookup at α 0 (the real tiny grid: no match, 0 drafted
    tokens in all 8 candidates) — drafts nothing and runs at the baseline's speed less its made-up
    cost, with no model error (there is no prediction to be off).

    Scoring: "found" is tune's answer = the grid's answer, or — since the grid itself often
    cannot tell its best two apart — a candidate that the grid measured within the analysis'
    ±1 % band of its winner and could not separate from it (:func:`_found`). "Inside the
    grid winner's interval" (the looser score of earlier versions) is printed too."""
    rng = np.random.default_rng(a.seed)
    ks = {candidate_name(c): _drafts(a, c) for c in spec.grid()}
    inside = same = found = goal = separated = 0
    fractions: list[float] = []
    skipped: list[int] = []
    again: list[bool] = []
    errs: list[float] = []
    skipped_errs: list[float] = []
    for _ in range(a.simulate):
        off = {"baseline": truth["baseline"]}
        for k, v in truth.items():
            if k != "baseline":  # drafting nothing: no theory to be off (the baseline plus the lookup)
                error = float(np.exp(rng.normal(0, a.model_error)))
                off[k] = v * error if ks[k] else v
        rows = _sim_rows(rng, a, spec, off, ks)
        df = pd.DataFrame(rows)
        records = [{"arm": x["arm"], "repeat": x["repeat"]} for x in rows]
        cmps = {k: stats.speedup(df, k, "baseline", n_resamples=500) for k in truth if k != "baseline"}
        grid_arm, best = _answer_arm(cmps)
        if a.reproduce:  # a second, independent grid on the same truths (its own generator)
            df2 = pd.DataFrame(
                _sim_rows(np.random.default_rng([a.seed, 2, len(fractions)]), a, spec, off, ks)
            )
            cmps2 = {k: stats.speedup(df2, k, "baseline", n_resamples=500) for k in cmps}
            again.append(_found(df, grid_arm, _answer_arm(cmps2)[0]))
        replay = Replay(records, df, {})
        screen = None if a.no_screen else screen_hook(spec, df, cost, lambda t: 1.0)
        state = _race(spec, replay, a.prompts + 1, screen)
        ans = tune_answer(state)
        fraction = replay.spent()[1] / len(records)
        fractions.append(fraction)
        hit_in = ans.serve == grid_arm or (
            grid_arm != "baseline"
            and ans.serve != "baseline"
            and best.ci_low <= cmps[ans.serve].ratio <= best.ci_high
        )
        inside += hit_in
        same += ans.serve == grid_arm
        hit = _found(df, grid_arm, ans.serve)
        found += hit
        goal += hit and fraction <= 1 / 3 + 1e-9
        top = sorted(cmps.values(), key=lambda c: -c.ratio)
        if len(top) > 1:  # can the grid itself tell its winner from its runner-up?
            separated += stats.speedup(df, top[0].arm, top[1].arm, n_resamples=500).verdict == "faster"
        skipped.append(sum(e.reason.startswith("skipped") for e in state.entries))
        errs += [m / p - 1 for _, p, m, screened in theory_errors(state) if not screened]
        skipped_errs += [  # the skipped candidates against the grid's measurement of them
            cmps[e.name].ratio / float(e.screen["point"]) - 1
            for e in state.entries
            if e.screen
            and e.screen.get("point")
            and e.reason.startswith("skipped before launch: predicted")  # the theory's skips
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
        f"{inside / n:.0%}, found (the grid's answer, or a candidate the grid measured within ±1 % of "
        f"its winner and could not separate from it) in {found / n:.0%}; "
        f"found and ≤ ⅓ of the requests in {goal / n:.0%}; the grid told its winner from its "
        f"runner-up in {separated / n:.0%}{err}"
    )
    if again:
        print(
            f"a second full grid (independent launches) found the first grid's answer in {np.mean(again):.0%}"
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
    p.add_argument(
        "--reproduce", action="store_true", help="with --simulate: score a second, independent grid too"
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
            candidate_name(c): (
                _walked(a.alpha, draft_length(c), a.max_tokens, c_ratio) if _drafts(a, c) else 1.0
            )
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
    ans = tune_answer(state)
    won = ans.best.name if ans.best else None
    in_interval = won is not None and grid_best.ci_low <= cmps[won].ratio <= grid_best.ci_high
    grid_requests, grid_seconds = len(replay.records), sum(replay.cells.values())
    launches, requests = replay.spent()
    tune_s = replay.seconds()
    won_ratio = f"grid ratio ×{cmps[won].ratio:.3f}" if won else "-"
    grid_arm = _answer_arm(cmps)[0]
    found = _found(frame(replay.records), grid_arm, ans.serve)  # found: within ±1 %, not separated
    lines = [
        f"lab pair {pair.name}: α {a.alpha}, {a.method}, K {a.k}, "
        f"{'p-min ' + str(a.p_min) if a.method == 'draft' else 'n ' + str(a.ngram_n)}, "
        f"{a.prompts} prompts × {a.max_tokens} tokens",
        f"grid: {len(cmps)} candidates + baseline × {a.repeats} launches = {len(replay.cells)} launches, "
        f"{grid_requests} requests, {grid_seconds:.0f} s serving"
        + ("" if a.replay else f" ({grid_wall:.0f} s wall)"),
        launch_spread(frame(replay.records)),
        f"grid winner {grid_best.arm}: ×{grid_best.ratio:.3f} "
        f"(95 % CI {grid_best.ci_low:.3f}–{grid_best.ci_high:.3f}), {stats.verdict_text(grid_best)}",
        f"tune (replayed on the grid's launches): {launches} launches, {requests} requests "
        f"= {requests / grid_requests:.2f} of the grid's, {tune_s:.0f} s serving "
        f"= {tune_s / max(grid_seconds, 1e-9):.2f}; stopped: {state.stop_reason}",
        f"tune winner {won} ({won_ratio}): "
        + (f"{'inside' if in_interval else 'OUTSIDE'} the grid winner's interval" if won else "none")
        + f"; tune says: {ans.text}",
        "dropped: " + "; ".join(f"{e.name} @{e.dropped_round}" for e in state.entries if e.dropped_round),
        f"answer: grid {grid_arm}, tune {ans.serve} "
        f"({'same' if grid_arm == ans.serve else 'found' if found else 'DIFFERENT'})",
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
