"""Client worker processes (client/pool.py) against bench/stream_server.py: requests streamed by
workers come back whole and stamped, every worker takes its share, and no worker outlives its pool
or its parent, however the parent ends."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from specbench import api
from specbench.client.pool import STREAMS_PER_PROCESS, StreamerPool, auto_processes
from specbench.client.stream import chat_body
from specbench.errors import ClientError
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.matrices import planned, write_matrix
from tests.support.procs import sigint_as_usual


@pytest.mark.parametrize(
    ("concurrency", "engine_threads", "cores", "expected"),
    [
        (64, None, 2, 1),  # 2 cores: the engine's and the loop's, no room for a worker
        (256, None, 2, 1),
        (STREAMS_PER_PROCESS, None, 16, 1),  # one loop holds them: no worker
        (4 * STREAMS_PER_PROCESS, None, 16, 4),  # a GPU engine on 16 cores: a worker per share
        (100 * STREAMS_PER_PROCESS, None, 16, 14),  # never onto the engine's or the loop's core
        (8 * STREAMS_PER_PROCESS, 8, 16, 7),  # llama.cpp -t 8 keeps 8 cores
    ],
)
def test_workers_are_sized_from_the_streams_and_the_cores_free_of_the_engine(
    concurrency: int, engine_threads: int | None, cores: int, expected: int
) -> None:
    assert auto_processes(concurrency, engine_threads, cores) == expected


def _body(tokens: int) -> dict[str, object]:
    return chat_body([{"role": "user", "content": "hi"}], tokens, 0.0, 0, {"ignore_eos": True})


def test_workers_stream_whole_requests_each_taking_its_share(stream_server: str) -> None:
    async def go() -> tuple[list[dict[str, object]], list[int]]:
        async with StreamerPool(2, 30, 8, None) as pool:
            pids = [w.process.pid for w in pool.workers]
            results = await asyncio.gather(*(pool.stream(stream_server, _body(40), 30) for _ in range(8)))
        return results, pids

    results, pids = asyncio.run(go())
    assert os.getpid() not in pids and len(set(pids)) == 2
    # The fewest-in-flight hand-off splits 8 concurrent requests 4 and 4.
    assert sorted(r["client_process"] for r in results) == [0] * 4 + [1] * 4
    for r in results:
        assert r["error"] is None and r["dispatch_us"] >= 0  # type: ignore[operator]
        stamps = [c[0] for c in r["chunks"] if c[1] and c[1].startswith("@")]  # type: ignore[attr-defined]
        assert len(stamps) == 40 and stamps == sorted(stamps) and stamps[0] > 0
        assert r["usage"]["completion_tokens"] == 40  # type: ignore[index]
        assert 0 < r["t_headers_ns"] <= stamps[0] <= stamps[-1] <= r["t_end_ns"]  # type: ignore[operator]


def test_workers_leave_with_the_pool() -> None:
    async def go() -> list[int]:
        async with StreamerPool(2, 30, 2, None) as pool:
            return [w.process.pid for w in pool.workers]

    for pid in asyncio.run(go()):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_worker_that_dies_fails_its_requests_with_one_clear_error(stream_server: str) -> None:
    async def go() -> None:
        async with StreamerPool(1, 30, 2, None) as pool:
            streaming = asyncio.ensure_future(pool.stream(stream_server, _body(5000), 30))
            await asyncio.sleep(0.2)
            os.kill(pool.workers[0].process.pid, signal.SIGKILL)
            await streaming

    with pytest.raises(
        ClientError, match=r"client worker process 0 \(pid \d+\) exited with code -9 with 1 request"
    ):
        asyncio.run(go())


PARENT = """
import asyncio, sys
from specbench.client.pool import STREAMS_PER_PROCESS, StreamerPool, auto_processes

async def main():
    async with StreamerPool(2, 30, 2, None) as pool:
        print(*[w.process.pid for w in pool.workers], flush=True)
        await asyncio.sleep(600)

if __name__ == "__main__":
    asyncio.run(main())
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_no_worker_outlives_its_parent(how: signal.Signals) -> None:
    argv = [sys.executable, "-c", PARENT]
    parent = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, preexec_fn=sigint_as_usual)
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
        parent.send_signal(how)  # SIGKILL: nothing of the parent runs; SIGINT: Ctrl-C
        parent.wait(30)
        deadline = time.monotonic() + 30  # a worker notices its closed pipe at once; 30 s is slack
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids)
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


PROMPTS = 5  # every SHORT_PROMPTS prompt: one cell holds five requests, one in flight at a time


def _cell_under_way(out: Path) -> bool:
    """A launch has measured at least one request and has at least two still to send: with one
    request in flight, even one finishing as the engine is frozen leaves one more to hand out."""
    done = RunStore(out).completed() if (out / "manifest.json").exists() else set()
    per_repeat = [sum(1 for key in done if key[2] == r) for r in range(2)]
    return any(1 <= n <= PROMPTS - 2 for n in per_repeat)


@pytest.mark.engine
def test_a_dead_worker_ends_the_run_with_one_line_keeps_what_was_measured_and_resume_completes(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    workload = {"suite": "natural", "max_tokens": 150, "prompts": PROMPTS, "prompt_file": "prompts.jsonl"}
    matrix = write_matrix(
        tmp_path, dense_pair, llama_server, {"baseline": []}, workload=workload, client_processes=2
    )
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "specbench.cli", "run", str(matrix), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Synchronised on events, not on timing (issue 29). Once a launch is under way, its engine is
    # frozen (SIGSTOP): nothing more completes however long this process waits for a core. If the
    # launch is still under way then, every client worker is killed, and the request in flight or
    # the next one handed out meets a dead worker. (Killing one worker after a fixed wait missed:
    # with one request in flight the pool hands every request to the same worker, the other may
    # never be used, and on a busy machine the launch could be over before the kill.)
    workers, engine = _kill_workers_mid_launch(proc, out)
    output = proc.communicate(timeout=300)[0]
    errors = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1 and "client worker process" in errors[0], output
    assert "--resume" in errors[0] and not _alive(engine.pid)
    assert not any(_alive(w.pid) for w in workers)
    before = len(RunStore(out).completed())
    assert 1 <= before < 2 * PROMPTS
    api.prepare_run(matrix, out, resume=True).run()
    store = RunStore(out)
    prompts = [p["prompt_id"] for p in store.manifest()["prompts"]]
    assert store.completed() == planned(["baseline"], prompts)


def _kill_workers_mid_launch(
    proc: subprocess.Popen[str], out: Path
) -> tuple[list[psutil.Process], psutil.Process]:
    """Every client worker of ``proc``'s run, killed while its engine is frozen mid-launch, and
    that engine. Only ``proc``'s own descendants are touched: other runs may share the model."""
    while proc.poll() is None:
        engines = _descendants(proc, "llama-server") if _cell_under_way(out) else []
        if len(engines) != 1:
            time.sleep(0.05)
            continue
        engines[0].suspend()
        try:
            workers = _descendants(proc, "specbench.client.pool")
            if len(workers) == 2 and _cell_under_way(out):
                for worker in workers:
                    worker.kill()
                return workers, engines[0]
        finally:
            engines[0].resume()  # specbench stops it with SIGTERM after the error, as after any
    raise AssertionError(f"the run ended before a launch was under way: {proc.communicate()[0]}")


def _descendants(proc: subprocess.Popen[str], word: str) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if any(word in part for part in child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found
