"""A/A on the real llama-server under a controlled load (issue 27): three identical arms — the
baseline and two copies — must come out equal to each other, whatever the baseline is called.

Issue 27 found two-arm A/A runs all below ×1 (pooled ×0.887 over 30 launch pairs, p = 0.003) on
a machine busy with memory-bound llama-server benchmarks. The load here is made by the test: a
memory-bandwidth hog and a busy loop on the other CPUs, specbench and every server it starts on
the first CPU, so whatever specbench does while a server measures (analysis, writes, a probe)
takes time from that server directly, and the servers' placement is no lottery.

Tolerance. Issue 27 asked for the pooled estimate within ±2 % of ×1. Measured here (this test,
2026-11-28, 2-core VM shared with other sessions): ×1.010 (SE 1.97 %) and ×1.000 (SE 3.80 %), then
×1.016 (SE 2.31 %) and ×1.014 (SE 2.95 %), 80 launch pairs (40 rounds) each, 73–81 s a pair. The
round's log-ratio has sd 0.26–0.32: requests within one launch vary by sd 0.26–0.28 (4 requests) and
launches by about 0.17 beyond that. A ±2 % assertion that fails an unbiased run once in a thousand
needs SE ≤ 0.6 %: about 600 rounds (quiet) to 2 000 (under this load), and 32 requests a launch
would still leave 1 300, since the launch term then dominates — 10–30 minutes of both cores, not a
test. Checked on 2026-11-28 (session 3): 4 requests × 256 tokens, 30 rounds, SE 1.84 %; 16 requests
× 128 tokens, 30 rounds, SE 1.96 % — more or longer requests do not help: launches come up "fast"
(~4,900 tok/s) or "slow" (~3,500) and stay so (launch-mean sd 0.12–0.13 in logs, 0.20 between the
requests of one launch), and only more launches average that out. The test asserts what the data can
carry: the pooled estimate's 99.9 % interval (t over rounds, the two copies of a round sharing its
baseline launch) contains ×1 — a 1-in-1000 false failure — and prints the SE. A busy loop on the
servers' CPU during the non-baseline cells only read ×1.247 (99.9 % CI 1.029–1.510) and failed it
(docs/statistics.md, "A/A evidence").
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from specbench import api
from specbench.analysis.metrics import frame
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.load import controlled_load

pytestmark = pytest.mark.engine

PROMPTS = [{"id": f"p{i}", "prompt": f"Write note {i}."} for i in range(4)]
REPEATS = 40  # two copies × 40 rounds = 80 launch pairs per run (about a minute)
CONFIDENCE = 0.999


def aa_run(
    folder: Path, pair: Pair, binary: Path, arms: list[str], baseline: str
) -> dict[tuple[str, int], float]:
    """Run the A/A matrix; each copy's launch-pair mean log-ratio over the baseline, by round."""
    folder.mkdir()
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    body = {
        "model": str(pair.target),
        "engine_binary": str(binary),
        # One llama.cpp thread: two spin-synchronised threads on a shared 2-core machine stall
        # whenever one is preempted (docs/statistics.md).
        "common_args": ["-c", "2048", "-np", "1", "-t", "1"],
        "arms": {a: [] for a in arms},
        "baseline": baseline,
        "repeats": REPEATS,
        "warmup": 1,
        "forward_probe": True,  # the one thing only the baseline's launches do: it must not show
        "workload": {"suite": "natural", "max_tokens": 24, "prompt_file": "prompts.jsonl"},
    }
    (folder / "matrix.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
    api.run_matrix(folder / "matrix.yaml", folder / "run")
    df = frame(RunStore(folder / "run").records())
    rates = df.groupby(["arm", "repeat", "prompt_id"])["decode_tok_s"].median()
    out = {}
    for arm in arms:
        if arm == baseline:
            continue
        for r in range(REPEATS):
            d = [math.log(rates[arm, r, p["id"]] / rates[baseline, r, p["id"]]) for p in PROMPTS]
            out[arm, r] = float(np.mean(d))
    return out


def pooled(pairs: dict[tuple[str, int], float]) -> tuple[float, float, float, int]:
    """Mean log-ratio over every launch pair, its standard error and its interval's half-width.
    The two copies share the baseline's launch of a round, so the round (mean of its pairs) is
    the independent unit."""
    rounds: dict[int, list[float]] = {}
    for (_, r), d in pairs.items():
        rounds.setdefault(r, []).append(d)
    unit = np.array([np.mean(v) for v in rounds.values()])
    se = float(unit.std(ddof=1) / math.sqrt(unit.size))
    return (
        float(np.mean(list(pairs.values()))),
        se,
        float(sps.t.ppf(0.5 + CONFIDENCE / 2, unit.size - 1)) * se,
        len(pairs),
    )


@pytest.mark.parametrize(
    ("arms", "baseline"),
    [(["baseline", "same", "same2"], "baseline"), (["same2", "same", "ref"], "ref")],
    ids=["baseline", "renamed-last"],
)
def test_three_identical_arms_read_x1_under_a_memory_and_cpu_load(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, arms: list[str], baseline: str
) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    try:
        os.sched_setaffinity(0, {cpus[0]})  # inherited by every server the run starts
        with controlled_load(["mem", "cpu"], cpus=set(cpus[1:]) or None):
            pairs = aa_run(tmp_path / "aa", dense_pair, llama_server, arms, baseline)
    finally:
        os.sched_setaffinity(0, set(cpus))
    mean, se, half, n = pooled(pairs)
    low, high = math.exp(mean - half), math.exp(mean + half)
    figures = f"×{math.exp(mean):.3f} (SE {se:.2%}, 99.9 % CI {low:.3f}–{high:.3f}), {n} pairs"
    print(f"A/A {baseline}: {figures}")
    assert n >= 30
    assert abs(mean) <= half, f"identical arms differ: {figures}"
