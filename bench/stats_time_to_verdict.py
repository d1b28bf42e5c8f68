"""Time to verdict on the real llama-server (prints figures; asserts nothing): for designed effects
on lab models, the launches and requests ``repeats: auto`` (budget 10 launches) uses vs a fixed
protocol of 10 launches, and the verdict each reaches (goal: at most half on average, same verdicts).

Design: *replay*. Each effect is measured once with 10 fixed launch pairs; the fixed verdict is the
run's own (95 %, all 10 pairs), and the adaptive verdict replays the adaptive rule on the prefix of
launch pairs 1 … n for n = 3 … 10 (the same statistic, ``stats.speedup`` on decode tok/s at the
nominal confidence 1 − α′ of :func:`specbench.analysis.sequential.nominal_alpha` for a budget of
10), stopping at the first n whose verdict is not undetermined. With one arm and its baseline per
run this is what
``repeats: auto`` would do: the adaptive executor runs the same cells launch pair by launch pair in
the same planned ABBA order and looks after each pair at exactly this prefix, so the launches it
would make are the first n of the fixed run. Replay lets one set of launches serve both designs
(no second machine-noise draw between them) and halves the run time on a 2-core machine.

    flock /tmp/specbench-engine.lock .venv/bin/python bench/stats_time_to_verdict.py --keep runs/ttv
    .venv/bin/python bench/stats_time_to_verdict.py --replay runs/ttv --looks   # re-analyse, no engine

llama-server runs with one thread (``--threads 1``): with llama.cpp's default (every core) its
threads meet at a barrier after each operation, and on a shared 2-core machine a preempted thread
stalls every token (single requests of the tiny model at 11 tok/s next to 11 000). That put the
sd of one launch pair's mean log-ratio at 0.8–1.0 on the tiny model (0.2 with one thread), and the
launches any design needs grow with its square.

``--looks`` prints every look's interval (at 1 − α′) next to the fixed protocol's, which shows why
a design did or did not stop: the launch noise (one launch pair's sd), the pooled/t fit, and where
the interval sits against the ±1 % band.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from specbench import api
from specbench.analysis import launches as L
from specbench.analysis import load_run, stats
from specbench.analysis.launches import MIN_LAUNCHES
from specbench.analysis.sequential import ALPHA, nominal_alpha
from specbench.cli.demo import ensure_llama_server
from specbench.lab.check import lab_dir
from specbench.lab.make import LabSpec, cached_pair
from specbench.run.adaptive import METRIC

BUDGET = 10


def effects() -> list[tuple[str, LabSpec, int | None]]:
    """(label, lab pair, draft K or None for an A/A arm)."""
    return [
        ("loss: dense tiny α0 K8", LabSpec(arch="dense", alpha=0.0), 8),
        ("A/A: dense tiny α0.8", LabSpec(arch="dense", alpha=0.8), None),
        ("win: dense membound α0.9 K4", LabSpec(arch="dense", alpha=0.9, size="membound"), 4),
        ("win: dense membound α0.8 K4", LabSpec(arch="dense", alpha=0.8, size="membound"), 4),
    ]


def measure(folder: Path, pair: Path, binary: Path, k: int | None, args: argparse.Namespace) -> Path:
    """One run with BUDGET fixed launch pairs of the arm "arm" vs "baseline"."""
    (folder / "prompts.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "prompt": f"Write note {i}."}) + "\n" for i in range(args.prompts))
    )
    arm = (
        []
        if k is None
        else ["-md", str(pair / "draft.gguf"), "--spec-type", "draft-simple", "--spec-draft-n-max", str(k)]
    )
    body: dict[str, object] = {
        "model": str(pair / "target.gguf"),
        "engine_binary": str(binary),
        "common_args": ["-c", "2048", "-np", "1", *(["-t", str(args.threads)] if args.threads else [])],
        "arms": {"baseline": [], "arm": arm},
        "repeats": BUDGET,
        "forward_probe": False,
        "workload": {"suite": "natural", "max_tokens": args.max_tokens, "prompt_file": "prompts.jsonl"},
    }
    (folder / "matrix.yaml").write_text(yaml.safe_dump(body))
    api.run_matrix(folder / "matrix.yaml", folder / "run")
    return folder / "run"


def decide(run: Path, looks: bool = False) -> dict[str, tuple[int, int, str]]:
    """{design: (launch pairs, requests, verdict)} for the fixed protocol and the adaptive replay;
    ``looks`` prints each look's interval at 1 − α′ and at 95 %."""
    df = load_run(run).df
    df = df[df["arm"].isin(["arm", "baseline"])]
    fixed = stats.speedup(df, "arm", "baseline", METRIC, confidence=1 - ALPHA)
    out: dict[str, tuple[int, int, str]] = {"fixed": (BUDGET, len(df), fixed.verdict)}
    a = nominal_alpha(BUDGET)
    for n in range(MIN_LAUNCHES, BUDGET + 1):
        part = df[df["repeat"] < n]
        try:
            c = stats.speedup(part, "arm", "baseline", METRIC, confidence=1 - a)
        except ValueError:
            continue
        if looks:
            print(f"    {_look(part, c)}")
        if "adaptive" not in out and (c.verdict != "undetermined" or n == BUDGET):
            out["adaptive"] = (n, len(part), c.verdict)
            if not looks:
                break
    return out


def _look(part: pd.DataFrame, c: stats.Comparison) -> str:
    """One look: the adaptive interval (model bounds, not the narrowed printed ones), the 95 %
    one, the per-launch-pair sd and whether the fit pooled launch and request noise."""
    pairs = stats._pairs(part[part["arm"] == "arm"], part[part["arm"] == "baseline"], METRIC)
    f, f95 = L.fit(pairs, c.confidence), L.fit(pairs, 1 - ALPHA)
    bounds = f"{math.exp(f.lo):.3f}–{math.exp(f.hi):.3f}"
    return (
        f"n={c.n_launches:2d} ×{c.ratio:.3f} {stats.ci_label(c)} {bounds} ({c.verdict}); "
        f"95 % {math.exp(f95.lo):.3f}–{math.exp(f95.hi):.3f}; launch-pair sd {f.per_launch_sd:.3f}, "
        f"{'pooled' if f.pooled else 't'} {f.dof:.0f} dof; launch means "
        + " ".join(f"{math.exp(x):.2f}" for x in pairs.groupby("launch")["d"].mean())
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="llama-server -t; 0: llama.cpp's own choice")
    ap.add_argument("--keep", type=Path, help="copy each effect's run to KEEP/<n> for --replay")
    ap.add_argument("--replay", type=Path, help="re-analyse runs saved by --keep; launch nothing")
    ap.add_argument("--looks", action="store_true", help="print every look's interval")
    args = ap.parse_args()
    binary = None if args.replay else ensure_llama_server(None)
    started = time.monotonic()
    print(
        f"replay of the adaptive rule (looks {MIN_LAUNCHES}…{BUDGET}, α′ {nominal_alpha(BUDGET):.4f}) "
        f"on the prefixes of one fixed {BUDGET}-launch run per effect; "
        + (
            f"runs saved in {args.replay}"
            if args.replay
            else f"{args.prompts} prompts, {args.max_tokens} tokens"
        )
        + (f", {args.threads} thread(s)" if args.threads and not args.replay else "")
    )
    print("| effect | fixed: launches / requests / verdict | adaptive: same | ratio |")
    print("|---|---|---|---|")
    ratios, designed, same = [], [], 0
    for i, (label, spec, k) in enumerate(effects()):
        if args.looks:
            print(f"  {label}: looks (adaptive interval at 1 − α′)")
        if args.replay:
            res = decide(args.replay / str(i), args.looks)
        else:
            assert binary is not None
            with tempfile.TemporaryDirectory() as tmp:
                pair = cached_pair(spec, lab_dir())
                run = measure(Path(tmp), pair, binary, k, args)
                if args.keep:
                    shutil.copytree(run, args.keep / str(i), dirs_exist_ok=True)
                res = decide(run, args.looks)
        fl, fr, fv = res["fixed"]
        al, ar, av = res["adaptive"]
        ratios.append(al / fl)
        if k is not None:  # an A/A arm can only stop as "equivalent": it shows the verdicts agree
            designed.append(al / fl)
        same += fv == av
        ratio = f"{al / fl:.2f} (requests {ar / fr:.2f})"
        print(f"| {label} | {fl} / {fr} / {fv} | {al} / {ar} / {av} | {ratio} |", flush=True)
    print(
        f"mean ratio adaptive/fixed {sum(ratios) / len(ratios):.2f} "
        f"(designed effects only {sum(designed) / len(designed):.2f}); same verdict in {same}/{len(ratios)} "
        f"({(time.monotonic() - started) / 60:.1f} min)"
    )


if __name__ == "__main__":
    main()
