"""The first hour of a new user, on the real llama-server and a lab pair: `run` in a log file
shows the plan, progress with an ETA, the report path and the decision; a second run's plan
estimates its wall time from the first."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.run.plan import read_plan
from tests.support.lab import Pair
from tests.support.matrices import draft4, write_matrix

pytestmark = pytest.mark.engine


def _specbench(*args: str, log: Path) -> str:
    """The CLI with stdout and stderr in a file, as `specbench run ... > log 2>&1` would."""
    with log.open("w") as out:
        cmd = [sys.executable, "-m", "specbench.cli", *args]
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=500, check=False)
    text = log.read_text()
    assert done.returncode == 0, text[-3000:]
    return text


def test_run_in_a_log_plans_reports_and_decides(llama_server: Path, dense_pair: Pair, tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path, dense_pair, llama_server, {"baseline": [], "draft4": draft4(dense_pair)})
    runs = tmp_path / "runs"
    dry = _specbench("run", str(matrix), "--dry-run", "--out", str(runs / "first"), log=tmp_path / "dry.log")
    assert "arms: baseline, draft4 (2 × 2 repeats = 4 server launches" in dry
    assert "requests: 12 measured + 4 warm-up" in dry and "commands:" in dry
    assert not runs.exists()  # a dry run writes nothing

    text = _specbench("run", str(matrix), "--out", str(runs / "first"), log=tmp_path / "first.log")
    lines = text.splitlines()
    assert lines[0] == "arms: baseline, draft4 (2 × 2 repeats = 4 server launches, arms interleaved)"
    assert lines[4].startswith("estimated wall time: ≈ ")  # one line each: a log is not wrapped
    ticks = [ln for ln in lines if ln.startswith("matrix progress: ")]
    assert 5 <= len(ticks) <= 12 and ticks[-1].startswith("matrix progress: 12/12 requests (100 %), elapsed ")
    assert all("requests/min, ETA " in ln for ln in ticks)
    assert not re.search(r"━ \d+/12 ", text)  # no progress bar's last frame in a log
    page = runs / "first" / "report" / "report.html"
    assert f"report: {page}" in text and page.is_file()
    assert text.rstrip().splitlines()[-1].startswith("decision for natural: ")
    assert read_plan(runs / "first").requests == 12

    # the second plan times itself on the first run: same model, same machine
    again = _specbench(
        "run", str(matrix), "--dry-run", "--out", str(runs / "second"), log=tmp_path / "again.log"
    )
    assert "from first (the same model, engine and arms) on this machine:" in again
    assert "ms per generated token, launches included" in again
