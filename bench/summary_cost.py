"""What the end of ``specbench run`` costs after the last request (not a test: no thresholds).

Writes a run directory shaped like a real two-arm llama.cpp run (1280 measured requests of 256
streamed tokens by default, each record as the client writes it) and times, median of
``--repeat`` calls: loading it (``load_run``), the summary table and findings, and the whole
tail of ``specbench run`` (summary, ``run_problems``, decision lines, with and without the
report) as it was, each step loading the run again, and as it is, loading it once.

    .venv/bin/python bench/summary_cost.py [--requests 1280] [--tokens 256] [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from specbench.analysis import analyse_dir, load_run
from specbench.api import finish_lines, run_problems
from specbench.report import summary


def manifest() -> dict[str, Any]:
    spec = ["-md", "/models/draft.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "8"]
    matrix = {
        "engine": "llamacpp", "model": "/models/target.gguf", "common_args": ["-c", "4096"],
        "arms": {"baseline": [], "spec": spec}, "baseline": "baseline",
        "workload": {"suite": "single", "max_tokens": 256, "temperature": 0.0}, "repeats": 4, "warmup": 1,
    }  # fmt: skip
    arms = {arm: {"status": "ok", "command": ["llama-server", *args]} for arm, args in matrix["arms"].items()}
    return {"schema_version": 1, "specbench_version": "0.2.0", "matrix": matrix, "arms": arms}


def record(rng: random.Random, arm: str, i: int, repeat: int, tokens: int) -> dict[str, Any]:
    """One request as the client records it: a stamp and the raw delta per streamed chunk."""
    per_chunk = 1 if arm == "baseline" else 3
    step = 20_000_000 if arm == "baseline" else 40_000_000
    t, sent, chunks = 30_000_000, 0, []
    while sent < tokens:
        n = min(per_chunk, tokens - sent)
        sent += n
        t += int(step * rng.uniform(0.9, 1.1))
        chunks.append([t, " w" * n, None, None, None if sent < tokens else "length", sent])
    timings = {"predicted_n": tokens, "predicted_ms": t / 1e6, "predicted_per_second": tokens / (t / 1e9)}
    if arm == "spec":
        timings.update(draft_n=tokens, draft_n_accepted=int(tokens * 0.6))
    return {
        "schema_version": 2, "arm": arm, "repeat": repeat, "workload": "single", "prompt_id": f"p{i}",
        "category": "chat", "warmup": False, "concurrency": 1,
        "request": {"max_tokens": tokens, "temperature": 0.0, "seed": 0, "ignore_eos": True},
        "t_headers_ns": 25_000_000, "t_end_ns": t + 100_000, "chunks": chunks,
        "usage": {"prompt_tokens": 20, "completion_tokens": tokens}, "timings": timings, "error": None,
    }  # fmt: skip


def write_run(root: Path, requests: int, tokens: int) -> None:
    rng = random.Random(0)
    (root / "manifest.json").write_text(json.dumps(manifest()))
    per_cell = requests // 8
    with (root / "records.jsonl").open("w") as fh, (root / "cells.jsonl").open("w") as cells:
        for arm in ("baseline", "spec"):
            for repeat in range(4):
                cell = {"schema_version": 1, "arm": arm, "repeat": repeat, "attempt": 0, "alive_at_end": True}
                cells.write(json.dumps(cell) + "\n")
                for i in range(per_cell):
                    fh.write(json.dumps(record(rng, arm, i, repeat, tokens)) + "\n")


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def tail_each_loads(root: Path, report: bool) -> None:
    """The end of ``specbench run`` before 0.2.0: summary, checks and report each load the run."""
    summary.print_summary(analyse_dir(root))
    run_problems(root)
    finish_lines(root, report=report)  # analyses the run again


def tail_loaded_once(root: Path, report: bool) -> None:
    """The end of ``specbench run`` now: the run is loaded (parsed and measured) once."""
    result = analyse_dir(root)
    summary.print_summary(result)
    run_problems(root, result.run.records)
    finish_lines(root, report=report, analysis=result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--requests", type=int, default=1280)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    summary.stdout = Console(file=io.StringIO(), width=150)  # time the work, not the terminal
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_run(root, args.requests, args.tokens)
        size = (root / "records.jsonl").stat().st_size / 1e6
        print(f"{args.requests} requests x {args.tokens} tokens ({size:.1f} MB), median of {args.repeat}:")
        result = analyse_dir(root)
        rows: list[tuple[str, Callable[[], object]]] = [
            ("load_run (parse + per-request metrics)", lambda: load_run(root)),
            ("analyse (findings, decisions, tables)", lambda: analyse_dir(root)),
            ("summary table + findings, run analysed", lambda: summary.print_summary(result)),
            ("end of run, no report: each step loads", lambda: tail_each_loads(root, False)),
            ("end of run, no report: loaded once", lambda: tail_loaded_once(root, False)),
            ("end of run with report: each step loads", lambda: tail_each_loads(root, True)),
            ("end of run with report: loaded once", lambda: tail_loaded_once(root, True)),
        ]
        for label, fn in rows:
            print(f"  {label:<42} {timed(fn, args.repeat):6.2f} s", flush=True)


if __name__ == "__main__":
    main()
