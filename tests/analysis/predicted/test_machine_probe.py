"""The theory's machine inputs are stored with the run and only read back: the same run directory
gives the same prediction on any day. Runs here are SYNTHETIC (tests/support/synth.py); the probe
itself is the real one (a small copy and matmul on this machine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis.predicted.arms import run_theory, theory_or_reason
from specbench.errors import ConfigError
from specbench.store import machineprobe as machine
from specbench.store.machineprobe import FILENAME, record_machine_probe, stored_cpu
from tests.support.synth import Arm, Plan, lab_truth, make_run, spec, use_lab_model


def _cpu_run(root: Path) -> Path:
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=20), "draft8": spec(34)}, prompts_per_category=2, repeats=2
    )
    return use_lab_model(make_run(root, plan), lab_truth("membound", "dense"))  # a CPU run


def _store(run: Path, bandwidth_gbs: float, tflops: float = 1.0) -> None:
    probe = {"version": 1, "cpu": {"bandwidth_gbs": bandwidth_gbs, "tflops": tflops, "memory_gb": 8.0}}
    (run / FILENAME).write_text(json.dumps(probe))


def _no_live_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kw: object) -> None:
        raise AssertionError("the theory probed the machine while rendering")

    for where in ("specbench.theory.hardware", "specbench.theory.presets", "specbench.store.machineprobe"):
        monkeypatch.setattr(f"{where}.probe_cpu", refuse)


def test_the_runner_probe_is_written_once_and_kept_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = machine.probe_cpu
    monkeypatch.setattr(machine, "probe_cpu", lambda: small(size_bytes=8 * 2**20, reps=2))
    first = record_machine_probe(tmp_path)
    assert first["cpu"]["bandwidth_gbs"] > 0 and first["cpu"]["tflops"] > 0
    _no_live_probe(monkeypatch)
    assert record_machine_probe(tmp_path) == first  # a resumed run keeps its first probe
    assert stored_cpu(tmp_path).bandwidth_gbs == first["cpu"]["bandwidth_gbs"]


def test_report_and_calibrate_read_the_stored_probe_and_never_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _cpu_run(tmp_path / "run")
    _store(run, 20.0)
    _no_live_probe(monkeypatch)
    a, b = run_theory(run), run_theory(run)
    assert a.setup.gpu.bandwidth_gbs == 20.0 and a.to_dict() == b.to_dict()
    assert "20.0 GB/s" in a.describe()


def test_a_run_without_a_stored_probe_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _cpu_run(tmp_path / "run")
    _no_live_probe(monkeypatch)
    reason = theory_or_reason(run)
    assert isinstance(reason, str) and FILENAME in reason and "stores no machine probe" in reason


def test_a_broken_probe_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / FILENAME).write_text(json.dumps({"cpu": {"bandwidth_gbs": "fast"}}))
    with pytest.raises(ConfigError, match=FILENAME):
        stored_cpu(tmp_path)
    _store(tmp_path, -1.0)
    with pytest.raises(ConfigError, match="positive"):
        stored_cpu(tmp_path)


def test_the_runner_probes_before_the_first_cell_only_when_serving_locally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specbench.executors import LocalExecutor
    from specbench.run import runner as runner_module
    from tests.support.runners import RecordingRunner, make_runner

    events: list[str] = []
    monkeypatch.setattr(
        runner_module, "record_machine_probe", lambda root: events.append(f"probe {root.name}")
    )

    class Cells(RecordingRunner):
        def run_cell(self, cell: Any, todo: Any) -> None:
            events.append("cell")

    local = make_runner(tmp_path / "a", Cells)
    local.executor = LocalExecutor()
    local.run()
    assert events[0] == "probe run" and events.count("probe run") == 1 and "cell" in events

    class Cluster:
        kind = "fake cluster"

        def run_cells(self, cells: Any, job: Any) -> None:
            events.append("remote cells")

    events.clear()
    remote = make_runner(tmp_path / "b")
    remote.executor = Cluster()
    remote.run()
    assert events == ["remote cells"]  # a cluster's cells run elsewhere: this machine is not probed
