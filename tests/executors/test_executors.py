"""The executor seam without an engine: delegation, the local executor's skip rules, the factory,
and the Ray executor's pure helpers (those only where Ray is installed)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from specbench.errors import ConfigError
from specbench.executors import LocalExecutor, make_executor
from specbench.executors.base import CellJob
from specbench.matrix.config import Cell
from specbench.store.rundir import RunStore
from tests.support.runners import RecordingRunner, make_runner


def test_run_delegates_the_cells_to_the_executor(tmp_path: Path) -> None:
    seen: list[tuple[CellJob, list[tuple[str, int]]]] = []

    class Fake:
        kind = "fake"

        def run_cells(self, cells: Sequence[Cell], job: CellJob) -> None:
            seen.append((job, [(c.arm, c.repeat) for c in cells]))

    runner = make_runner(tmp_path)
    runner.executor = Fake()
    runner.run()
    assert seen == [(runner, [(c.arm, c.repeat) for c in runner.cells])]
    assert runner.store.manifest()["finished_at"] is not None


def test_the_local_executor_skips_failed_arms_and_completed_requests(tmp_path: Path) -> None:
    runner = make_runner(tmp_path, RecordingRunner)
    assert isinstance(runner, RecordingRunner)
    base: dict[str, Any] = {"warmup": False, "error": None}
    runner.store.append_record({**base, "arm": "baseline", "prompt_id": "p1", "repeat": 0})
    runner.store.append_record({**base, "arm": "baseline", "prompt_id": "p2", "repeat": 0, "error": {"x": 1}})
    runner.store.append_record({**base, "arm": "draft", "prompt_id": "p0", "repeat": 1, "warmup": True})
    for p in ("p0", "p1", "p2"):
        runner.store.append_record({**base, "arm": "other", "prompt_id": p, "repeat": 1})
    runner.store.set_arm_status("draft", status="failed")
    assert runner.total_todo() == 18 - 1 - 3
    runner.run()  # executor None: LocalExecutor
    assert runner.served == [  # ABBA order; the failed arm and the finished cell (other, 1) skipped
        ("baseline", 0, ["p0", "p2"]),  # p1 done; p2's error is data, not completion
        ("other", 0, ["p0", "p1", "p2"]),
        ("baseline", 1, ["p0", "p1", "p2"]),
    ]
    assert runner.next_seq() == 7  # records already in the store, then the next


def test_make_executor(tmp_path: Path) -> None:
    assert isinstance(make_executor("local"), LocalExecutor)
    with pytest.raises(ConfigError, match=r"unknown executor 'slurm'.*local, ray"):
        make_executor("slurm")


def test_make_executor_ray_without_ray_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name.startswith("specbench.executors.ray") or name.startswith("specbench.executors._ray"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray → ImportError
    with pytest.raises(ConfigError, match=r"pip install 'specbench\[ray\]'"):
        make_executor("ray", address="auto")


def test_ray_resource_requests_per_arm() -> None:
    pytest.importorskip("ray")
    from specbench.executors.ray_executor import RayExecutor, task_options

    ex = RayExecutor(
        resources={"*": {"num_gpus": 1, "accelerator_type:H100": 0.001}, "draft": {"num_cpus": 8, "nvme": 1}}
    )
    assert ex.requested("baseline") == {"num_cpus": 1, "num_gpus": 1, "accelerator_type:H100": 0.001}
    assert task_options(ex.requested("draft")) == {
        "num_cpus": 8,
        "num_gpus": 1,
        "resources": {"accelerator_type:H100": 0.001, "nvme": 1.0},
    }
    assert task_options({"resources": {"gpu_class_a": 1}}) == {"resources": {"gpu_class_a": 1.0}}


def test_hardware_by_arm_sees_arms_on_different_hardware(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from specbench.executors.ray_executor import hardware_by_arm

    store = RunStore(tmp_path / "run")
    store.create({}, resume=False)
    store.write_env({"cpu": "local cpu", "gpus": []})
    h100 = {"labels": ["accelerator_type:H100"], "gpus": ["NVIDIA H100"], "cpu": "x"}
    a100 = {"labels": ["accelerator_type:A100"], "gpus": ["NVIDIA A100"], "cpu": "x"}
    store.append_cell({"arm": "baseline", "repeat": 0, "hardware": h100})
    store.append_cell({"arm": "draft", "repeat": 0, "hardware": a100})
    store.append_cell({"arm": "draft", "repeat": 1, "lost": True, "hardware": h100})  # measured nothing
    store.append_cell({"arm": "local", "repeat": 0})
    assert hardware_by_arm(store) == {
        "baseline": [h100],
        "draft": [a100],
        "local": [{"labels": [], "gpus": [], "cpu": "local cpu"}],
    }
