"""The client on the real llama-server: per-chunk token counts from timings_per_token, tokens
per chunk rising with speculation, the client's lag in every cell, and open-loop sends on the
stored seeded schedule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specbench import api
from specbench.analysis import metrics
from specbench.client import readstamps
from specbench.engines import read_record
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.matrices import draft4, write_matrix

pytestmark = pytest.mark.engine


def test_open_loop_run_with_per_token_counts(llama_server: Path, moe_pair: Pair, tmp_path: Path) -> None:
    arms = {"baseline": [], "draft4": draft4(moe_pair)}
    matrix = write_matrix(tmp_path, moe_pair, llama_server, arms, concurrency=2, forward_probe=False)
    spec = {"suite": "natural", "max_tokens": 24, "prompts": 3, "prompt_file": "prompts.jsonl"}
    text = matrix.read_text().replace("workload:", "workload_old:")  # replaced just below
    import yaml

    body = yaml.safe_load(text)
    body.pop("workload_old")
    body["workload"] = {**spec, "request_rate": 20.0, "burstiness": 0.5}
    body["repeats"] = 1
    body["client_processes"] = 2
    matrix.write_text(yaml.safe_dump(body))
    api.prepare_run(matrix, tmp_path / "run").run()

    store = RunStore(tmp_path / "run")
    measured = [r for r in store.records() if not r["warmup"]]
    assert len(measured) == 6 and all(r["error"] is None for r in measured), [r["error"] for r in measured]
    assert {r["client_process"] for r in measured} <= {0, 1} and all(r["dispatch_us"] >= 0 for r in measured)
    for rec in measured:
        counts = [c[5] for c in rec["chunks"] if c[1]]
        assert None not in counts and counts[-1] == rec["usage"]["completion_tokens"] == 24
    typed = [read_record(r) for r in measured]  # the analysis reads records through the type
    per_arm = {arm: np.median([metrics.tokens_per_chunk(r) for r in typed if r.arm == arm]) for arm in arms}
    # llama.cpp streams one chunk per token even when a step accepts several drafts (vLLM sends
    # them in one chunk): the running counts say so, and drafting did happen.
    assert per_arm == {"baseline": 1.0, "draft4": 1.0}
    assert np.nanmean([metrics.acceptance(r) for r in typed if r.arm == "draft4"]) > 0

    for cell in store.cells():
        # Each cell streams through two worker processes (client_processes: 2), every read of
        # theirs stamped with the kernel's receive time where the platform has it.
        lag = cell["client_lag"]
        assert lag["n"] > 0 and lag["processes"] == 2
        assert lag["stamps"] == ("kernel" if readstamps.KERNEL_STAMPS else "poll")
        sched = json.loads((store.root / "schedules" / f"{cell['arm']}-r0-main.json").read_text())
        assert sched["rate"] == 20.0 and sched["cap"] == 2 and len(sched["offsets_s"]) == 3
        mine = sorted(r["scheduled_s"] for r in measured if r["arm"] == cell["arm"])
        assert mine == sorted(sched["offsets_s"])
        assert all(r["lateness_ms"] >= 0 for r in measured)
    same = {tuple(json.loads(p.read_text())["offsets_s"]) for p in (store.root / "schedules").iterdir()}
    assert len(same) == 1  # every arm of a repeat gets the same arrivals
