"""The "Predicted vs measured" section on SYNTHETIC runs: where it sits, what it shows, and that it
never takes the report down."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.analysis.result import analyse_dir
from specbench.report import render_report
from specbench.report.page.document import Heading, Para, Table
from specbench.report.predicted import TITLE, predicted_blocks
from tests.support.synth import FAKE_CPU, Arm, Plan, lab_truth, make_run, spec, use_lab_model


def test_every_report_has_the_section_after_the_decision(three_arms: Path) -> None:
    md = (three_arms / "report" / "report.md").read_text()
    order = [md.index(f"## {h}") for h in ("Decision", TITLE, "Run")]
    assert order == sorted(order)
    section = md[order[1] : order[2]]
    assert "No prediction: no lab truth.json, config.json or preset describes the model" in section
    assert TITLE in (three_arms / "report" / "report.html").read_text()


def test_a_lab_run_shows_predicted_and_measured_per_arm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("specbench.analysis.predicted.models.stored_cpu", lambda run_dir: FAKE_CPU)
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=20), "draft8": spec(34)}, prompts_per_category=2, repeats=2
    )
    run = use_lab_model(make_run(tmp_path / "run", plan), lab_truth("membound", "dense"))
    render_report(run, ("md", "html"))
    md = (run / "report" / "report.md").read_text()
    section = md[md.index(f"## {TITLE}") : md.index("## Run")]
    assert "Calibrated on baseline" in section and "lab target dense 1024x16" in section
    # One arm, two launches: too few for an interval, so the column names no level.
    assert "| draft8 |" in section and "predicted" in section and "measured (CI)" in section
    html = (run / "report" / "report.html").read_text()
    assert "Calibrated on baseline" in html and "draft8" in html


def test_a_theory_crash_becomes_the_sections_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path / "run", Plan(arms={"baseline": Arm(), "fast": spec(40)}, repeats=2))

    def boom(*_args: object, **_kw: object) -> None:
        raise RuntimeError("kaput")

    monkeypatch.setattr("specbench.analysis.predicted.arms.run_theory", boom)
    blocks = predicted_blocks(analyse_dir(run).theory)
    assert blocks[0] == Heading(TITLE)
    assert isinstance(blocks[1], Para) and "RuntimeError: kaput" in blocks[1].text
    monkeypatch.setattr("specbench.analysis.result.theory_or_reason", boom)
    blocks = predicted_blocks(analyse_dir(run).theory)
    assert len(blocks) == 2 and not any(isinstance(b, Table) for b in blocks)
    assert isinstance(blocks[1], Para) and "section failed" in blocks[1].text
