"""When the runner runs the forward probe: last in a baseline cell, after the "after" /metrics
scrape. Run before the measured requests it warmed the baseline more than the other arms (an A/A
run on the tiny lab model read ×0.57). Served by the FAKE vLLM handler (tests/fakes), with the
probe itself replaced by a recorder: this test is about order, not about the probe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specbench.engines.openai import AttachedEngine
from specbench.matrix.config import Matrix, RequestSpec, plan_cells
from specbench.run import drive as drive_module
from specbench.run.drive import CellDriver
from specbench.run.runner import Runner
from specbench.store.rundir import RunStore
from tests.fakes import fake_vllm as fv
from tests.fakes.common import serve


def test_the_probe_runs_after_the_measured_requests_and_the_after_scrape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []

    async def probe(*args: Any, **kwargs: Any) -> dict[str, Any]:
        events.append("probe")
        return {"samples": []}

    original_scrape, original_one = CellDriver._scrape, CellDriver._one

    async def scrape(self: CellDriver, client: Any, server: Any, cell: Any, when: str) -> dict[str, Any]:
        events.append(f"scrape {when}")
        return await original_scrape(self, client, server, cell, when)

    async def one(self: CellDriver, client: Any, server: Any, cell: Any, req: Any, warmup: bool) -> None:
        events.append("warmup" if warmup else "request")
        await original_one(self, client, server, cell, req, warmup)

    monkeypatch.setattr(drive_module, "forward_probe", probe)
    monkeypatch.setattr(CellDriver, "_scrape", scrape)
    monkeypatch.setattr(CellDriver, "_one", one)
    monkeypatch.setattr(CellDriver, "_probes", lambda self, cell: True)  # attach mode never probes itself

    matrix = Matrix(engine="openai", model=fv.MODEL, arms={"baseline": ()}, repeats=1, warmup=1)
    req = RequestSpec(
        prompt_id="p0",
        category="chat",
        messages=({"role": "user", "content": "hi"},),
        max_tokens=8,
        temperature=0.0,
        seed=0,
    )
    store = RunStore(tmp_path / "run")
    store.create({"matrix": matrix.model_dump(mode="json")}, resume=False)
    with serve(fv.FakeVllm().handler) as url:
        cells = plan_cells(matrix, [req, req], [req], 1)
        Runner(matrix=matrix, engine=AttachedEngine(), store=store, cells=cells, attach_url=url).run()
    assert events == ["warmup", "scrape before", "request", "request", "scrape after", "probe"]
    (cell,) = store.cells()
    assert cell["forward_probe"] == {"samples": []}


def test_the_probe_grid_brackets_the_cuda_kernel_switches() -> None:
    # The pinned llama.cpp CUDA backend (ggml-cuda.cu, mmf.cu, mmvq.cuh) switches f16 matmuls
    # from its tensor-core mmf kernel to cuBLAS above 16 tokens and quantized ones from mmvq to
    # mmq above 8. The H200 run's grid jumped from 13 to 17, so an n-gram arm at n_max 16
    # (17-token verifies) could not tell which side of the switch 14–16 were on.
    from specbench.run.forwardprobe import DEFAULT_SIZES

    for switch in (1, 8, 16):
        assert switch in DEFAULT_SIZES and switch + 1 in DEFAULT_SIZES
    assert 15 in DEFAULT_SIZES and list(DEFAULT_SIZES) == sorted(set(DEFAULT_SIZES))
