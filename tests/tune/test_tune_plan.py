"""``specbench tune --dry-run``: the candidates, what the budget admits and the time, launching
nothing. The engine binary is a stand-in script (a plan only spells its command line)."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specbench import api
from specbench.cli import app
from specbench.errors import StoreError
from tests.support.records import write_records


def _tune_matrix(tmp_path: Path, **tune: object) -> Path:
    server = tmp_path / "llama-server"
    server.write_text("#!/bin/sh\nexit 0\n")
    server.chmod(0o755)
    (tmp_path / "target.gguf").write_bytes(b"\0" * 4096)
    (tmp_path / "draft.gguf").write_bytes(b"\0" * 512)
    body = {
        "model": "target.gguf",
        "engine_binary": str(server),
        "arms": {"baseline": []},
        "workload": {"suite": "natural", "prompts": 2, "max_tokens": 16},
        "tune": {
            "dimensions": {
                "draft_model": ["draft.gguf"],
                "draft_n_max": [2, 4, 8],
                "draft_p_min": [0.0, 0.5],
            },
            "budget": {"launches": 12},
            **tune,
        },
    }
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_dry_run_shows_candidates_what_the_budget_admits_and_launches_nothing(tmp_path: Path) -> None:
    matrix, out = _tune_matrix(tmp_path, screen=False), tmp_path / "runs" / "tune"  # the budget's rule alone
    result = CliRunner().invoke(app, ["tune", str(matrix), "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert not out.exists()  # nothing written, nothing launched
    assert f"tune plan for {out} (dry run: nothing launched)" in text
    assert "budget per workload: 12 launches; max_rounds 8 per stage" in text
    assert "baseline (speculation off): " in text and "--port 8080" in text
    # 12 launches pay for three rounds of the baseline and three candidates: 3 of 6 race first
    assert "the budget admits 3 of 6 candidates at the start" in text
    numbered = [ln for ln in text.splitlines() if ln.startswith("    ") and ". " in ln]
    assert len(numbered) == 6 and sum("waits (budget)" in ln for ln in numbered) == 3
    assert "--spec-type draft-simple -md" in numbered[0]
    assert "launches: 12 to 12; requests: 36 to 36" in text  # 2 measured + 1 warm-up per launch
    assert "estimated wall time: unknown" in text or "estimated wall time: ≈ " in text


def test_dry_run_times_the_range_from_an_earlier_run(tmp_path: Path) -> None:
    matrix = _tune_matrix(tmp_path, budget={"launches": 40}, refine=False, max_rounds=4, screen=False)
    out = tmp_path / "runs" / "tune"
    old = out / "earlier"  # beside the workload's run directory (runs/tune/natural)
    old.mkdir(parents=True)
    manifest = {
        "host": platform.node(),
        # the same model, engine and arms (issue 44: a run with other flags times nothing)
        "matrix": {"model": str(tmp_path / "target.gguf"), "engine": "llamacpp", "arms": {"baseline": []}},
        "started_at": "2026-05-01T10:00:00+00:00",
        "finished_at": "2026-05-01T10:01:40+00:00",
    }
    (old / "manifest.json").write_text(json.dumps(manifest))
    rows = [{"usage": {"completion_tokens": 50}} for _ in range(20)]  # 100 s for 1000 tokens
    write_records(old / "records.jsonl", rows)
    plan = api.plan_tune(matrix, out, probe=False)
    (w,) = plan.workloads
    # 40 launches pay for all six candidates: 3 rounds × 7 arms at least, 4 rounds × 7 at most
    assert w.admitted == [c.name for c in w.candidates] and w.launches == (21, 28)
    per_launch = 16 * 3  # max_tokens × (2 measured + 1 warm-up)
    assert w.estimate.low == pytest.approx(0.1 * 21 * per_launch)
    assert w.estimate.seconds == pytest.approx(0.1 * 28 * per_launch)
    line = next(ln for ln in plan.lines() if "estimated wall time" in ln)
    assert (
        "to" in line
        and "from earlier (the same model, engine and arms) on this machine" in line
        and "refinement: none (refine: false)" in ("\n".join(plan.lines()))
    )


def test_dry_run_refuses_an_existing_tune_without_resume(tmp_path: Path) -> None:
    matrix, out = _tune_matrix(tmp_path), tmp_path / "tune"
    out.mkdir()
    (out / "tune.json").write_text(json.dumps({"workloads": {}}))
    with pytest.raises(StoreError, match="already holds a tune: pass --resume"):
        api.plan_tune(matrix, out, probe=False)
    assert api.plan_tune(matrix, out, probe=False, resume=True).workloads


def test_dry_run_says_what_the_screening_round_measures_and_that_each_candidate_is_a_launch(
    tmp_path: Path,
) -> None:
    plan = api.plan_tune(_tune_matrix(tmp_path, budget={"launches": 40}), tmp_path / "tune", probe=False)
    (w,) = plan.workloads
    assert w.screening == ("dmdraft-k8-p0_0",)  # the largest K, p-min off
    text = "\n".join(plan.lines())
    assert "screening: rounds 1–2 measure the baseline (with the forward probe) and dmdraft-k8-p0_0" in text
    assert "each candidate needs its own launch" in text
    assert sum("predicted after round 2" in ln for ln in text.splitlines()) == 5
    assert w.launches[0] == 2 * 2 + 1 * 3  # rounds 1–2 (baseline + 1), then leader and runner-up


def test_a_lookup_space_may_end_after_its_screening_rounds(tmp_path: Path) -> None:
    dims = {"method": ["ngram-simple"], "ngram_m": [4, 8], "ngram_n": [2, 4]}
    matrix = _tune_matrix(tmp_path, dimensions=dims, budget={"launches": 40})
    (w,) = api.plan_tune(matrix, tmp_path / "tune", probe=False).workloads
    assert w.launches[0] == 2 * 2  # drafting nothing at m 8, n 2: the other n may take one round more
