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


def test_piped_output_is_never_hard_wrapped(tmp_path: Path) -> None:
    """Issue 44: stderr and stdout written to a file were wrapped at 80 columns, inside command
    lines and inside "4 and over 1,000". Off a terminal each table row and line stays whole."""
    import subprocess
    import sys

    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=30), "draft-simple-k8": spec(30.3), "ngram-mod": spec(29.8)}
    )
    root = make_run(tmp_path / "run", plan)
    out = subprocess.run(
        [sys.executable, "-m", "specbench.cli", "summary", str(root)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"},
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 3, out  # one line per arm: no cell wrapped onto a second line
    assert any(len(line) > 120 for line in rows)
    # the speedup column says it is paired, and why it can differ from the medians beside it
    assert "paired speedup" in out and "ratio of the medians" in out
