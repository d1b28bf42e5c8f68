"""Issue 44: a plan said ≈ 1:26–1:51 and the run took 23:12; nothing said so until the end. After
its first launch the run compares the time it took with the plan's pace and, when it is off by
more than 2×, prints one line with what the rest looks like at the pace seen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specbench.engines.llamacpp import LlamaCppEngine
from specbench.matrix.config import Cell, Matrix, RequestSpec, plan_cells
from specbench.run.console import console
from specbench.run.launch import Server
from specbench.run.pace import OFF, Pace, cell_tokens
from specbench.run.plan import Estimate
from specbench.run.progress import RunProgress
from specbench.run.runner import Runner
from specbench.store.rundir import RunStore
from specbench.workloads.suites import build_requests


def test_a_first_launch_within_twice_the_plans_pace_says_nothing() -> None:
    pace = Pace(per_token=0.1, planned="≈ 1:00", left=600)
    assert pace.first_launch(elapsed=OFF * 10.0 * 0.99, tokens=100) is None  # 1.98× the 10 s planned
    assert pace.first_launch(elapsed=100.0, tokens=100) is None  # only the first launch is judged


def test_a_slow_first_launch_says_so_and_the_new_estimate() -> None:
    pace = Pace(per_token=0.1, planned="≈ 1:00", left=600)  # 600 tokens: 1:00 at the plan's pace
    line = pace.first_launch(elapsed=80.0, tokens=100)  # 0.8 s per token: 8× the plan's
    assert line == (
        "pace: the first launch took 1:20 where the plan's pace gave it 0:10 (8.0× slower): the rest "
        "of the run looks like ≈ 6:40 at this pace (the plan said ≈ 1:00 in all)"
    )


def test_a_fast_first_launch_says_so_too() -> None:
    line = Pace(per_token=1.0, planned="≈ 10:00", left=600).first_launch(elapsed=20.0, tokens=100)
    assert line is not None and "(5.0× faster)" in line and "≈ 1:40 at this pace" in line


def test_the_pace_comes_from_the_plans_estimate() -> None:
    pace = Pace.of(Estimate(120.0, "basis", per_token=0.25))
    assert pace is not None and (pace.per_token, pace.planned) == (0.25, "≈ 2:00")
    assert Pace.of(Estimate(None, "no basis")) is None


class _Launcher:
    def start(self, cell: Cell) -> Server:
        return Server("http://127.0.0.1:1")  # no process: alive, nothing to stop


class _Driver:
    def serve(self, cell: Cell, todo: list[RequestSpec], server: Server, attempt: int) -> None:
        return None


def _runner(tmp_path: Path, pace: Pace, clock: Any) -> tuple[Runner, list[tuple[str, dict[str, Any]]]]:
    matrix = Matrix(
        model=str(tmp_path / "target.gguf"),
        arms={"baseline": (), "other": ("--spec-type", "ngram-simple")},
        workload={"suite": "natural", "max_tokens": 10, "prompts": 2},
        repeats=2,
        warmup=1,
    )
    requests, warmup, concurrency = build_requests(matrix, tmp_path)
    store = RunStore(tmp_path / "run")
    store.create({"matrix": matrix.model_dump(mode="json")}, resume=False)
    seen: list[tuple[str, dict[str, Any]]] = []
    runner = Runner(
        matrix=matrix,
        engine=LlamaCppEngine(tmp_path / "llama-server"),
        store=store,
        cells=plan_cells(matrix, requests, warmup, concurrency),
        observe=lambda event, info: seen.append((event, info)),
        pace=pace,
        clock=clock,
    )
    return runner, seen


def test_the_runner_says_after_its_first_launch_that_the_plan_was_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = iter(float(t) for t in range(0, 1000, 30))  # each launch takes 30 s
    runner, seen = _runner(tmp_path, Pace(per_token=0.1, planned="≈ 0:20"), lambda: next(ticks))
    monkeypatch.setattr(Runner, "_launcher", lambda self: _Launcher())
    monkeypatch.setattr(Runner, "_driver", lambda self: _Driver())
    runner.run()
    first = runner.cells[0]
    tokens = cell_tokens(first, list(first.requests), True)  # 2 requests and a warm-up
    lines = [info["text"] for event, info in seen if event == "pace"]
    assert runner.pace is not None and runner.pace.left == 4 * tokens  # 4 launches planned
    rest = 3 * 30  # three more launches of the same work at 30 s each
    assert lines == [
        f"pace: the first launch took 0:30 where the plan's pace gave it 0:0{round(0.1 * tokens)} "
        f"({30 / (0.1 * tokens):.1f}× slower): the rest of the run looks like ≈ 1:{rest - 60:02d} at this "
        "pace (the plan said ≈ 0:20 in all)"
    ]


def test_the_progress_display_prints_the_pace_line() -> None:
    with console.capture() as captured, RunProgress(4) as progress:
        progress("pace", {"text": "pace: the first launch took 1:20 [x]"})
    assert "pace: the first launch took 1:20 [x]" in captured.get()
