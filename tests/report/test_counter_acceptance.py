"""Acceptance from /metrics counter deltas when the server gives no per-request counts (vLLM
without --per-request-spec-decode-metrics): SYNTHETIC run directories (tests/support/synth.py) with
the per-request counts taken out, the cells' counter deltas kept. Regression for the #15 audit:
the report's per-arm table showed "—", the predicted-vs-measured section said "no drafted tokens
were measured", while the acceptance-by-source section held the counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench import analysis
from specbench.analysis.tables import frames
from specbench.report import render_report, tables
from specbench.report.predicted import TITLE
from specbench.report.summary import summary_table
from tests.support.records import write_records
from tests.support.synth import FAKE_CPU, Arm, Plan, lab_truth, make_run, spec, use_lab_model


def _without_per_request_counts(run: Path, arm: str) -> Path:
    """The arm's responses without the server's per-request block (its draft counts with it)."""
    records = [json.loads(line) for line in (run / "records.jsonl").open()]
    for rec in records:
        if rec["arm"] == arm:
            rec.pop("timings", None)
    write_records(run / "records.jsonl", records)
    return run


def _counter_rate(run: Path, arm: str) -> float:
    cells = [json.loads(line) for line in (run / "cells.jsonl").open()]
    deltas = [
        {
            k: c["metrics_after"]["spec"][k] - c["metrics_before"]["spec"].get(k, 0)
            for k in ("draft_tokens", "accepted")
        }
        for c in cells
        if c["arm"] == arm
    ]
    return sum(d["accepted"] for d in deltas) / sum(d["draft_tokens"] for d in deltas)


def test_the_arm_table_and_summary_fall_back_to_counters_and_name_them(tmp_path: Path) -> None:
    plan = Plan(arms={"baseline": Arm(decode_tok_s=20), "draft": spec(34)}, repeats=3)
    root = _without_per_request_counts(make_run(tmp_path / "run", plan), "draft")
    run = analysis.load_run(root)
    assert run.df.loc[run.df["arm"] == "draft", "draft_n"].isna().all()
    frame = frames.summary_frame(run).set_index("arm")
    assert frame.loc["draft", "acceptance"] == pytest.approx(_counter_rate(root, "draft"))
    assert frame.loc["draft", "acceptance_source"] == "metrics"
    summary = frames.summary_frame(run)
    shown = tables.arm_table(summary, str(summary["workload"].iloc[0])).set_index("arm")
    assert (
        shown.loc["draft", "acceptance"].endswith("(metrics)") and shown.loc["baseline", "acceptance"] == "—"
    )
    cells = [list(col.cells) for col in summary_table(analysis.analyse(run)).columns]
    assert any(str(c).endswith("(metrics)") for c in cells[6])


def test_the_prediction_uses_the_counters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specbench.analysis.predicted.models.stored_cpu", lambda run_dir: FAKE_CPU)
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=20), "draft8": spec(34)}, prompts_per_category=2, repeats=2
    )
    run = use_lab_model(make_run(tmp_path / "run", plan), lab_truth("membound", "dense"))
    render_report(_without_per_request_counts(run, "draft8"), ("md",))
    md = (run / "report" / "report.md").read_text()
    section = md[md.index(f"## {TITLE}") : md.index("## Run")]
    assert "no drafted tokens were measured" not in section and "| draft8 |" in section
