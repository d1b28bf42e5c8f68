"""Worker processes that stream a cell's requests when one event loop is not enough.

One loop reads, stamps and keeps about 80k tokens a second on one core (bench/client_overhead.py:
~12 ms of CPU per 1000 tokens at 64-256 in flight). A GPU server at a few hundred streams can send
more, and a loop that falls behind lets several chunks pile up in one read, which then share one
stamp (readstamps.py). With ``client_processes: N`` in the matrix a cell starts N worker processes,
each with its own loop and streaming session (:func:`specbench.client.stream.open_streamer`); the cell's
own loop keeps everything else — the schedule, the concurrency cap, retries, the watchdog, the
records — and hands each request to the worker with the fewest in flight, over a pipe.

A worker stamps on the shared monotonic clock and times each request from its own send, so its
records mean what one loop's do; ``dispatch_us`` is the hand-off's delay (the parent's call to the
worker's send). Workers ignore Ctrl-C (the parent handles it and closes the pipes) and leave when
their pipe closes, so a parent that dies, however it dies, leaves no worker behind. A worker is
``python -m specbench.client.pool`` (not multiprocessing's spawn, which re-runs the parent's main
module: a user's script without a ``__main__`` guard would start runs of its own).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from specbench.client.looplag import LoopLag
from specbench.client.readstamps import clamps_of, stamps_of
from specbench.client.stream import Session, open_streamer, stream_chat
from specbench.errors import ClientError

# Streams one worker's loop holds at the server's pace: 64 at 2 ms a token (32,000 tok/s) on one
# core at >= 0.95 of the schedule (bench/client_schedule.py).
STREAMS_PER_PROCESS = 64
START_TIMEOUT = 60.0  # a worker imports aiohttp and specbench first: ~0.5 s, far more on a loaded box
STOP_TIMEOUT = 5.0


def auto_processes(concurrency: int, engine_threads: int | None, cores: int | None = None) -> int:
    """How many processes stream ``concurrency`` requests where the matrix does not say
    (``client_processes``): one per ``STREAMS_PER_PROCESS`` streams, on the cores free of the
    engine (its threads; one for an engine that drives a GPU) and of the cell's own loop (the
    schedule, the records). 1, the cell's own loop and no workers, where no more fit: on a
    2-core box a worker would only take the engine's or the loop's core."""
    if cores is None:
        affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every CPU is ours
        cores = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    free = cores - max(engine_threads or 1, 1) - 1
    return max(1, min(-(-concurrency // STREAMS_PER_PROCESS), free))


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes]
    conn: Connection
    ready: asyncio.Future[None]
    pending: dict[int, asyncio.Future[Any]] = field(default_factory=dict)


class StreamerPool:
    """``processes`` workers, each streaming through its own session; ``await pool.stream(...)``
    returns what :func:`specbench.client.stream.stream_chat` returns, plus ``client_process`` and
    ``dispatch_us``. Use as ``async with StreamerPool(...) as pool``."""

    def __init__(
        self, processes: int, timeout: float, concurrency: int, headers: dict[str, str] | None
    ) -> None:
        self.processes, self.timeout, self.headers = processes, timeout, headers
        self.per_worker = -(-max(concurrency, 1) // processes)  # each worker's session pool size
        self.workers: list[_Worker] = []
        self._ids = itertools.count()

    async def __aenter__(self) -> StreamerPool:
        loop = asyncio.get_running_loop()
        try:
            for i in range(self.processes):
                worker = _start(i, loop)
                self.workers.append(worker)
                # The settings go down the pipe, not on the command line: headers may hold a key.
                worker.conn.send((self.timeout, self.per_worker, self.headers))
                loop.add_reader(worker.conn.fileno(), self._on_reply, worker)
            await asyncio.wait_for(asyncio.gather(*(w.ready for w in self.workers)), START_TIMEOUT)
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def stream(self, url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        worker = min(self.workers, key=lambda w: len(w.pending))
        rid = next(self._ids)
        reply = worker.pending[rid] = asyncio.get_running_loop().create_future()
        sent_ns = time.perf_counter_ns()
        try:
            worker.conn.send(("stream", rid, url, body, timeout))
            t0_ns, result = await reply
        except (BrokenPipeError, OSError) as exc:
            raise self._died(worker) from exc
        finally:
            worker.pending.pop(rid, None)
        return {**result, "client_process": worker.index, "dispatch_us": (t0_ns - sent_ns) / 1e3}

    async def lag(self, action: str) -> list[dict[str, Any]]:
        """``"reset"`` every worker's loop-lag probe, or ``"report"`` what each measured since."""
        loop = asyncio.get_running_loop()
        replies = []
        for worker in self.workers:
            rid = next(self._ids)
            reply = worker.pending[rid] = loop.create_future()
            worker.conn.send(("lag", rid, action))
            replies.append(reply)
        return [lag for lag in await asyncio.gather(*replies) if lag]

    def _on_reply(self, worker: _Worker) -> None:
        """Everything the worker's pipe holds now: its ready signal and its replies."""
        try:
            while worker.conn.poll():
                kind, rid, payload = worker.conn.recv()
                if kind == "ready":
                    worker.ready.set_result(None)
                elif (reply := worker.pending.get(rid)) is not None and not reply.done():
                    reply.set_result(payload)
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(worker.conn.fileno())
            err = self._died(worker)
            for fut in [worker.ready, *worker.pending.values()]:
                if not fut.done():
                    fut.set_exception(err)

    def _died(self, worker: _Worker) -> ClientError:
        try:  # its pipe closed: it is ending, if it has not ended
            code = worker.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = None
        how = f"exited with code {code}" if code is not None else "closed its pipe"
        said = ""
        if code is not None and worker.process.stderr is not None:
            last = worker.process.stderr.read().decode(errors="replace").strip().splitlines()[-1:]
            said = f" ({last[0][:200]})" if last else ""
        return ClientError(
            f"client worker process {worker.index} (pid {worker.process.pid}) {how}{said} with "
            f"{len(worker.pending)} request(s) in flight; what was measured is kept (--resume)"
        )

    async def close(self) -> None:
        """Close every pipe (a worker leaves when its pipe closes) and reap the processes."""
        loop = asyncio.get_running_loop()
        for worker in self.workers:
            if not worker.conn.closed:
                loop.remove_reader(worker.conn.fileno())
                worker.conn.close()
        for worker in self.workers:
            await asyncio.to_thread(_reap, worker.process)
        self.workers = []


def _start(index: int, loop: asyncio.AbstractEventLoop) -> _Worker:
    """A worker as ``python -m specbench.client.pool FD``: a fresh interpreter (nothing of the
    parent's state, no re-import of the parent's main module as multiprocessing's spawn does)
    talking over one end of a socket pair."""
    mine, theirs = socket.socketpair()
    env = dict(os.environ)  # specbench importable there as it is here, installed or not
    here = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specbench.client.pool", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
    finally:
        theirs.close()
    return _Worker(index, proc, Connection(mine.detach()), loop.create_future())


def _reap(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


async def stream_request(
    session: Session | StreamerPool, url: str, body: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """:func:`specbench.client.stream.stream_chat` through ``session``, or through a worker of the pool."""
    if isinstance(session, StreamerPool):
        return await session.stream(url, body, timeout)
    return await stream_chat(session, url, body, timeout)


# -- the worker process ---------------------------------------------------------------------------
def worker_main(fd: int) -> None:
    """A worker: its settings first, then stream what the pipe asks until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; it closes our pipe
    conn = Connection(fd)
    try:
        timeout, concurrency, headers = conn.recv()
        asyncio.run(_serve(conn, timeout, concurrency, headers))
    except EOFError:  # the parent left before it gave us work
        pass
    finally:
        conn.close()


async def _serve(conn: Connection, timeout: float, concurrency: int, headers: dict[str, str] | None) -> None:
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()
    loop.add_reader(conn.fileno(), _drain_pipe(conn, inbox))
    tasks: set[asyncio.Task[None]] = set()
    async with open_streamer(timeout, concurrency, headers) as session:
        lag = LoopLag()
        lag.start()
        conn.send(("ready", None, None))

        async def one(rid: int, url: str, body: dict[str, Any], timeout_s: float) -> None:
            t0_ns = time.perf_counter_ns()
            result = await stream_chat(session, url, body, timeout_s)
            conn.send(("reply", rid, (t0_ns, result)))

        while (msg := await inbox.get()) is not None:
            if msg[0] == "stream":
                task = asyncio.create_task(one(*msg[1:]))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            elif msg[0] == "lag":
                report = None
                if msg[2] == "report":
                    stamps = {"stamps": stamps_of(session), "stamp_clamps": clamps_of(session)}
                    report = {**await lag.stop(), **stamps}
                lag = LoopLag()
                lag.start()
                conn.send(("reply", msg[1], report))
        loop.remove_reader(conn.fileno())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, lag.stop(), return_exceptions=True)


def _drain_pipe(conn: Connection, inbox: asyncio.Queue[tuple[Any, ...] | None]) -> Callable[[], None]:
    def readable() -> None:
        try:
            while conn.poll():
                inbox.put_nowait(conn.recv())
        except (EOFError, OSError):  # the parent closed the pipe, or is gone
            asyncio.get_running_loop().remove_reader(conn.fileno())
            inbox.put_nowait(None)

    return readable


if __name__ == "__main__":
    worker_main(int(sys.argv[1]))
