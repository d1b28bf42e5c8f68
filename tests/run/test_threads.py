"""Issue 44: arms that ask llama.cpp for more threads than the cores free of other work are
warned of in the plan (the dry run's and the run's), with the figures measured at plan time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specbench.engines.llamacpp import LlamaCppEngine
from specbench.matrix.config import Matrix, plan_cells
from specbench.run import machineload, prepare
from specbench.workloads.suites import build_requests


def _plan_lines(tmp_path: Path, common: tuple[str, ...], arms: dict[str, tuple[str, ...]]) -> list[str]:
    model = tmp_path / "target.gguf"
    model.write_bytes(b"\0" * 1024)
    matrix = Matrix(
        model=str(model),
        common_args=common,
        arms=arms,
        workload={"suite": "natural", "max_tokens": 8, "prompts": 1},  # type: ignore[arg-type]
        repeats=1,
    )
    requests, warmup, concurrency = build_requests(matrix, tmp_path)
    cells = plan_cells(matrix, requests, warmup, concurrency)
    plan = prepare.plan_for(matrix, LlamaCppEngine(), cells, tmp_path / "run", probe=False)
    return [line for line in plan.lines() if line.startswith("warning:")]


def test_threads_beyond_the_free_cores_are_a_plan_warning_with_the_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prepare, "cpu_room", lambda: (2, 1.1))  # 2 cores, one of them busy
    lines = _plan_lines(
        tmp_path, ("-c", "2048"), {"baseline": ("-t", "4"), "draft": ("--threads=4",), "one": ("-t", "1")}
    )
    assert lines == [
        "warning: arm baseline: -t 4 asks for 4 threads; this machine has 2 cores, about 1.1 busy: "
        "decode may be several times slower; use -t 1",
        "warning: arm draft: --threads 4 asks for 4 threads; this machine has 2 cores, about 1.1 busy: "
        "decode may be several times slower; use --threads 1",
    ]


def test_common_args_threads_name_every_arm_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepare, "cpu_room", lambda: (4, 0.2))
    lines = _plan_lines(tmp_path, ("-t", "8"), {"baseline": (), "spec": ("--spec-type", "ngram-mod")})
    assert lines == [
        "warning: arms baseline, spec: -t 8 asks for 8 threads; this machine has 4 cores, about 0.2 busy: "
        "decode may be several times slower; use -t 4"
    ]


def test_no_thread_flag_or_one_thread_is_not_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse() -> tuple[int, float]:
        raise AssertionError("the machine is sampled only when an arm asks for threads")

    monkeypatch.setattr(prepare, "cpu_room", refuse)
    assert _plan_lines(tmp_path, ("-t", "1"), {"baseline": (), "other": ("-c", "512")}) == []


@pytest.mark.parametrize(
    ("threads", "cores", "busy", "room"),
    [
        (2, 2, 0.0, None),  # an idle machine: every core free
        (2, 2, 0.5, None),  # half a core busy: -t 2 still decoded faster than -t 1 (395 vs 325 tok/s)
        (2, 2, 1.0, 1),  # one core busy: -t 2 decoded at a third of -t 1 (90 vs 271 tok/s)
        (4, 2, 0.0, 2),  # more threads than cores: 101 vs 520 tok/s at -t 2
        (3, 2, 2.6, 1),  # a saturated machine still offers one thread
    ],
)
def test_the_rule_counts_free_cores_rounded(threads: int, cores: int, busy: float, room: int | None) -> None:
    warning = machineload.threads_warning("-t", threads, cores, busy)
    assert (warning is None) if room is None else (warning is not None and warning.endswith(f"use -t {room}"))


def test_the_machine_is_measured_on_the_cores_this_process_may_use() -> None:
    cores, busy = machineload.cpu_room(0.05)
    assert cores == len(os.sched_getaffinity(0)) and 0.0 <= busy <= cores


@pytest.mark.parametrize(
    ("args", "found"),
    [
        (["-t", "4"], ("-t", 4)),
        (["--threads=3"], ("--threads", 3)),
        (["-t", "2", "--threads", "6"], ("--threads", 6)),  # the last one wins, as llama.cpp parses
        (["-t", "-1"], None),  # llama.cpp's own default
        (["--threads", "many"], None),  # refused by the engine at launch, not guessed here
        (["-tb", "8", "-td", "8"], None),  # prefill and draft threads are other flags
    ],
)
def test_llama_cpp_reads_its_own_thread_flag(args: list[str], found: tuple[str, int] | None) -> None:
    assert LlamaCppEngine().threads(args) == found
