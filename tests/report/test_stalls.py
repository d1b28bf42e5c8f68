"""Stalled requests (a paused engine) are named, not read as modes or a category effect: SYNTHETIC
records with the pause written in (a real engine cannot be made to pause on demand)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from specbench import analysis
from specbench.analysis import frames
from tests.report.synth import Arm, Plan, make_run, spec

PAUSE_NS = 1_500_000_000


def _stall(rec: dict) -> None:  # type: ignore[type-arg]
    """One 1.5 s gap after the fifth token, and the server's decode rate that goes with it."""
    for chunk in rec["chunks"][6:]:
        chunk[0] += PAUSE_NS
    rec["timings"]["predicted_per_second"] = 5.0
    rec["timings"]["predicted_ms"] = rec["timings"]["predicted_n"] / 5.0 * 1000
    rec["t_end_ns"] += PAUSE_NS


def _run_with_stalls(root: Path) -> Path:
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}, repeats=4, prompts_per_category=3)
    run = make_run(root, plan)
    lines = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    hit = [r for r in lines if r["arm"] == "fast" and r["category"] == "code" and not r.get("warmup")][:6]
    for rec in hit:
        _stall(rec)
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return run


def test_stalled_requests_are_named_and_make_no_category_split(tmp_path: Path) -> None:
    run = analysis.load_run(_run_with_stalls(tmp_path / "r"))
    found = analysis.findings(run)
    (stall,) = [f for f in found if f.code == "STALLED"]
    assert stall.arms == ("fast",) and "6 of 36 requests stalled" in stall.evidence
    with_, without = (float(x) for x in re.findall(r"×([0-9.]+) with(?:out)?", stall.evidence))
    assert with_ < 1.2 < 1.4 < without  # the pauses hide most of the arm's ×1.5
    assert not [f for f in found if f.code == "BIMODAL" and "fast" in f.arms]
    assert not [s for s in frames.category_splits(run) if s.startswith("fast")]


def test_a_run_without_pauses_has_no_stall(tmp_path: Path) -> None:
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}, repeats=4, prompts_per_category=3)
    run = analysis.load_run(make_run(tmp_path / "r", plan))
    assert not [f for f in analysis.findings(run) if f.code == "STALLED"]
