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
        "forward_probe": False,
        "common_args": ["-c", "2048", "-np", "1"],
        "arms": arms,
        "repeats": a.repeats,
        "workload": workload,
    }
    path = folder / "grid.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def simulate(a: argparse.Namespace, spec: TuneSpec, truth: dict[str, float]) -> None:
    """The same comparison on simulated launches (no engine): per-launch noise ``--launch-sd``,
    per-request noise 1 %, true speedups from the theory; ``--simulate`` experiments."""
    rng = np.random.default_rng(0)
    fractions, inside, same = [], 0, 0
    for _ in range(a.simulate):
        rows = []
        for r in range(a.repeats):
            for arm, true in truth.items():
                launch = rng.normal(0, a.launch_sd)
                for p in range(a.prompts + 1):  # the first is the warm-up: stored, never compared
                    rate = 20 * true * np.exp(launch + rng.normal(0, 0.01))
                    rows.append({"arm": arm, "repeat": r, "prompt_id": f"p{p}", "decode_tok_s": rate})
        df = pd.DataFrame(rows)
        records = [{"arm": x["arm"], "repeat": x["repeat"]} for x in rows]
        cmps = {k: stats.speedup(df, k, "baseline") for k in truth if k != "baseline"}
        best = max(cmps.values(), key=lambda c: c.ratio)
        replay = Replay(records, df, {})
        state = race(spec, initial_state(spec, "baseline", lambda c: None), replay, a.prompts + 1)
        won = answer(state).best
        fractions.append(replay.spent()[1] / len(records))
        inside += won is not None and best.ci_low <= cmps[won.name].ratio <= best.ci_high
        same += won is not None and won.name == best.arm
    n = a.simulate
    print(
        f"simulated ({n} experiments, launch sd {a.launch_sd:g}, true speedups from the theory): "
        f"tune used {np.mean(fractions):.2f} of the grid's requests (median {np.median(fractions):.2f}); "
        f"its winner inside the grid winner's interval in {inside / n:.0%}, the same arm in {same / n:.0%}"
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
    a = p.parse_args()
    pair = cached_pair(LabSpec(arch="dense", alpha=a.alpha, size=a.size), lab_dir())
    draft = str(pair / "draft.gguf")
    spec = TuneSpec.model_validate(
        {
            "dimensions": {"draft_model": [draft], "draft_n_max": a.k, "draft_p_min": a.p_min},
            "max_rounds": a.repeats,
            "refine": False,
        }
    )
    if a.simulate:
        c_ratio = (pair / "draft.gguf").stat().st_size / (pair / "target.gguf").stat().st_size
        truth = {"baseline": 1.0} | {
            candidate_name(c): leviathan_speedup(a.alpha, int(c["draft_n_max"]), c_ratio, 1.0)
            * (1 - 0.05 * float(c["draft_p_min"]))  # p-min: a small made-up cost, so candidates differ
            for c in spec.grid()
        }
        simulate(a, spec, truth)
        return
    folder = a.out or Path(tempfile.mkdtemp(prefix="tune-vs-grid-"))
    folder.mkdir(parents=True, exist_ok=True)
    run_dir = folder / "grid"
    t0 = time.monotonic()
    binary = ensure_llama_server(None)
    api.run_matrix(grid_matrix(folder, pair, binary, spec, a), run_dir)
    grid_wall = time.monotonic() - t0

    cmps = comparisons(load_run(run_dir))
    grid_best = max(cmps.values(), key=lambda c: c.ratio)
    replay = Replay.of_run(run_dir)
    target_bytes, draft_bytes = (pair / "target.gguf").stat().st_size, Path(draft).stat().st_size

    def predict(c: dict[str, Any]) -> float:
        return leviathan_speedup(a.alpha, int(c["draft_n_max"]), draft_bytes / target_bytes, 1.0)

    state = race(spec, initial_state(spec, "baseline", predict), replay, a.prompts + 1)
    ans = answer(state)
    won = ans.best.name if ans.best else None
    in_interval = won is not None and grid_best.ci_low <= cmps[won].ratio <= grid_best.ci_high
    grid_requests, grid_seconds = len(replay.records), sum(replay.cells.values())
    launches, requests = replay.spent()
    tune_s = replay.seconds()
    won_ratio = f"grid ratio ×{cmps[won].ratio:.3f}" if won else "-"
    lines = [
        f"lab pair {pair.name}: α {a.alpha}, K {a.k}, p-min {a.p_min}, "
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
    ]
    print("\n".join(lines))
    rows = [{"candidate": k, "grid ×": round(c.ratio, 3), "verdict": c.verdict} for k, c in cmps.items()]
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
