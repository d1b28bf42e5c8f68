"""Several workloads on the same arms, on the real llama-server and a lab pair (issue 22, item 4):
records carry their workload, `run` decides per workload, and the report gives each workload
its own section and sets them side by side. The matrix is run from another working directory
with a relative model path (item 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.matrices import SHORT_PROMPTS

pytestmark = pytest.mark.engine

SHAPE = {"max_tokens": 12, "prompts": 2, "prompt_file": "prompts.jsonl"}


def _matrix(folder: Path, pair: Pair, llama_server: Path) -> Path:
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in SHORT_PROMPTS))
    matrix = {
        "model": os.path.relpath(pair.target, folder),  # relative to the matrix, not the cwd
        "common_args": ["-c", "2048", "-np", "1"],
        "arms": {
            "baseline": [],
            "draft4": ["-md", os.path.relpath(pair.draft, folder), "--spec-type", "draft-simple",
                       "--spec-draft-n-max", "4"],
        },
        "workloads": [{"suite": "natural", **SHAPE}, {"suite": "single", "scale": 0.2, **SHAPE}],
        "repeats": 2,
        "warmup": 1,
        "forward_probe": False,
        "engine_binary": str(llama_server),
    }  # fmt: skip
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    return path


def test_two_workloads_on_the_same_arms(llama_server: Path, dense_pair: Pair, tmp_path: Path) -> None:
    lab, elsewhere = tmp_path / "lab", tmp_path / "elsewhere"
    lab.mkdir(), elsewhere.mkdir()
    matrix, out = _matrix(lab, dense_pair, llama_server), tmp_path / "run"
    cmd = [sys.executable, "-m", "specbench.cli", "run", str(matrix), "--out", str(out)]
    done = subprocess.run(cmd, cwd=elsewhere, capture_output=True, text=True, timeout=500, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.rstrip().splitlines()[-2:]
    assert last[0].startswith("decision for natural: ") and last[1].startswith("decision for single: ")

    measured = [r for r in RunStore(out).records() if not r["warmup"]]
    by_workload = {w: [r for r in measured if r["workload"] == w] for w in ("natural", "single")}
    assert len(measured) == 16 and all(len(rs) == 8 for rs in by_workload.values())
    for workload, records in by_workload.items():
        assert all(r["prompt_id"].startswith(f"{workload}/short-") for r in records)
        assert {r["arm"] for r in records} == {"baseline", "draft4"}
    # single builds each prompt to ~102 tokens (512 × 0.2: longer than every prompt as written,
    # since a fitted prompt may not miss its target); natural sends them as written
    assert all(r["request"]["target_tokens"] == 102 for r in by_workload["single"])
    assert all(r["request"]["target_tokens"] is None for r in by_workload["natural"])
    assert all(r["error"] is None for r in measured)

    findings = json.loads((out / "report" / "findings.json").read_text())
    assert [d["workload"] for d in findings["decisions"]] == ["natural", "single"]
    assert {c["workload"] for c in findings["crossovers"]} == {"natural", "single"}
    report = (out / "report" / "report.md").read_text()
    sections = ["## Workloads by arm", "## Workload natural", "## Workload single"]
    assert all(s in report for s in sections), report[:3000]
    assert report.index(sections[0]) < report.index(sections[1]) < report.index(sections[2])
    assert report.count("### Crossover length") == 2 and "\n## Crossover length" not in report
    assert "Workloads (2): natural (suite natural: 2 prompts" in report


def test_the_bundled_single_suite_fits_a_small_vocabulary_model(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    """Issue 28, item 6: on the lab pair (one token per character) 'repetitive-03' fitted to 639
    tokens against 512 and ended the run. Bundled prompts are cut where their design allows and
    filled, so every one lands on the target; the plan of a continued run names the cut ones."""
    from specbench import api

    matrix = {
        "model": str(dense_pair.target),
        "common_args": ["-c", "2048", "-np", "1"],
        "arms": {"baseline": []},
        "workload": {"suite": "single", "max_tokens": 8},  # the bundled prompts, target 512
        "repeats": 1,
        "warmup": 0,
        "forward_probe": False,
        "engine_binary": str(llama_server),
    }
    path, out = tmp_path / "matrix.yaml", tmp_path / "run"
    path.write_text(yaml.safe_dump(matrix))
    api.prepare_run(path, out).run()
    store = RunStore(out)
    records = store.records()
    assert len(records) == 10 and all(r["error"] is None for r in records), records[:1]
    fitted = store.fitted_prompts()
    assert "repetitive-03" in fitted and fitted["repetitive-03"]["counted_by"] == "tokenize"
    assert all(abs(f["tokens"] - 512) <= 0.1 * 512 for f in fitted.values())
    plan = api.plan_run(path, out, str(llama_server), probe=False, resume=True)
    cut = [w for w in plan.lines() if "bundled prompts cut to fit" in w]
    assert len(cut) == 1 and "repetitive-03 (kept " in cut[0], plan.lines()
