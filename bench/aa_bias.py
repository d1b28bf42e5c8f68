"""A/A bias on the real llama-server (prints figures; asserts nothing): run the same lab target as
two or three identical arms in N runs and pool the launch pairs' mean log-ratios over all runs.

Issue 27 found five two-arm A/A runs all below ×1 (pooled ×0.887 over 30 launch pairs) on a busy
machine. This script repeats that design and records, per cell, what could explain an asymmetry:
the cell's position in the run, the arm that ran before it, whether an interim look (``repeats:
auto``) ran just before it, the CPU time specbench itself used while the cell ran, the server's
CPU time and its own decode rate (llama.cpp ``timings.predicted_per_second``). ``--load`` starts a
controlled load for the duration (``mem``: a memory-bandwidth hog streaming 256 MB arrays;
``cpu``: a busy loop; ``both``).

    flock /tmp/specbench-engine.lock .venv/bin/python bench/aa_bias.py --runs 5 --load both
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy import stats as sps

from specbench import api
from specbench.analysis.metrics import frame
from specbench.cli.demo import ensure_llama_server
from specbench.lab.check import lab_dir
from specbench.lab.make import LabSpec, cached_pair
from specbench.run import adaptive, runner
from specbench.store.rundir import RunStore

PROMPTS = [{"id": f"p{i}", "prompt": f"Write note {i}."} for i in range(5)]


def matrix_body(
    pair: Path, binary: Path, arms: list[str], base: str, args: argparse.Namespace
) -> dict[str, Any]:
    return {
        "model": str(pair / "target.gguf"),
        "engine_binary": str(binary),
        "common_args": ["-c", "2048", "-np", "1", "-t", str(args.threads)],
        "arms": {a: [] for a in arms},
        "baseline": base,
        "repeats": "auto" if args.auto else args.repeats,
        "max_repeats": args.repeats,
        "forward_probe": False,
        "warmup": 1,
        "workload": {"suite": "natural", "max_tokens": args.max_tokens, "prompt_file": "prompts.jsonl"},
    }


@contextmanager
def instrumented(trace: list[dict[str, Any]]) -> Any:
    """Record, per cell served, its wall time, specbench's own CPU seconds and the server's
    (reaped children), and the time of every interim look; the product code is unchanged."""
    serve, look = runner.Runner.run_cell, adaptive.AdaptiveExecutor._look

    def run_cell(self: runner.Runner, cell: Any, todo: Any) -> None:
        t0, w0 = os.times(), time.monotonic()
        serve(self, cell, todo)
        t1 = os.times()
        trace.append(
            {"kind": "cell", "arm": cell.arm, "repeat": cell.repeat, "wall": time.monotonic() - w0,
             "own_cpu": t1.user + t1.system - t0.user - t0.system,
             "server_cpu": t1.children_user + t1.children_system - t0.children_user - t0.children_system}
        )  # fmt: skip

    def looked(self: Any, *a: Any, **k: Any) -> None:
        w0 = time.monotonic()
        look(self, *a, **k)
        trace.append({"kind": "look", "wall": time.monotonic() - w0})

    runner.Runner.run_cell, adaptive.AdaptiveExecutor._look = run_cell, looked  # type: ignore[method-assign]
    try:
        yield
    finally:
        runner.Runner.run_cell, adaptive.AdaptiveExecutor._look = serve, look  # type: ignore[method-assign]


def one_run(folder: Path, body: dict[str, Any]) -> dict[str, Any]:
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    (folder / "matrix.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
    trace: list[dict[str, Any]] = []
    with instrumented(trace):
        api.run_matrix(folder / "matrix.yaml", folder / "run")
    store = RunStore(folder / "run")
    records = store.records()
    df = frame(records)
    server = {
        (r["arm"], r["repeat"], r["prompt_id"]): (r.get("timings") or {}).get("predicted_per_second")
        for r in records
        if not r.get("warmup") and not r.get("error")
    }
    base = body["baseline"]
    medians = df.groupby(["arm", "repeat", "prompt_id"])["decode_tok_s"].median()
    metric: dict[tuple[str, int, str], float] = {k: float(v) for k, v in medians.items()}  # type: ignore[misc]
    pairs = []
    for arm in body["arms"]:
        for rep in sorted({k[1] for k in metric if k[0] == arm}) if arm != base else ():
            keys = [(p["id"], (arm, rep, p["id"]), (base, rep, p["id"])) for p in PROMPTS]
            d = [
                math.log(metric[a] / metric[b])
                for _, a, b in keys
                if metric.get(a, 0) > 0 and metric.get(b, 0) > 0
            ]
            ds = [math.log(sa / sb) for _, a, b in keys if (sa := server.get(a)) and (sb := server.get(b))]
            if d:
                pairs.append({"arm": arm, "repeat": int(rep), "d": float(np.mean(d)),
                              "d_server": float(np.mean(ds)) if ds else None})  # fmt: skip
    cells = []
    for i, t in enumerate(x for x in trace if x["kind"] == "cell"):
        rates = [v for (a, r, _), v in server.items() if a == t["arm"] and r == t["repeat"] and v]
        cells.append({**t, "position": i, "server_rate": statistics.median(rates) if rates else None})
    order = store.manifest().get("order")
    return {"pairs": pairs, "cells": cells, "trace": trace, "order": order}


def pooled(values: list[float]) -> dict[str, float]:
    """exp(mean) and its 95 % t interval over independent launch-pair values."""
    d = np.asarray(values, dtype=float)
    n, mean = d.size, float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    half = float(sps.t.ppf(0.975, n - 1)) * se if n > 1 else math.nan
    p = float(2 * sps.t.sf(abs(mean) / se, n - 1)) if n > 1 and se > 0 else math.nan
    return {"n": n, "ratio": math.exp(mean), "lo": math.exp(mean - half), "hi": math.exp(mean + half),
            "p": p, "sd": float(d.std(ddof=1)) if n > 1 else math.nan}  # fmt: skip


def report(results: list[dict[str, Any]], base: str) -> dict[str, Any]:
    # One value per launch pair and repeat: with three arms the two copies share the baseline's
    # launch, so their pairs are averaged per (run, repeat) for an honest interval.
    per_launch: dict[tuple[int, int], list[float]] = {}
    per_server: dict[tuple[int, int], list[float]] = {}
    for i, res in enumerate(results):
        for p in res["pairs"]:
            per_launch.setdefault((i, p["repeat"]), []).append(p["d"])
            if p["d_server"] is not None:
                per_server.setdefault((i, p["repeat"]), []).append(p["d_server"])
    out = {
        "launch_pairs": sum(len(r["pairs"]) for r in results),
        "metric": pooled([float(np.mean(v)) for v in per_launch.values()]),
        "server": pooled([float(np.mean(v)) for v in per_server.values()]) if per_server else None,
    }
    # Copy against copy (three arms): no baseline involved, so a role effect leaves this at ×1.
    copies = [
        float(np.subtract(*v)) for v in (
            [p["d"] for p in res["pairs"] if p["repeat"] == rep] for res in results
            for rep in {p["repeat"] for p in res["pairs"]}
        ) if len(v) == 2
    ]  # fmt: skip
    if len(copies) > 1:
        out["copy_vs_copy"] = pooled(copies)
    cells = [c for r in results for c in r["cells"]]
    roles = {
        "baseline": [c for c in cells if c["arm"] == base],
        "others": [c for c in cells if c["arm"] != base],
    }
    every = [c["server_rate"] for c in cells if c["server_rate"]]
    slow = 0.6 * statistics.median(every) if every else 0.0
    for role, mine in roles.items():
        rates = [c["server_rate"] for c in mine if c["server_rate"]]
        out[role] = {
            "launches": len(mine),
            "median_server_rate": statistics.median(rates) if rates else None,
            "slow_launches": sum(1 for r in rates if r < slow),  # under 60 % of every launch's median
            "own_cpu_s_mean": float(np.mean([c["own_cpu"] for c in mine])) if mine else None,
            "server_cpu_s_mean": float(np.mean([c["server_cpu"] for c in mine])) if mine else None,
            "wall_s_mean": float(np.mean([c["wall"] for c in mine])) if mine else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--arms", type=int, default=2, choices=(2, 3))
    ap.add_argument("--repeats", type=int, default=6, help="launches per arm (max_repeats with --auto)")
    ap.add_argument("--auto", action="store_true", help="repeats: auto (interim looks between launch pairs)")
    ap.add_argument("--reverse", action="store_true", help="the baseline last in the YAML")
    ap.add_argument("--baseline-name", default="baseline")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--load", choices=("none", "mem", "cpu", "both"), default="none")
    ap.add_argument("--plain-abba", action="store_true", help="the order before issue 27: YAML order, ABBA")
    ap.add_argument("--pin", action="store_true", help="specbench and its servers on CPU 0, hogs on the rest")
    ap.add_argument("--nice", type=int, default=0, help="the hogs' nice level")
    ap.add_argument("--json", type=Path, help="write every run's cells, pairs and the pooled figures here")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the hogs live with the tests
    from tests.support.load import controlled_load

    if args.plain_abba:  # what specbench did before the counterbalanced order (run/order.py)
        runner.Runner._order_cells = lambda self: None  # type: ignore[method-assign]
    binary = ensure_llama_server(None)
    pair = cached_pair(LabSpec(arch="dense", alpha=0.8), lab_dir())
    base = args.baseline_name
    arms = [base, "same", "same2"][: args.arms]
    arms = arms[::-1] if args.reverse else arms
    started = time.monotonic()
    results = []
    hogs = {"none": (), "mem": ("mem",), "cpu": ("cpu",), "both": ("mem", "cpu")}[args.load]
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin:
        os.sched_setaffinity(0, {cpus[0]})  # inherited by every llama-server this run starts
    with controlled_load(hogs, args.nice, set(cpus[1:]) if args.pin else None):
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                res = one_run(Path(tmp), matrix_body(pair, binary, arms, base, args))
            results.append(res)
            one = report([res], base)
            print(f"run: ×{one['metric']['ratio']:.3f} (server ×{one['server']['ratio']:.3f}) "
                  f"over {one['launch_pairs']} pairs; order {res['order']}", flush=True)  # fmt: skip
    summary = report(results, base)
    load = os.getloadavg()
    print(json.dumps(summary, indent=1))
    print(f"({(time.monotonic() - started) / 60:.1f} min, load average now {load[0]:.1f})")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "summary": summary,
                                         "runs": results}, indent=1, default=str))  # fmt: skip


if __name__ == "__main__":
    main()
