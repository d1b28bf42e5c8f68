"""The Ray executor and the distributed load generator on a local Ray cluster and the real
llama-server: same records as a local run, resume across executors, a lost worker retried
without duplicates, and multi-worker load recording every request once."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from specbench import api
from specbench.matrix.config import RequestSpec
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.matrices import draft4, llama_servers_for, planned, write_matrix
from tests.support.serve import serve

ray = pytest.importorskip("ray")

from specbench.executors.ray_executor import RayExecutor  # noqa: E402
from specbench.executors.ray_load import distributed_load  # noqa: E402

pytestmark = pytest.mark.engine

RAY_DAEMONS = ("raylet", "gcs_server", "plasma_store", "ray::")


def _ray_daemons() -> list[psutil.Process]:
    mine = psutil.Process().children(recursive=True)
    return [p for p in mine if p.is_running() and any(d in " ".join(p.cmdline()) for d in RAY_DAEMONS)]


@pytest.fixture(scope="module")
def ray_cluster(dense_pair: Pair) -> Iterator[None]:
    """A two-CPU local cluster for the module; afterwards no engine and no Ray process is left."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 1024**2,
        configure_logging=False,
    )
    try:
        yield
    finally:
        ray.shutdown()
        deadline = time.monotonic() + 20
        while (_ray_daemons() or llama_servers_for(dense_pair.target)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not llama_servers_for(dense_pair.target)
        assert not _ray_daemons()


def keys(store: RunStore) -> list[tuple[str, str, int, bool]]:
    return sorted((r["arm"], r["prompt_id"], r["repeat"], bool(r["warmup"])) for r in store.records())


def measured_ok(store: RunStore) -> list[dict[str, Any]]:
    return [r for r in store.records() if r["error"] is None and not r["warmup"]]


def test_ray_records_the_same_keys_as_local(
    ray_cluster: None, llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    matrix = write_matrix(tmp_path, dense_pair, llama_server, {"baseline": [], "draft4": draft4(dense_pair)})
    api.prepare_run(matrix, tmp_path / "local").run()
    runner = api.prepare_run(matrix, tmp_path / "ray")
    runner.executor = RayExecutor()
    events: list[tuple[str, dict[str, Any]]] = []
    runner.observe = lambda event, info: events.append((event, info))
    runner.run()

    local, store = RunStore(tmp_path / "local"), RunStore(tmp_path / "ray")
    assert keys(store) == keys(local) and len(keys(store)) == 16
    records = store.records()
    assert all(r["error"] is None and r["node"] and r["task_attempt"] == 0 for r in records)
    assert sorted(r["seq"] for r in records) == list(range(1, 17))
    assert set(records[0]) - set(local.records()[0]) == {"node", "task_attempt"}  # same schema + where
    assert all("".join(c[1] or "" for c in r["chunks"]) == dense_pair.answer(24) for r in measured_ok(store))

    cells = store.cells()
    assert sorted((c["arm"], c["repeat"]) for c in cells) == sorted(
        (c["arm"], c["repeat"]) for c in local.cells()
    )
    node = records[0]["node"]
    assert all(c["node"] == node and c["node_resources"]["CPU"] == 2 for c in cells)
    # a cell holds its node alone: without a specbench_slot resource, every CPU of the node
    assert all(c["requested_resources"] == {"num_cpus": 2} and c["hardware"]["cpu"] for c in cells)
    draft_cell = next(c for c in cells if c["arm"] == "draft4")
    assert draft_cell["metrics_after"]["spec"]["draft_tokens"] > 0
    assert any("draft acceptance" in line for line in draft_cell["log_lines"])
    assert (store.root / draft_cell["metrics_after"]["file"]).is_file()
    assert "draft acceptance" in store.log_path("draft4").read_text()

    env = json.loads((store.root / "envs" / f"{node}.json").read_text())
    assert env["model"]["sha256"] == local.env()["model"]["sha256"]
    assert abs(env["clock"]["clock_offset_s"]) < 1.0 and env["engine"]["commit"] == "0c1e570"
    manifest = store.manifest()
    assert {a["status"] for a in manifest["arms"].values()} == {"ok"}
    assert manifest["executor"]["cells_per_node"] == {node: 4} and manifest["executor"]["confounds"] == []
    assert {i["node"] for e, i in events if e == "cell"} == {node}
    assert sum(1 for e, i in events if e == "request" and not i["warmup"]) == 12
    assert not llama_servers_for(dense_pair.target)


def test_resume_works_across_executors(
    ray_cluster: None, llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    matrix = write_matrix(tmp_path, dense_pair, llama_server, {"baseline": []})
    out = tmp_path / "run"
    api.prepare_run(matrix, out).run()
    lines = (out / "records.jsonl").read_text().splitlines()
    kept = [ln for ln in lines if json.loads(ln)["repeat"] == 0][:-1]  # repeat 0 short of one, no repeat 1
    (out / "records.jsonl").write_text("".join(ln + "\n" for ln in kept))

    runner = api.prepare_run(matrix, out, resume=True)
    assert runner.total_todo() == 4
    runner.executor = RayExecutor()
    runner.run()
    store = RunStore(out)
    prompts = [p["prompt_id"] for p in store.manifest()["prompts"]]
    assert store.completed() == planned(["baseline"], prompts)
    ok = measured_ok(store)
    assert len(ok) == len({(r["prompt_id"], r["repeat"]) for r in ok}) == 6
    assert sum(1 for r in ok if "node" in r) == 4  # the ones the ray executor added
    assert api.prepare_run(matrix, out, resume=True).total_todo() == 0  # and local sees it complete


def test_a_worker_lost_mid_cell_is_retried_and_nothing_is_duplicated(
    ray_cluster: None, llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    matrix = write_matrix(
        tmp_path,
        dense_pair,
        llama_server,
        {"baseline": []},
        repeats=1,
        workload={"suite": "natural", "max_tokens": 24, "prompts": 4, "prompt_file": "prompts.jsonl"},
    )
    flag = tmp_path / "crashed"

    def crash_once(event: str, info: dict[str, Any]) -> None:  # runs on the Ray worker
        if event == "request" and not info["warmup"]:
            with contextlib.suppress(FileExistsError):
                os.close(os.open(flag, os.O_CREAT | os.O_EXCL))  # exactly once, across processes
                os._exit(1)  # the worker process dies; its llama-server is orphaned

    runner = api.prepare_run(matrix, tmp_path / "run")
    runner.executor = RayExecutor(remote_observer=crash_once)
    events: list[tuple[str, dict[str, Any]]] = []
    runner.observe = lambda event, info: events.append((event, info))
    runner.run()

    store = RunStore(tmp_path / "run")
    assert flag.exists()
    assert len(store.completed()) == 4
    ok = measured_ok(store)
    assert len(ok) == len({(r["prompt_id"], r["repeat"]) for r in ok}) == 4  # no duplicates
    assert sorted(r["task_attempt"] for r in ok) == [0, 1, 1, 1]  # the first record was kept
    cells = store.cells()
    assert [(c.get("lost", False), c["task_attempt"]) for c in cells] == [(True, 0), (False, 1)]
    assert [e for e, _ in events if e in ("retry", "failed")] == ["retry"]
    assert store.manifest()["arms"]["baseline"]["status"] == "ok"
    assert store.manifest()["executor"]["lost"] == 1
    assert "recovered after the task was lost" in store.log_path("baseline").read_text()
    assert not llama_servers_for(dense_pair.target)  # the orphan was reaped


def test_distributed_load_records_every_request_once(
    ray_cluster: None, llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    requests = [
        RequestSpec(
            prompt_id=f"p{i}",
            category="chat",
            messages=({"role": "user", "content": f"Say something, {i}."},),
            max_tokens=16,
            temperature=0.0,
            seed=0,
        )
        for i in range(8)
    ]
    store = RunStore(tmp_path / "load")
    store.create({"matrix": None}, resume=False)
    flag = tmp_path / "crashed"

    def crash_once(event: str, info: dict[str, Any]) -> None:  # runs in a load worker actor
        with contextlib.suppress(FileExistsError):
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL))  # exactly once, across processes
            os._exit(1)

    with serve(llama_server, dense_pair.target, ["-np", "2"], tmp_path / "server.log") as served:
        result = distributed_load(
            served.url,
            requests,
            2,
            store=store,
            worker_resources={"num_cpus": 0.5},
            remote_observer=crash_once,
            start_delay_s=0.5,
        )
    assert flag.exists() and result.retries == 1 and result.duplicates_dropped == 0
    assert [r["load_index"] for r in result.records] == list(range(8))
    assert [r["prompt_id"] for r in result.records] == [f"p{i}" for i in range(8)]
    assert all(r["error"] is None and r["usage"]["completion_tokens"] == 16 for r in result.records)
    assert all(r["wall_start_driver"] == r["wall_start"] - r["clock_offset_s"] for r in result.records)
    stored = store.records()
    assert sorted(r["load_index"] for r in stored) == list(range(8))  # each recorded exactly once
    workers = {w["worker"]: w for w in result.workers}
    assert set(workers) == {"w0", "w1", "w0.1"} or set(workers) == {"w0", "w1", "w1.1"}
    assert all(abs(w["clock_offset_s"]) < 1.0 and w["rtt_s"] > 0 for w in workers.values())
    assert sum(1 for w in workers.values() if w.get("lost")) == 1
    assert {r["worker"] for r in stored} <= set(workers)
    assert store.manifest()["distributed_load"][0]["workers"] == result.workers
    assert list((store.root / "envs").glob("*.json"))
