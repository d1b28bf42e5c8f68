"""BENCHMARK_ENV.md never states what was not recorded: a missing env.json (or a field of it)
reads "unknown", not "none detected" or "None / None". Runs are SYNTHETIC (tests/support/synth.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specbench.report import render_report
from tests.support.synth import Arm, Plan, make_run, spec


def _run(tmp_path: Path) -> Path:
    return make_run(
        tmp_path / "run", Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}, repeats=3)
    )


def _env_md(run: Path) -> str:
    render_report(run, ["md"])
    return (run / "report" / "BENCHMARK_ENV.md").read_text()


def test_a_missing_env_json_is_unknown_not_none_detected(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run / "env.json").unlink()
    text = _env_md(run)
    assert "env.json is missing from the run directory" in text
    assert "none detected" not in text and "None / None" not in text
    assert "## Command line of every arm" in text  # the manifest still says how arms were served


def test_fields_never_recorded_read_unknown(tmp_path: Path) -> None:
    run = _run(tmp_path)
    env = json.loads((run / "env.json").read_text())
    for key in ("gpus", "cpu_count_physical", "cpu_count_logical", "cpu"):
        env.pop(key, None)
    (run / "env.json").write_text(json.dumps(env))
    text = _env_md(run)
    assert "| GPU, driver, CUDA | unknown |" in text.replace("  ", " ")
    assert "| cores (physical / logical) | unknown |" in text.replace("  ", " ")
    assert "none detected" not in text and "None" not in text


def test_report_cli_warns_of_a_missing_env_json(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run / "env.json").unlink()
    done = subprocess.run(
        [sys.executable, "-m", "specbench.cli", "report", str(run), "--format", "md"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "env.json is missing" in done.stdout + done.stderr
