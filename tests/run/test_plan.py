"""The plan a run prints before it starts: counts from the matrix, wall time from an earlier run."""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path
from typing import Any

import pytest

from specbench import api
from specbench.errors import ConfigError, StoreError
from specbench.lab.make import LabSpec, make_pair
from specbench.matrix.config import Matrix, plan_cells
from specbench.run import plan
from specbench.theory.arch import active_params, total_params
from specbench.theory.gguf_header import architecture_from_gguf
from specbench.workloads.suites import build_requests
from tests.support.records import write_records


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


@pytest.fixture(autouse=True)
def _quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that probes this machine scales its estimate by the load it samples (planload.py):
    these tests fix the sample at a quiet 2-core machine (2 engine threads find 2 free cores)."""
    monkeypatch.setattr(plan, "cpu_room", lambda *a, **k: (2, 0.0))


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


def _previous(folder: Path, of: Matrix, seconds: int, tokens: list[int], **manifest: Any) -> Path:
    """An earlier run of matrix ``of`` (its manifest's ``matrix`` changed by ``manifest["matrix"]``)."""
    folder.mkdir(parents=True)
    meta = {
        "host": platform.node(),
        "matrix": {**of.model_dump(mode="json"), **manifest.pop("matrix", {})},
        "started_at": "2026-05-01T10:00:00+00:00",
        "finished_at": f"2026-05-01T10:{seconds // 60:02d}:{seconds % 60:02d}+00:00",
    }
    (folder / "manifest.json").write_text(json.dumps(meta | manifest))
    # each count spread over requests, so that the run is large enough to be a basis
    rows = [{"usage": {"completion_tokens": n / 12}} for n in tokens for _ in range(12)]
    rows += [{"error": {"type": "ReadTimeout"}}, {"warmup": True, "usage": {"completion_tokens": 0}}]
    write_records(folder / "records.jsonl", rows)
    return folder


def test_estimate_from_an_earlier_run_of_the_model_on_this_machine(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    # 600 s for 3000 generated tokens: 0.2 s per token, launches included
    _previous(tmp_path / "runs" / "old", matrix, 600, [1000, 2000])
    p = _plan(matrix, tmp_path / "runs" / "new")
    _, warmup, _ = build_requests(matrix, tmp_path)
    assert p.output_tokens == 36 * 64 + 6 * sum(r.max_tokens for r in warmup)  # measured + warm-ups
    assert p.estimate.seconds == pytest.approx(0.2 * p.output_tokens)
    assert "from old (the same model, engine and arms) on this machine: 200 ms per generated token" in (
        p.estimate.basis
    )


@pytest.mark.parametrize(
    "manifest",
    [
        {"host": "another-box"},  # another machine
        {"matrix": {"model": "/models/other.gguf"}},  # another model
        {"resumed_at": "2026-05-01T11:00:00+00:00"},  # wall time spans a pause
        {"finished_at": None},  # interrupted
        # Issue 44: "449 ms per generated token" borrowed from a sibling with other flags said
        # 13:29 for a run of 1:14. Only the same engine, model and arm arguments time a run.
        {"matrix": {"arms": {"baseline": [], "draft4": ["--spec-type", "ngram-simple"]}}},  # an arm's flags
        {"matrix": {"arms": {"baseline": []}}},  # fewer arms
        {"matrix": {"common_args": ["-t", "1"]}},  # flags every arm shares
        {"matrix": {"engine": "vllm"}},  # another engine
    ],
)
def test_runs_that_do_not_predict_are_ignored(tmp_path: Path, manifest: dict[str, Any]) -> None:
    matrix = _matrix(tmp_path)
    _previous(tmp_path / "runs" / "old", matrix, 600, [1000], **manifest)
    p = _plan(matrix, tmp_path / "runs" / "new")
    assert p.estimate.seconds is None and p.estimate.basis.startswith(
        "no finished run of this model with these"
    )


def test_arms_named_otherwise_with_the_same_flags_are_a_basis(tmp_path: Path) -> None:
    """The arms' flags set the time per token, not their names."""
    matrix = _matrix(tmp_path)
    renamed = {"arms": {"base": [], "spec": ["--spec-type", "draft-simple"]}}
    old = _previous(tmp_path / "runs" / "old", matrix, 600, [1000, 2000], matrix=renamed)
    assert plan.previous_rate(matrix, tmp_path / "runs" / "new") == (pytest.approx(0.2), old)


def test_the_newest_earlier_run_wins(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    _previous(tmp_path / "runs" / "a", matrix, 100, [1000])
    newer = _previous(tmp_path / "runs" / "b", matrix, 300, [1000])
    assert plan.previous_rate(matrix, tmp_path / "runs" / "new") == (pytest.approx(0.3), newer)


def test_estimate_from_model_size_on_cpu(tmp_path: Path) -> None:
    p = _plan(_matrix(tmp_path), tmp_path / "runs" / "new", probe=True)
    assert p.estimate.seconds is not None and p.estimate.seconds >= 6 * plan.LAUNCH_S
    assert "CPU decode of a 0 MB model" in p.estimate.basis


def test_plan_round_trips_through_the_run_directory(tmp_path: Path) -> None:
    p = _plan(_matrix(tmp_path), tmp_path)
    assert plan.write_plan(p, tmp_path) == tmp_path / "plan.json"
    assert plan.read_plan(tmp_path) == p


def test_estimate_names_the_copy_bandwidth_it_measured(tmp_path: Path) -> None:
    basis = _plan(_matrix(tmp_path), tmp_path / "runs" / "new", probe=True).estimate.basis
    rate, copy = (
        float(x) for x in re.findall(r"at ([\d.]+) GB/s \(60 % of the ([\d.]+) GB/s copy", basis)[0]
    )
    assert rate == pytest.approx(0.6 * copy, abs=0.1)  # one measurement, both figures from it


def test_a_moe_model_reads_only_its_routed_experts_per_token(tmp_path: Path) -> None:
    make_pair(LabSpec(arch="moe"), tmp_path / "moe")
    model = tmp_path / "moe" / "target.gguf"
    arch = architecture_from_gguf(model)
    read, how = plan.bytes_per_token(model)
    assert read == pytest.approx(model.stat().st_size * active_params(arch) / total_params(arch))
    assert read < 0.5 * model.stat().st_size and f"{arch.top_k} of {arch.experts} experts" in how
    dense = tmp_path / "target.gguf"
    dense.write_bytes(b"\0" * 1024)  # not a readable GGUF: every byte counts
    assert plan.bytes_per_token(dense) == (1024.0, "reading every weight per token")


def _lab_matrix(tmp_path: Path, arms: str) -> Path:
    make_pair(LabSpec(), tmp_path / "lab")
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "model: lab/target.gguf\nrepeats: 1\nworkload: {suite: natural, prompts: 1, max_tokens: 8}\n"
        f"arms:\n{arms}"
    )
    return matrix


def test_dry_run_warns_of_a_draft_model_without_spec_type(tmp_path: Path, llama_server: Path) -> None:
    matrix = _lab_matrix(
        tmp_path,
        "  baseline: []\n  silent: [-md, lab/draft.gguf]\n"
        "  draft4: [-md, lab/draft.gguf, --spec-type, draft-simple]\n",
    )
    p = api.plan_run(matrix, tmp_path / "run", str(llama_server), probe=False)
    assert [w for w in p.lines() if w.startswith("warning:")] == [
        "warning: arm silent: a draft model but no --spec-type: llama.cpp will not speculate "
        "(add --spec-type draft-simple)"
    ]


def test_dry_run_refuses_what_the_run_would_refuse(tmp_path: Path, llama_server: Path) -> None:
    matrix = _lab_matrix(tmp_path, "  baseline: []\n")
    with pytest.raises(ConfigError, match="--retry-failed: only with --resume"):
        api.plan_run(matrix, tmp_path / "run", str(llama_server), probe=False, retry_failed=True)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text("{}")
    with pytest.raises(StoreError, match="already holds a run: pass --resume"):
        api.plan_run(matrix, tmp_path / "run", str(llama_server), probe=False)
    assert api.plan_run(matrix, tmp_path / "run", str(llama_server), probe=False, resume=True).launches == {
        "baseline": 1
    }


def test_dry_run_warns_when_gpu_flags_meet_the_vllm_cpu_build(tmp_path: Path) -> None:
    from specbench.engines.install_vllm import cached_binary, installed, vllm_for_run
    from specbench.engines.vllm import VllmEngine

    if not installed() or VllmEngine(vllm_for_run())._cpu_build() is None:
        pytest.skip("needs the managed vLLM CPU build as the vllm a run would use")
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "engine: vllm\nmodel: org/model\nrepeats: 1\n"
        "workload: {suite: natural, prompts: 1, max_tokens: 8}\n"
        "common_args: [--gpu-memory-utilization, '0.9']\n"
        "arms:\n  baseline: []\n  mtp: [--max-num-seqs, '4']\n"
    )
    p = api.plan_run(matrix, tmp_path / "run", probe=False)
    assert p.warnings == [
        f"arms baseline, mtp: GPU flags, but vLLM's CPU build ({cached_binary()}) would serve them: "
        "put a GPU vLLM on PATH or set engine_binary"
    ]


@pytest.mark.parametrize(
    "broken",
    [
        "[]",  # JSON, but not an object
        '{"host": "HOST", "matrix": "a string", "started_at": "x", "finished_at": "y"}',
        '{"host": "HOST", "matrix": {"model": "MODEL"}, "started_at": "yesterday", "finished_at": "today"}',
        '{"host": "HOST", "matrix": {"model": "MODEL"}, "started_at": 1, "finished_at": 2}',
    ],
)
def test_a_malformed_manifest_beside_out_is_skipped(tmp_path: Path, broken: str) -> None:
    """Issue 29: any run whose --out sits beside a folder holding a malformed manifest.json."""
    matrix = _matrix(tmp_path)
    good = _previous(tmp_path / "runs" / "good", matrix, 600, [1000, 2000])
    bad = tmp_path / "runs" / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text(broken.replace("HOST", platform.node()).replace("MODEL", matrix.model))
    (bad / "records.jsonl").write_text('[1, 2]\n"text"\n{"usage": 3}\n')
    assert plan.previous_rate(matrix, tmp_path / "runs" / "new") == (pytest.approx(0.2), good)


def test_a_failed_or_tiny_newer_run_is_not_the_basis(tmp_path: Path) -> None:
    """The newest run of the model, a failed 4-request one, used to time the next plan."""
    matrix = _matrix(tmp_path)
    good = _previous(tmp_path / "runs" / "a", matrix, 600, [1000, 2000])  # 0.2 s per token
    tiny = tmp_path / "runs" / "b"
    _previous(tmp_path / "runs" / "scratch", matrix, 900, [400])  # each bad run is newer
    (tmp_path / "runs" / "scratch").rename(tiny)
    rows = [{"usage": {"completion_tokens": 100}}] * 4
    write_records(tiny / "records.jsonl", rows)
    failed = _previous(tmp_path / "runs" / "c", matrix, 1000, [1000], arms={"x": {"status": "failed"}})
    errors = _previous(tmp_path / "runs" / "d", matrix, 1100, [1000])
    with (errors / "records.jsonl").open("a") as f:
        f.write("".join(json.dumps({"error": {"type": "HTTPError"}}) + "\n" for _ in range(5)))
    assert failed.is_dir()
    assert plan.previous_rate(matrix, tmp_path / "runs" / "new") == (pytest.approx(0.2), good)


def _fixed_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from specbench.theory import hardware

    cpu = hardware.Gpu(
        name="cpu", bandwidth_gbs=10.0, tflops=0.1, memory_gb=8.0, unified=True, host_link_gbs=10.0
    )
    monkeypatch.setattr(hardware, "probe_cpu", lambda *a, **k: cpu)


def test_the_model_size_estimate_counts_prefill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dry run said ≈1:29, the run took 2:11 ("prefill not counted")."""
    _fixed_cpu(monkeypatch)
    matrix = _matrix(tmp_path)
    p = _plan(matrix, tmp_path / "runs" / "new", probe=True)
    requests, warmup, concurrency = build_requests(matrix, tmp_path)
    cells = plan_cells(matrix, requests, warmup, concurrency)
    prompt = sum(plan.prompt_tokens(r) for c in cells for r in (*c.requests, *c.warmup))
    size = 1024  # bytes of the test's model file: 512 weights at 16 bits
    decode = 6 * (plan.LAUNCH_S + size / plan.DISK_BYTES_S) + p.output_tokens * size / (10e9 * 0.6)
    prefill = prompt * 2 * 512 / (0.1e12 * plan.PREFILL_EFFICIENCY)
    assert prompt > 6 * 3 * 10  # the natural suite's prompts are tens of tokens each
    assert p.estimate.seconds == pytest.approx(decode + prefill)
    assert "prefill of ~" in p.estimate.basis and "not counted" not in p.estimate.basis


def test_an_earlier_runs_prefill_timings_scale_with_this_runs_prompts(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    old = _previous(tmp_path / "runs" / "old", matrix, 600, [1200])  # 12 records of 100 tokens
    rows = [
        {"usage": {"completion_tokens": 100}, "timings": {"prompt_ms": 10_000.0, "prompt_n": 500}}
        for _ in range(12)
    ]
    write_records(old / "records.jsonl", rows)
    # 600 s wall, 120 s of it prefill of 6000 tokens: 20 ms per prompt token, 400 ms per output token
    p = _plan(matrix, tmp_path / "runs" / "new")
    requests, warmup, concurrency = build_requests(matrix, tmp_path)
    cells = plan_cells(matrix, requests, warmup, concurrency)
    prompt = sum(plan.prompt_tokens(r) for c in cells for r in (*c.requests, *c.warmup))
    assert p.estimate.seconds == pytest.approx(0.4 * p.output_tokens + 0.02 * prompt)
    assert "400 ms per generated token, launches included, and 20.00 ms per prompt token" in p.estimate.basis


def test_an_adaptive_plan_is_a_range_up_to_its_cap(tmp_path: Path) -> None:
    """repeats: auto gave 6:33 without saying it is an upper bound or naming max_minutes."""
    fixed = _matrix(tmp_path)
    base = fixed.model_dump()
    _previous(tmp_path / "runs" / "old", fixed, 600, [1000, 2000])  # 0.2 s per token
    auto = Matrix.model_validate({**base, "repeats": "auto", "max_repeats": 10, "max_minutes": 1})
    p = _plan(auto, tmp_path / "runs" / "new")
    round_s = 0.2 * p.output_tokens / 10  # one round: a tenth of the planned launches
    assert p.estimate.seconds == pytest.approx(60.0 + round_s)  # the round running at 1 minute ends
    assert p.estimate.low == pytest.approx(60.0 + round_s)  # three rounds take longer than the cap
    uncapped = Matrix.model_validate({**base, "repeats": "auto", "max_repeats": 10})
    q = _plan(uncapped, tmp_path / "runs" / "new")
    assert q.estimate.seconds == pytest.approx(0.2 * q.output_tokens)
    assert q.estimate.low == pytest.approx(0.3 * q.estimate.seconds)
    line = next(x for x in q.lines() if x.startswith("estimated wall time"))
    assert re.match(r"estimated wall time: ≈ \d+:\d\d to \d+:\d\d, repeats: auto: 3 to 10 launches", line)
    assert "no max_minutes caps it" in line
    loose = Matrix.model_validate({**base, "repeats": "auto", "max_repeats": 10, "max_minutes": 60})
    line = next(x for x in _plan(loose, tmp_path / "runs" / "new").lines() if x.startswith("estimated"))
    assert "capped by max_minutes 60 (no round starts after it)" in line
    plan.write_plan(q, tmp_path)
    assert plan.read_plan(tmp_path) == q


def test_an_earlier_runs_prefill_is_counted_in_the_plans_own_units(tmp_path: Path) -> None:
    """A lab model's small vocabulary makes ~4× the tokens of the 4-characters-per-token estimate:
    the basis's rate is per estimated token, so the new run's estimated count times it is right."""
    matrix = _matrix(tmp_path)
    text = "x" * 396  # 99 + 4 (one message) = 103 estimated tokens
    old = _previous(
        tmp_path / "runs" / "old",
        matrix,
        600,
        [1200],
        prompts=[{"prompt_id": "p", "messages": [{"role": "user", "content": text}], "target_tokens": None}],
    )
    rec = {
        "prompt_id": "p",
        "usage": {"completion_tokens": 100},
        "timings": {"prompt_ms": 10_300.0, "prompt_n": 412},
    }
    write_records(old / "records.jsonl", [rec] * 12)
    assert plan.prefill_rate(old) == (pytest.approx((600 - 123.6) / 1200), pytest.approx(0.1))  # 10.3 s / 103


def _cells(tmp_path: Path, old: Path, load: float | None) -> None:
    """Cells of the earlier run ``old`` that recorded a 1-minute load of ``load`` on 2 CPUs."""
    rows = [
        {"arm": "baseline", "repeat": 0, "machine_load": {"cpus": 2, "load_start": load, "load_end": load}}
    ]
    (old / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _threads(tmp_path: Path, threads: str | None) -> Matrix:
    """The test matrix with ``-t threads`` for every arm (None: llama.cpp's default, every core)."""
    matrix = _matrix(tmp_path)
    if threads is None:
        return matrix
    return Matrix.model_validate({**matrix.model_dump(), "common_args": ["-t", threads]})


def _loaded_plan(tmp_path: Path, matrix: Matrix, room: tuple[int, float]) -> plan.Plan:
    requests, warmup, concurrency = build_requests(matrix, tmp_path)
    cells = plan_cells(matrix, requests, warmup, concurrency)
    return plan.make_plan(matrix, cells, tmp_path / "runs" / "new", probe=True, room=room)


def test_an_earlier_runs_rate_is_scaled_by_the_load_now_against_its_own(tmp_path: Path) -> None:
    """Issue 44: a plan said ≈ 1:26–1:51 and the run took 23:12 on a loaded machine. The load now
    (1.8 of 2 cores busy, 2 engine threads: (1.8 + 2) / 2 = 1.9) against the earlier run's (load
    1.0 on 2 CPUs: a quiet machine, ×1) scales the estimate, and the basis says so."""
    matrix = _threads(tmp_path, "2")
    old = _previous(tmp_path / "runs" / "old", matrix, 600, [1000, 2000])  # 0.2 s per token
    _cells(tmp_path, old, 1.0)
    p = _loaded_plan(tmp_path, matrix, (2, 1.8))
    assert p.estimate.seconds == pytest.approx(0.2 * p.output_tokens * 1.9)
    assert p.estimate.per_token == pytest.approx(0.2 * 1.9)
    assert (
        "machine now 1.8 of 2 cores busy with other work, the arms ask for 2 threads; old ran at load 1.0 "
        "on 2 cores: scaled ×1.9" in p.estimate.basis
    )


def test_a_run_made_on_a_busier_machine_times_a_quiet_one_faster(tmp_path: Path) -> None:
    matrix = _threads(tmp_path, "1")
    old = _previous(tmp_path / "runs" / "old", matrix, 600, [1000, 2000])  # 0.2 s per token at load 4
    _cells(tmp_path, old, 4.0)
    p = _loaded_plan(tmp_path, matrix, (2, 0.0))  # now: one thread, nothing else running
    assert p.estimate.seconds == pytest.approx(0.2 * p.output_tokens / 2)
    assert "old ran at load 4.0 on 2 cores: scaled ×0.5" in p.estimate.basis


def test_a_quiet_machine_is_said_and_not_scaled(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    _previous(tmp_path / "runs" / "old", matrix, 600, [1000, 2000])  # no cells.jsonl: load unknown
    p = _loaded_plan(tmp_path, matrix, (2, 0.06))  # no -t: llama.cpp takes every core: (0.06 + 2) / 2
    assert p.estimate.seconds == pytest.approx(0.2 * p.output_tokens)  # within 5 %: left alone
    assert p.estimate.basis.endswith(
        "machine now 0.1 of 2 cores busy with other work, the arms ask for 2 threads; "
        "old recorded no load (taken as quiet): not scaled"
    )


def test_the_model_size_estimate_is_scaled_by_the_load_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fixed_cpu(monkeypatch)
    quiet = _loaded_plan(tmp_path, _threads(tmp_path, "1"), (2, 0.0))
    busy = _loaded_plan(tmp_path, _threads(tmp_path, "2"), (2, 2.0))  # (2 + 2) / 2
    assert quiet.estimate.seconds is not None and busy.estimate.seconds is not None
    assert busy.estimate.seconds == pytest.approx(2 * quiet.estimate.seconds)
    assert "not scaled" in quiet.estimate.basis
    assert "machine now 2.0 of 2 cores busy with other work, the arms ask for 2 threads: scaled ×2.0" in (
        busy.estimate.basis
    )
