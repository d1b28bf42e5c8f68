"""Several workloads in one SYNTHETIC run (issue 22, item 4): each is judged on its own requests,
with its own section, decision and crossover, and one table sets the workloads side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench import analysis
from specbench.report import render_report
from tests.support.records import write_records
from tests.support.synth import Arm, Plan, make_run, spec


@pytest.fixture(scope="module")
def two_workloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``spec`` decodes ×1.5 on ``natural`` and ×0.8 on ``single``: one arm, two answers."""
    root = tmp_path_factory.mktemp("workloads")
    wins = Plan(arms={"baseline": Arm(decode_tok_s=30), "spec": spec(45)}, workload="natural", repeats=3)
    loses = Plan(arms={"baseline": Arm(decode_tok_s=30), "spec": spec(24)}, workload="single", repeats=3)
    run, other = make_run(root / "run", wins), make_run(root / "other", loses)
    records = [json.loads(line) for path in (run, other) for line in (path / "records.jsonl").open()]
    for seq, rec in enumerate(records, 1):  # ids as the runner writes them for several workloads
        rec["seq"], rec["prompt_id"] = seq, f"{rec['workload']}/{rec['prompt_id']}"
    write_records(run / "records.jsonl", records)
    manifest = json.loads((run / "manifest.json").read_text())
    matrix = manifest["matrix"]
    matrix["workloads"] = [{"suite": "natural", "max_tokens": 128}, {"suite": "single", "max_tokens": 128}]
    (run / "manifest.json").write_text(json.dumps(manifest))
    render_report(run, ("md", "html", "json"))
    return run


def test_each_workload_gets_its_own_decision(two_workloads: Path) -> None:
    decisions = {d.workload: d for d in analysis.decision_table(analysis.load_run(two_workloads))}
    assert decisions["natural"].arm == "spec" and decisions["natural"].speedup == pytest.approx(1.5, rel=0.05)
    assert decisions["single"].arm is None


def test_the_report_has_a_workload_by_arm_table_and_a_section_per_workload(two_workloads: Path) -> None:
    report = (two_workloads / "report" / "report.md").read_text()
    heads = ["## Workloads by arm", "## Workload natural", "## Workload single"]
    assert [report.index(h) for h in heads] == sorted(report.index(h) for h in heads)
    table = report[report.index(heads[0]) : report.index(heads[1])]
    natural_row = next(line for line in table.splitlines() if line.startswith("| natural"))
    single_row = next(line for line in table.splitlines() if line.startswith("| single"))
    assert "×1.5" in natural_row and "faster" in natural_row
    assert "×0.8" in single_row and "slower" in single_row
    single = report[report.index(heads[2]) :]
    assert "Decision: keep speculation off — " in single.split("###")[0]
    assert report.count("### Crossover length") == 2
    assert report.count("### Per prompt category") == 2 and "\n## Per prompt category" not in report
    assert "Workloads (2): natural (suite natural: up to 128 output tokens); single (" in report


def test_crossovers_are_per_workload(two_workloads: Path) -> None:
    found = json.loads((two_workloads / "report" / "findings.json").read_text())
    rows = {(c["workload"], c["arm"]): c for c in found["crossovers"]}
    assert set(rows) == {("natural", "spec"), ("single", "spec")}
    assert rows["natural", "spec"]["decode_arm_tok_s"] == pytest.approx(45, rel=0.05)
    assert rows["single", "spec"]["decode_arm_tok_s"] == pytest.approx(24, rel=0.05)
    html = (two_workloads / "report" / "report.html").read_text()
    assert "Workload natural" in html and "Workloads by arm" in html
