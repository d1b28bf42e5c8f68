"""How the analysis grows with the records (issue 31; not a test: no thresholds).

Builds run directories of 1k, 10k and 100k measured requests along two axes — many launches
(prompts per launch fixed) and many prompts per launch (launches fixed) — by repeating the
measured records of a template run, each copy's stream times scaled by a small seeded jitter so
that no two launches are identical. The template is a real run directory (``--source``) or, by
default, a synthetic three-arm llama.cpp run of 256-token streams (6 prompts, 3 launches per arm).
It then runs ``specbench summary`` and ``specbench report`` on each as subprocesses and prints
wall time, peak RSS (the child's ``ru_maxrss``) and the growth exponent between sizes
(log(t2/t1) / log(n2/n1): 1 is linear).

    .venv/bin/python bench/analysis_scale.py [--sizes 1000,10000,100000] [--axes launches,prompts]
        [--source RUN_DIR] [--tokens 256] [--work DIR] [--no-report]

The 100k directories are about 1 GB each; ``--work`` keeps them (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ARMS = ("baseline", "ngram-simple", "ngram-mod")
PROMPTS = ("quote-a", "code-b", "prose-c", "csv-d", "code-e", "prose-f")
CATEGORIES = ("quote", "code-edit", "prose", "structured", "code-edit", "prose")
VARIANTS = 8  # jittered copies of each template record; each output line picks one


# -- the template -----------------------------------------------------------------------------
def synthetic_template(root: Path, tokens: int) -> None:
    """A three-arm llama.cpp run: 3 launches per arm, 6 prompts, one warmup per launch."""
    spec = {"ngram-simple": ["--spec-type", "ngram-simple"], "ngram-mod": ["--spec-type", "ngram-mod"]}
    arms_args: dict[str, list[str]] = {"baseline": [], **spec}
    matrix = {
        "engine": "llamacpp", "model": "/models/target.gguf", "common_args": ["-c", "2048"],
        "arms": arms_args, "baseline": "baseline",
        "workload": {"suite": "natural", "max_tokens": tokens, "temperature": 0.0}, "repeats": 3, "warmup": 1,
    }  # fmt: skip
    rounds = [list(ARMS), list(reversed(ARMS)), [ARMS[1], ARMS[0], ARMS[2]]]
    manifest = {
        "schema_version": 2, "specbench_version": "0.2.0", "matrix": matrix,
        "arms": {a: {"status": "ok", "command": ["llama-server", *args]} for a, args in arms_args.items()},
        "order": {"rule": "synthetic", "seed": 0, "rounds": rounds},
    }  # fmt: skip
    (root / "manifest.json").write_text(json.dumps(manifest))
    rng, seq = random.Random(0), 0
    with (root / "records.jsonl").open("w") as fh, (root / "cells.jsonl").open("w") as cells:
        for repeat, order in enumerate(rounds):
            for place, arm in enumerate(order):
                start = f"2026-01-01T00:{repeat:02d}:{place * 10:02d}+00:00"
                cell = {"schema_version": 2, "arm": arm, "repeat": repeat, "attempt": 0, "started_at": start}
                cells.write(json.dumps(cell) + "\n")
                for i, prompt in enumerate(("warmup-0", *PROMPTS)):
                    seq += 1
                    rec = _record(rng, arm, repeat, prompt, i, tokens, seq)
                    fh.write(json.dumps(rec) + "\n")


def _record(rng: random.Random, arm: str, repeat: int, prompt: str, i: int, tokens: int, seq: int) -> Any:
    """One request as the client records it: a stamp and the raw delta per streamed chunk."""
    per_chunk = 1 if arm == "baseline" else (2 if arm == "ngram-simple" else 3)
    step = (20_000_000 if arm == "baseline" else 33_000_000) * (1 + 0.1 * (i % 3))
    t, sent, chunks = 30_000_000 + 1_000_000 * i, 0, []
    while sent < tokens:
        n = min(per_chunk, tokens - sent)
        sent += n
        t += int(step * rng.uniform(0.9, 1.1))
        chunks.append([t, " w" * n, None, None, None if sent < tokens else "length", sent])
    timings: dict[str, Any] = {"predicted_n": tokens, "predicted_ms": t / 1e6}
    if arm != "baseline":
        timings.update(draft_n=tokens, draft_n_accepted=int(tokens * 0.6))
    warm = prompt.startswith("warmup")
    return {
        "schema_version": 2, "arm": arm, "repeat": repeat, "workload": "natural", "phase": "main",
        "prompt_id": prompt, "category": "warmup" if warm else CATEGORIES[i - 1], "warmup": warm, "seq": seq,
        "concurrency": 1,
        "request": {"max_tokens": tokens, "temperature": 0.0, "seed": 0, "ignore_eos": True},
        "t_headers_ns": 25_000_000, "t_end_ns": t + 100_000, "chunks": chunks,
        "usage": {"prompt_tokens": 20, "completion_tokens": tokens}, "timings": timings, "error": None,
    }  # fmt: skip


# -- scaling a template -----------------------------------------------------------------------
def _jittered(rec: dict[str, Any], factor: float) -> dict[str, Any]:
    """``rec`` with every stream time scaled by ``factor`` (a slower or faster copy)."""
    out = dict(rec)
    out["chunks"] = [[int(c[0] * factor), *c[1:]] for c in rec.get("chunks") or []]
    for key in ("t_end_ns", "t_done_ns"):
        if isinstance(rec.get(key), (int, float)):
            out[key] = int(rec[key] * factor)
    return out


def _variants(rec: dict[str, Any], rng: random.Random) -> list[str]:
    """Serialized jittered copies of ``rec`` without the keys each output line sets."""
    out = []
    for _ in range(VARIANTS):
        body = {k: v for k, v in _jittered(rec, rng.uniform(0.95, 1.05)).items()}
        for key in ("repeat", "prompt_id", "seq"):
            body.pop(key, None)
        out.append(json.dumps(body)[1:])  # '"arm": ...}': the line's own keys go in front
    return out


def scale_run(source: Path, out: Path, launches: int, prompts: int) -> int:
    """A run directory with ``launches`` launches per arm and ``prompts`` prompts per launch made
    from ``source``'s records; returns the number of measured requests written."""
    out.mkdir(parents=True)
    manifest = json.loads((source / "manifest.json").read_text())
    lines = [json.loads(x) for x in (source / "records.jsonl").read_text().splitlines() if x.strip()]
    cells = [json.loads(x) for x in (source / "cells.jsonl").read_text().splitlines() if x.strip()]
    repeats = sorted({r["repeat"] for r in lines})
    rng = random.Random(1)
    measured: dict[tuple[str, int], list[tuple[str, list[str]]]] = {}
    warmups: dict[tuple[str, int], list[list[str]]] = {}
    for rec in lines:
        key = (rec["arm"], rec["repeat"])
        if rec.get("warmup"):
            warmups.setdefault(key, []).append(_variants(rec, rng))
        else:
            measured.setdefault(key, []).append((str(rec["prompt_id"]), _variants(rec, rng)))
    rounds = (manifest.get("order") or {}).get("rounds")
    if isinstance(rounds, list) and rounds:
        manifest["order"]["rounds"] = [rounds[r % len(rounds)] for r in range(launches)]
    manifest.setdefault("matrix", {})["repeats"] = launches
    (out / "manifest.json").write_text(json.dumps(manifest))
    for name in ("env.json", "engine_args.json"):
        if (source / name).is_file():
            shutil.copy(source / name, out / name)
    seq, n = 0, 0
    with (out / "records.jsonl").open("w") as fh, (out / "cells.jsonl").open("w") as cf:
        for launch in range(launches):
            template = repeats[launch % len(repeats)]
            for cell in cells:
                if cell.get("repeat") == template:
                    cf.write(json.dumps({**cell, "repeat": launch}) + "\n")
            for arm in sorted({a for a, _ in measured}):
                for variants in warmups.get((arm, template), []):
                    seq += 1
                    fh.write(_line(launch, "warmup-0", seq, variants[launch % VARIANTS]))
                base = measured.get((arm, template), [])
                for p in range(prompts):
                    prompt, variants = base[p % len(base)]
                    name = prompt if p < len(base) else f"{prompt}~{p // len(base)}"
                    seq, n = seq + 1, n + 1
                    fh.write(_line(launch, name, seq, variants[(launch * 7 + p) % VARIANTS]))
    return n


def _line(repeat: int, prompt: str, seq: int, body: str) -> str:
    return f'{{"repeat": {repeat}, "prompt_id": {json.dumps(prompt)}, "seq": {seq}, {body}\n'


# -- measuring ----------------------------------------------------------------------------------
def measure(cmd: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one child process. On a shared machine the
    CPU time (user + system) is the steadier figure: the wall time counts other work too."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: the run has findings
        sys.stderr.write((proc.stderr.read() if proc.stderr else b"").decode()[-2000:])
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def shape(axis: str, size: int, arms: int, per_launch: int, base_launches: int) -> tuple[int, int]:
    """(launches per arm, prompts per launch) giving ``size`` measured requests along ``axis``."""
    if axis == "launches":
        return max(1, round(size / (arms * per_launch))), per_launch
    return base_launches, max(1, round(size / (arms * base_launches)))


def exponent(rows: list[dict[str, Any]], key: str) -> str:
    if len(rows) < 2 or rows[0][key] <= 0:
        return ""
    a, b = rows[-2], rows[-1]
    return f"{math.log(b[key] / a[key]) / math.log(b['n'] / a['n']):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--axes", default="launches,prompts")
    parser.add_argument("--source", type=Path, help="template run directory (default: synthetic)")
    parser.add_argument("--tokens", type=int, default=256, help="stream length of the synthetic template")
    parser.add_argument("--work", type=Path, help="where the run directories are made (kept)")
    parser.add_argument("--no-report", action="store_true")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="analysis_scale-"))
    work.mkdir(parents=True, exist_ok=True)
    source = args.source
    if source is None:
        source = work / "template"
        if not source.exists():
            source.mkdir()
            synthetic_template(source, args.tokens)
    recs = [json.loads(x) for x in (source / "records.jsonl").read_text().splitlines() if x.strip()]
    kept = [r for r in recs if not r.get("warmup")]
    arms = len({r["arm"] for r in kept})
    base_launches = len({r["repeat"] for r in kept})
    per_launch = max(1, len(kept) // (arms * base_launches))
    exe = [sys.executable, "-m", "specbench.cli"]
    print(f"template {source}: {arms} arms, {base_launches} launches, {per_launch} prompts per launch")
    print(f"{'axis':<9} {'requests':>9} {'launches':>8} {'prompts':>7} {'MB':>5} | {'summary':>7} "
          f"{'CPU':>6} {'RSS MB':>6} | {'report':>7} {'CPU':>6} {'RSS MB':>6}   (seconds)")  # fmt: skip
    for axis in args.axes.split(","):
        rows: list[dict[str, Any]] = []
        for size in (int(s) for s in args.sizes.split(",")):
            launches, prompts = shape(axis, size, arms, per_launch, base_launches)
            run = work / f"{axis}-{size}"
            if not run.exists():
                scale_run(source, run, launches, prompts)
            n = arms * launches * prompts
            mb = (run / "records.jsonl").stat().st_size / 1e6
            s_t, s_cpu, s_rss = measure([*exe, "summary", str(run)])
            r_t, r_cpu, r_rss = math.nan, math.nan, math.nan
            if not args.no_report:
                shutil.rmtree(run / "report", ignore_errors=True)
                r_t, r_cpu, r_rss = measure([*exe, "report", str(run)])
            rows.append({"n": n, "summary": s_t, "report": r_t, "summary CPU": s_cpu, "report CPU": r_cpu})
            print(f"{axis:<9} {n:>9} {launches:>8} {prompts:>7} {mb:>5.0f} | {s_t:>7.1f} {s_cpu:>6.1f} "
                  f"{s_rss:>6.0f} | {r_t:>7.1f} {r_cpu:>6.1f} {r_rss:>6.0f}", flush=True)  # fmt: skip
        keys = ("summary", "summary CPU", "report", "report CPU")
        growth = ", ".join(f"{k} {exponent(rows, k)}" for k in keys)
        print(f"{axis:<9} growth exponent of the last step (1 = linear): {growth}")
    print(f"peak RSS of all children: {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
