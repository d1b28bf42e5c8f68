"""What `specbench run` ends with: the report path and one decision line per workload (SYNTHETIC runs)."""

from __future__ import annotations

from pathlib import Path

from specbench import api
from tests.support.synth import Arm, Plan, make_run, spec


def _run(root: Path) -> Path:
    return make_run(root, Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}, repeats=3))


def test_run_ends_with_the_report_path_and_the_decision(tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    lines = api.finish_lines(run)
    page = run / "report" / "report.html"
    assert lines[0] == f"report: {page}" and page.is_file()
    assert len(lines) == 2 and lines[1].startswith("decision for single: fast (decode ×1.5")


def test_no_report_writes_nothing_and_says_how(tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    lines = api.finish_lines(run, report=False)
    assert not (run / "report").exists()
    assert lines[0] == f"report: not written (--no-report); write it with `specbench report {run}`"
    assert lines[1].startswith("decision for single: fast (decode ×1.5")


def test_the_run_loaded_once_gives_the_same_ending(tmp_path: Path) -> None:
    """The end of `specbench run` hands its loaded run to the checks and the report instead of
    loading (parsing and measuring) the records again; the lines are the same either way."""
    from specbench.analysis import analyse_dir

    run = _run(tmp_path / "run")
    result = analyse_dir(run)
    assert api.run_problems(run, result.run.records) == api.run_problems(run) == []
    assert api.finish_lines(run, report=False, analysis=result) == api.finish_lines(run, report=False)
    assert api.finish_lines(run, analysis=result) == api.finish_lines(run)
