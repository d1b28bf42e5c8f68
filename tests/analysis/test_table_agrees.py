"""The table never says less than the findings (issue 44). SYNTHETIC runs (tests/support/synth.py)."""

from __future__ import annotations

import json
from pathlib import Path

from specbench.analysis import analyse_dir
from tests.support.synth import SPEC_ARGS, Arm, Plan, make_run, spec


def test_a_confounded_arm_s_verdict_cell_names_the_confound(tmp_path: Path) -> None:
    """An arm whose threads differ from the baseline's is faster for that reason: its row must
    not read a plain "faster", and carries no launch estimate."""
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=20), "draft4": Arm(args=(*SPEC_ARGS, "-t", "1"), decode_tok_s=40)}
    )
    a = analyse_dir(make_run(tmp_path / "run", plan))
    assert any(f.code == "CONFOUND" for f in a.findings)
    row = a.summary[a.summary["arm"] == "draft4"].iloc[0]
    assert row["verdict"] == "faster — not trusted: CONFOUND (see findings)"
    table = a.by_workload[a.by_workload["arm"] == "draft4"].iloc[0]
    assert "not trusted: CONFOUND" in table["verdict"] and "more launch" not in table["verdict"]


def test_a_draft_that_never_drafted_gets_no_launch_estimate(tmp_path: Path) -> None:
    """SILENT_FALLBACK: more launches cannot make a non-drafting arm a result."""
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "draft4": spec(30.2, drafts=False)})
    a = analyse_dir(make_run(tmp_path / "run", plan))
    row = a.summary[a.summary["arm"] == "draft4"].iloc[0]
    assert "SILENT_FALLBACK" in row["verdict"] and "more launch" not in row["verdict"]


def test_a_failed_baseline_shows_no_speedup(tmp_path: Path) -> None:
    root = make_run(tmp_path / "run", Plan(arms={"baseline": Arm(decode_tok_s=30), "draft4": spec(40)}))
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["arms"]["baseline"]["status"] = "failed"
    (root / "manifest.json").write_text(json.dumps(manifest))
    row = analyse_dir(root).summary.iloc[0]
    assert row["arm"] == "baseline" and row["verdict"] == "baseline (failed: no speedup)"
    assert row["speedup"] != row["speedup"]  # NaN: no "1.00×"
