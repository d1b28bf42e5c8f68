"""A synthetic run with stalls written in: six requests of the ``fast`` arm's code prompts paused
1.5 s after their fifth token (a real engine cannot be made to pause on demand)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.records import write_records
from tests.support.synth import Arm, Plan, make_run, spec

PAUSE_NS = 1_500_000_000


def stall(rec: dict) -> None:  # type: ignore[type-arg]
    """One 1.5 s gap after the fifth token, and the server's decode rate that goes with it."""
    for chunk in rec["chunks"][6:]:
        chunk[0] += PAUSE_NS
    rec["timings"]["predicted_per_second"] = 5.0
    rec["timings"]["predicted_ms"] = rec["timings"]["predicted_n"] / 5.0 * 1000
    rec["t_end_ns"] += PAUSE_NS


def run_with_stalls(root: Path) -> Path:
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}, repeats=4, prompts_per_category=3)
    run = make_run(root, plan)
    lines = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    hit = [r for r in lines if r["arm"] == "fast" and r["category"] == "code" and not r.get("warmup")][:6]
    for rec in hit:
        stall(rec)
    write_records(run / "records.jsonl", lines)
    return run
