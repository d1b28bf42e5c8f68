"""The plan a run prints before it starts: counts from the matrix, wall time from an earlier run."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from specbench import plan
from specbench.config import Matrix, plan_cells
from specbench.workloads.suites import build_requests


def _matrix(tmp_path: Path, **workload: object) -> Matrix:
    model = tmp_path / "target.gguf"
    model.write_bytes(b"\0" * 1024)
    return Matrix(
        model=str(model),
        arms={"baseline": (), "draft4": ("--spec-type", "draft-simple")},
        workload={"suite": "natural", "max_tokens": 64, "prompts": 6, **workload},  # type: ignore[arg-type]
        repeats=3,
        warmup=1,
    )


def _plan(matrix: Matrix, out: Path, probe: bool = False) -> plan.Plan:
    requests, warmup, concurrency = build_requests(matrix, out.parent)
    return plan.make_plan(matrix, plan_cells(matrix, requests, warmup, concurrency), out, probe=probe)


def test_counts_launches_requests_warmups_and_prompts(tmp_path: Path) -> None:
    p = _plan(_matrix(tmp_path, categories=["coding", "json"]), tmp_path / "runs" / "new")
    assert p.launches == {"baseline": 3, "draft4": 3}
    assert (p.requests, p.warmups, p.per_cell) == (36, 6, 6)
    assert set(p.prompts) == {"coding", "json"} and sum(map(len, p.prompts.values())) == 6
    lines = p.lines()
    assert lines[0] == "arms: baseline, draft4 (2 × 3 repeats = 6 server launches, arms interleaved)"
    assert lines[1].startswith("requests: 36 measured + 6 warm-up (6 per launch, 1 in flight, up to 64")
    assert lines[-1].startswith("estimated wall time: unknown (no finished run of this model")


def _previous(folder: Path, model: str, seconds: int, tokens: list[int], **manifest: object) -> Path:
    folder.mkdir(parents=True)
    meta = {
        "host": platform.node(),
        "matrix": {"model": model},
        "started_at": "2026-05-01T10:00:00+00:00",
        "finished_at": f"2026-05-01T10:{seconds // 60:02d}:{seconds % 60:02d}+00:00",
    }
    (folder / "manifest.json").write_text(json.dumps(meta | manifest))
    rows = [{"usage": {"completion_tokens": n}} for n in tokens] + [{"error": {"type": "ReadTimeout"}}]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_estimate_from_an_earlier_run_of_the_model_on_this_machine(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    # 600 s for 3000 generated tokens: 0.2 s per token, launches included
    _previous(tmp_path / "runs" / "old", matrix.model, 600, [1000, 2000])
    p = _plan(matrix, tmp_path / "runs" / "new")
    _, warmup, _ = build_requests(matrix, tmp_path)
    assert p.output_tokens == 36 * 64 + 6 * sum(r.max_tokens for r in warmup)  # measured + warm-ups
    assert p.estimate.seconds == pytest.approx(0.2 * p.output_tokens)
    assert "from old on this machine: 200 ms per generated token" in p.estimate.basis


@pytest.mark.parametrize(
    "manifest",
    [
        {"host": "another-box"},  # another machine
        {"matrix": {"model": "/models/other.gguf"}},  # another model
        {"resumed_at": "2026-05-01T11:00:00+00:00"},  # wall time spans a pause
        {"finished_at": None},  # interrupted
    ],
)
def test_runs_that_do_not_predict_are_ignored(tmp_path: Path, manifest: dict[str, object]) -> None:
    matrix = _matrix(tmp_path)
    _previous(tmp_path / "runs" / "old", matrix.model, 600, [1000], **manifest)
    assert _plan(matrix, tmp_path / "runs" / "new").estimate.seconds is None


def test_the_newest_earlier_run_wins(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    _previous(tmp_path / "runs" / "a", matrix.model, 100, [1000])
    newer = _previous(tmp_path / "runs" / "b", matrix.model, 300, [1000])
    assert plan.previous_rate(matrix.model, tmp_path / "runs" / "new") == (pytest.approx(0.3), newer)


def test_estimate_from_model_size_on_cpu(tmp_path: Path) -> None:
    p = _plan(_matrix(tmp_path), tmp_path / "runs" / "new", probe=True)
    assert p.estimate.seconds is not None and p.estimate.seconds >= 6 * plan.LAUNCH_S
    assert "CPU decode of a 0 MB model" in p.estimate.basis


def test_plan_round_trips_through_the_run_directory(tmp_path: Path) -> None:
    p = _plan(_matrix(tmp_path), tmp_path)
    assert plan.write_plan(p, tmp_path) == tmp_path / "plan.json"
    assert plan.read_plan(tmp_path) == p
