"""Attach mode: engine detection and delegated counters, against FAKE servers (tests/fakes)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from specbench.engines.base import parse_metrics
from specbench.engines.openai import AttachedEngine, detect_engine, detect_from_metrics
from specbench.engines.vllm import request_spec_metrics
from specbench.matrix.config import Matrix, RequestSpec, plan_cells
from specbench.run.runner import Runner
from specbench.store.rundir import RunStore
from tests.fakes import fake_llamacpp as fl
from tests.fakes import fake_sglang as fs
from tests.fakes import fake_vllm as fv
from tests.fakes.common import URL, Handler, Request, Response, mock_client, not_found, serve


def unknown_server(request: Request) -> Response:
    """Some other OpenAI-compatible server: models only."""
    if request.url.path == "/v1/models":
        return Response(200, json={"object": "list", "data": [{"id": "m", "owned_by": "someone"}]})
    return not_found()


def detect(handler: Handler) -> str:
    async def go() -> str:
        async with mock_client(handler) as client:
            return await detect_engine("http://fake/", client)

    return asyncio.run(go())


def attach_describe(handler: Handler) -> tuple[AttachedEngine, dict[str, Any]]:
    engine = AttachedEngine()

    async def go() -> dict[str, Any]:
        async with mock_client(handler) as client:
            return await engine.describe(client, "http://fake")

    return engine, asyncio.run(go())


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (fl.FakeLlamaCpp().handler, "llamacpp"),
        (fv.FakeVllm().handler, "vllm"),
        (fv.FakeVllm(speculative=False).handler, "vllm"),
        (fs.FakeSglang().handler, "sglang"),
    ],
)
def test_detect_from_metrics(handler: Handler, expected: str) -> None:
    text = handler(Request("GET", URL("/metrics"))).text
    assert detect_from_metrics(parse_metrics(text)) == expected
    assert detect(handler) == expected


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (fl.FakeLlamaCpp(metrics=False).handler, "llamacpp"),  # 501 without --metrics: /v1/models
        (fs.FakeSglang(enable_metrics=False).handler, "sglang"),  # /server_info
        (fs.FakeSglang(enable_metrics=False, legacy=True).handler, "sglang"),  # /get_server_info
        (unknown_server, "openai"),
    ],
)
def test_detect_without_metrics(handler: Handler, expected: str) -> None:
    assert detect(handler) == expected


def test_attached_vllm_sums_engines_and_describes() -> None:
    fake = fv.FakeVllm(engines=2)
    engine, info = attach_describe(fake.handler)
    assert info["detected_engine"] == "vllm" and engine.detected == "vllm"
    assert info["version"] == fake.version  # vLLM's describe, delegated
    fake.chat({"stream_options": {"include_usage": True}})
    fake.chat({"stream_options": {"include_usage": True}})
    counters = engine.spec_counters(parse_metrics(fake.metrics_text()))
    assert (counters["drafts"], counters["accepted"]) == (2 * fv.DRAFTS, 2 * fv.ACCEPTED)
    assert engine.request_extras(True)["ignore_eos"] is True


def test_attached_sglang_returns_gauges_only() -> None:
    fake = fs.FakeSglang()
    engine, info = attach_describe(fake.handler)
    assert info["speculative"]["speculative_algorithm"] == "EAGLE3"
    fake.chat({})
    counters = engine.spec_counters(parse_metrics(fake.metrics_text()))
    assert counters["accept_length_gauge"] == fs.ACCEPT_LENGTHS[0]
    assert "drafts" not in counters


def test_attached_llamacpp_keeps_its_behaviour() -> None:
    engine, info = attach_describe(fl.FakeLlamaCpp().handler)
    assert info["props"]["build_info"] == "b1-0c1e570"  # the generic probes are still recorded
    assert info["slots_speculative"] == [True]  # and llama.cpp's own describe is merged in
    counters = engine.spec_counters(parse_metrics(fl.METRICS))
    assert (counters["drafts"], counters["draft_tokens"], counters["accepted"]) == (
        fl.DRAFTS,
        fl.DRAFT_TOKENS,
        fl.ACCEPTED,
    )


def test_unknown_server_gets_no_engine_fields() -> None:
    engine, info = attach_describe(unknown_server)
    assert info["detected_engine"] == "openai"
    assert engine.request_extras(True) == {}
    assert engine.spec_counters({}) == {}


def test_runner_in_attach_mode_against_fake_vllm(tmp_path: Path) -> None:
    """The real runner, client and store over a real socket: counters before/after, per-request
    metrics and multi-token chunks all land in the run directory."""
    fake = fv.FakeVllm(engines=2)
    matrix = Matrix(engine="openai", model=fv.MODEL, arms={"attached": ()}, baseline="attached", repeats=1)
    requests = tuple(
        RequestSpec(
            prompt_id=f"p{i}",
            category="chat",
            messages=({"role": "user", "content": "hi"},),
            max_tokens=16,
            temperature=0.0,
            seed=0,
        )
        for i in range(3)
    )
    store = RunStore(tmp_path / "run")
    store.create({"matrix": matrix.model_dump(mode="json")}, resume=False)
    with serve(fake.handler) as url:
        cells = plan_cells(matrix, requests, (), 1)
        Runner(matrix=matrix, engine=AttachedEngine(), store=store, cells=cells, attach_url=url).run()
    # The runner registers the attached arm itself (no store.set_arm_status before run()).
    assert store.manifest()["arms"]["attached"] == {"command": [], "attached": url, "status": "ok"}
    (cell,) = store.cells()
    assert cell["server"]["detected_engine"] == "vllm"
    before, after = cell["metrics_before"]["spec"], cell["metrics_after"]["spec"]
    assert after["drafts"] - before.get("drafts", 0) == 3 * fv.DRAFTS
    assert after["accepted_pos_0"] - before.get("accepted_pos_0", 0) == 3 * fv.PER_POS[0]
    records = store.records()
    assert len(records) == 3
    assert all(request_spec_metrics(r) == pytest.approx(request_spec_metrics(records[0])) for r in records)
    assert request_spec_metrics(records[0])["draft_n"] == fv.DRAFT_TOKENS  # type: ignore[index]
    assert [row[1] for row in records[0]["chunks"] if row[1]] == [t for t, _ in fv.CONTENT]
