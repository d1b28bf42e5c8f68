"""The README's rate-and-goodput example (examples/llamacpp-rate-sweep.yaml) end to end on the real
llama-server (issue 19, items 3–4): every arm runs each swept rate as its own open-loop phase on
a stored schedule, and the report gives goodput per arm and rate and the rate-sweep table. The
example's membound lab pair is swapped for the tiny one (same tokenizer and format, ~1 MB) so
the test stays fast; everything else is the example as shipped."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specbench.analysis import load_run
from specbench.analysis.tables import goodput as gp
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.paths import EXAMPLES

pytestmark = pytest.mark.engine


def _example(folder: Path, pair: Pair, llama_server: Path) -> Path:
    """The example matrix beside its prompt file and a lab/ folder holding the tiny pair."""
    (folder / "lab").mkdir(parents=True)
    shutil.copy(pair.target, folder / "lab" / "target.gguf")
    shutil.copy(pair.draft, folder / "lab" / "draft.gguf")
    shutil.copy(EXAMPLES / "short-prompts.jsonl", folder)
    matrix = yaml.safe_load((EXAMPLES / "llamacpp-rate-sweep.yaml").read_text())
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump({**matrix, "engine_binary": str(llama_server)}))
    return path


def test_rate_sweep_example_reports_goodput_per_rate(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    matrix = _example(tmp_path / "example", dense_pair, llama_server)
    shipped = yaml.safe_load(matrix.read_text())
    rates, arms = shipped["workload"]["rates"], list(shipped["arms"])
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "specbench.cli", "run", str(matrix), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    measured = [r for r in RunStore(out).records() if not r["warmup"]]
    assert len(measured) == len(arms) * shipped["repeats"] * len(rates) * shipped["workload"]["prompts"]
    assert all(r["error"] is None for r in measured)
    for rate in rates:  # each rate is its own phase, sent on its own stored schedule
        phase = [r for r in measured if r["phase"] == f"r{rate:g}"]
        assert phase and all(r["arrival"]["rate"] == rate and "lateness_ms" in r for r in phase)
        stored = json.loads((out / "schedules" / f"{arms[0]}-r0-r{rate:g}.json").read_text())
        assert stored["rate"] == rate and len(stored["offsets_s"]) == shipped["workload"]["prompts"]

    per_arm, table, summary, _ = gp.goodput_tables(load_run(out))
    assert len(per_arm) == len(arms) * len(rates) and (per_arm["launches"] == shipped["repeats"]).all()
    assert ((per_arm["attainment"] >= 0) & (per_arm["attainment"] <= 1)).all()
    assert (per_arm["goodput_req_s"] <= per_arm["achieved_rate"] + 1e-9).all()  # good ⊆ completed
    assert list(summary["arm"]) == arms and len(table) == len(per_arm)
    report = (out / "report" / "report.md").read_text()
    assert "## Goodput and load" in report and "### Rate sweep" in report
    slo = shipped["slo"]
    assert (
        f"SLOs: TTFT ≤ {slo['ttft_ms']:g} ms, TPOT ≤ {slo['tpot_ms']:g} ms, E2E ≤ {slo['e2e_ms']:g} ms"
        in report
    )
