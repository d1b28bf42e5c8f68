"""Load from several machines against one endpoint: N Ray actors, each running the async client
(:func:`specbench.client.stream.stream_chat`) on its share of the requests.

Timing stays valid across machines because every latency in a record — ``t_headers_ns``,
each chunk's ``t_ns``, ``t_end_ns``, hence TTFT and ITL — is a ``perf_counter_ns`` difference
taken inside one worker process, relative to that request's own start: no clock is compared.
Only the absolute ``wall_start`` (the worker's ``time.time()``) depends on the worker's clock,
so each worker's offset from the driver's clock is measured before it starts (the ping with the
shortest round trip; good to ±rtt/2) and stored with the worker and in each of its records
(``clock_offset_s``, ``wall_start_driver`` = ``wall_start`` − offset). The same offset lets the
workers start together: each waits for the driver's ``start_at`` converted to its own clock.

Exactly once: results are merged by request index at the driver; a record for an index that
already has one is dropped. A worker lost mid-run (``RayActorError``) is replaced and given only
the requests of its share that have no record yet; requests still without one after
``max_retries`` replacements get an error record, so every request appears exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import ray  # type: ignore[import-not-found, unused-ignore]

from specbench.client.stream import chat_body, open_streamer, stream_chat
from specbench.executors._ray_common import Relay, clock_offset, node_identity, node_name, start_inbox
from specbench.executors._ray_resources import task_options
from specbench.executors.base import Observer
from specbench.matrix.config import RequestSpec
from specbench.store.rundir import RunStore, environment, now_iso, write_json
from specbench.store.schema import RequestRecord

Job = tuple[int, RequestSpec, dict[str, Any]]  # (index, request, body)


class LoadWorker:
    """A Ray actor: one async client sending its share of the requests to one endpoint."""

    def __init__(self, worker: str, inbox: Any, hook: Observer | None = None) -> None:
        self.worker = worker
        self.relay = Relay(inbox, worker)
        self.hook = hook

    def ping(self) -> float:
        return time.time()

    def where(self) -> dict[str, Any]:
        return node_identity()

    def environment(self) -> dict[str, Any]:
        return {**environment(), "node": node_identity()}

    def run(
        self, base_url: str, items: list[Job], concurrency: int, timeout: float, start_at: float,
        meta: dict[str, Any],
    ) -> int:  # fmt: skip
        return asyncio.run(_send_share(self, base_url, items, concurrency, timeout, start_at, meta))


async def _send_share(
    worker: LoadWorker,
    base_url: str,
    items: list[Job],
    concurrency: int,
    timeout: float,
    start_at: float,
    meta: dict[str, Any],
) -> int:
    """A worker's share, at most ``concurrency`` in flight, from ``start_at`` (its own clock)."""
    await asyncio.sleep(max(0.0, start_at - time.time()))
    limit = asyncio.Semaphore(concurrency)
    url = f"{base_url.rstrip('/')}/v1/chat/completions"
    async with open_streamer(timeout, concurrency) as client:  # as a local run streams

        async def one(index: int, req: RequestSpec, body: dict[str, Any]) -> None:
            async with limit:
                started, wall0 = now_iso(), time.time()
                result = await stream_chat(client, url, body, timeout)
            record = {
                **meta,
                "phase": req.phase,
                "prompt_id": req.prompt_id,
                "category": req.category,
                "warmup": False,
                "started_at": started,
                "wall_start": wall0,
                "concurrency": concurrency,
                "request": req.echo(None),
                **result,
            }
            worker.relay.send("load_record", index=index, record=record)
            if worker.hook is not None:
                worker.hook("request", {"worker": worker.worker, "index": index, "error": result["error"]})

        await asyncio.gather(*(one(*item) for item in items))
    return len(items)


@dataclass
class LoadRun:
    """One record per request, in the order given, and what each worker was."""

    records: list[dict[str, Any]]
    workers: list[dict[str, Any]]
    retries: int = 0
    duplicates_dropped: int = 0


@dataclass
class _Worker:
    name: str
    share: list[Job]
    attempt: int
    actor: Any = None
    info: dict[str, Any] = field(default_factory=dict)


def distributed_load(
    base_url: str,
    requests: Sequence[RequestSpec],
    n_workers: int,
    *,
    concurrency: int = 1,
    timeout: float = 300.0,
    extras: Mapping[str, Any] | None = None,
    store: RunStore | None = None,
    arm: str = "load",
    repeat: int = 0,
    workload: str = "distributed_load",
    worker_resources: Mapping[str, Any] | None = None,
    spread: bool = True,
    max_retries: int = 2,
    start_delay_s: float = 1.0,
    address: str | None = None,
    observe: Observer | None = None,
    remote_observer: Observer | None = None,
    poll_s: float = 0.2,
) -> LoadRun:
    """Send ``requests`` to ``base_url`` from ``n_workers`` Ray actors, ``concurrency`` in flight
    each (so up to ``n_workers * concurrency`` in all); request *i* goes to worker ``i % n``.

    Records have the runner's schema (``arm``, ``repeat``, ``prompt_id``, raw chunks, usage,
    ``error``) plus ``worker``, ``node``, ``load_index``, ``clock_offset_s`` and
    ``wall_start_driver``. With ``store`` they are also appended to that run directory (created
    by the caller), node environments go to ``envs/<node>.json`` and the workers to the
    manifest's ``distributed_load`` list. ``worker_resources``: per actor (default one CPU);
    ``spread``: place actors on different nodes where possible. ``extras`` join every request
    body (e.g. an engine's ``request_extras``). Starts (and stops) a Ray when none is running.
    """
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    started = not ray.is_initialized()
    if started:
        ray.init(address=address)
    try:
        load = _Load(
            base_url, list(requests), n_workers, concurrency, timeout, dict(extras or {}), store,
            {"arm": arm, "repeat": repeat, "workload": workload},
            dict(worker_resources or {"num_cpus": 1}), spread, max_retries, start_delay_s,
            observe or (lambda e, i: None), remote_observer, poll_s,
        )  # fmt: skip
        return load.run()
    finally:
        if started:
            ray.shutdown()


class _Load:
    def __init__(
        self, base_url: str, requests: list[RequestSpec], n_workers: int, concurrency: int,
        timeout: float, extras: dict[str, Any], store: RunStore | None, meta: dict[str, Any],
        resources: dict[str, Any], spread: bool, max_retries: int, start_delay_s: float,
        observe: Observer, hook: Observer | None, poll_s: float,
    ) -> None:  # fmt: skip
        self.base_url, self.concurrency, self.timeout = base_url, concurrency, timeout
        self.store, self.meta, self.resources, self.spread = store, meta, resources, spread
        self.max_retries, self.start_delay_s, self.observe, self.hook = (
            max_retries,
            start_delay_s,
            observe,
            hook,
        )
        self.poll_s = poll_s
        items = [
            (i, r, chat_body(list(r.messages), r.max_tokens, r.temperature, r.seed,
                             {**extras, **r.extra, **({"tools": list(r.tools)} if r.tools else {})}))
            for i, r in enumerate(requests)
        ]  # fmt: skip
        self.n = len(items)
        self.shares = [items[w::n_workers] for w in range(min(n_workers, max(1, self.n)))]
        self.records: dict[int, dict[str, Any]] = {}
        self.workers: dict[str, _Worker] = {}
        self.infos: list[dict[str, Any]] = []
        self.retries = 0
        self.duplicates = 0
        self.seq = len(store.records()) if store else 0
        self.envs_written: set[str] = set()
        self.inbox = start_inbox()

    def run(self) -> LoadRun:
        running: dict[Any, _Worker] = {}
        try:
            spawned = [self._spawn(f"w{i}", share, 0) for i, share in enumerate(self.shares) if share]
            start_at = time.time() + self.start_delay_s  # the driver's clock
            for w in spawned:
                running[self._start(w, start_at)] = w
            while running:
                ready, _ = ray.wait(list(running), num_returns=len(running), timeout=self.poll_s)
                self._drain()
                for ref in ready:
                    w = running.pop(ref)
                    replacement = self._finish(ref, w)
                    if replacement is not None:
                        running[self._start(replacement, time.time())] = replacement
        finally:
            with contextlib.suppress(Exception):
                self._drain()
            for w in self.workers.values():
                with contextlib.suppress(Exception):
                    ray.kill(w.actor)
            with contextlib.suppress(Exception):
                ray.kill(self.inbox)
        for index in range(self.n):  # requests no worker could send: recorded as errors, once
            if index not in self.records:
                self._keep(None, index, self._missing(index))
        if self.store is not None:
            entry = {"base_url": self.base_url, "requests": self.n, "concurrency": self.concurrency,
                     "workers": self.infos, "retries": self.retries, "finished_at": now_iso()}  # fmt: skip
            self.store.update_manifest(
                distributed_load=[*self.store.manifest().get("distributed_load", []), entry]
            )
        return LoadRun([self.records[i] for i in range(self.n)], self.infos, self.retries, self.duplicates)

    def _spawn(self, name: str, share: list[Job], attempt: int) -> _Worker:
        options = task_options(self.resources)
        if self.spread:
            options.setdefault("scheduling_strategy", "SPREAD")
        actor = ray.remote(LoadWorker).options(max_restarts=0, **options)
        w = _Worker(name, share, attempt, actor.remote(name, self.inbox, self.hook))
        where = ray.get(w.actor.where.remote())
        clock = clock_offset(lambda: float(ray.get(w.actor.ping.remote())))
        w.info = {
            "worker": name,
            "attempt": attempt,
            "node": node_name(where["host"], where["node_id"]),
            **where,
            **clock,
            "requests": len(share),
        }
        self.infos.append(w.info)
        self.workers[name] = w
        if self.store is not None and w.info["node"] not in self.envs_written:
            self.envs_written.add(w.info["node"])
            env = {**ray.get(w.actor.environment.remote()), "clock": clock}
            (self.store.root / "envs").mkdir(exist_ok=True)
            write_json(Path(self.store.root, "envs", f"{w.info['node']}.json"), env)
        return w

    def _start(self, w: _Worker, start_at: float) -> Any:
        todo = [item for item in w.share if item[0] not in self.records]
        local_start = start_at + w.info["clock_offset_s"]  # the driver's instant on the worker's clock
        meta = {**self.meta, "worker": w.name}
        return w.actor.run.remote(self.base_url, todo, self.concurrency, self.timeout, local_start, meta)

    def _finish(self, ref: Any, w: _Worker) -> _Worker | None:
        try:
            ray.get(ref)
            return None
        except ray.exceptions.RayTaskError:
            raise
        except ray.exceptions.RayError as exc:  # the actor, its worker or its node is gone
            w.info["lost"] = f"{type(exc).__name__}"
            left = [item for item in w.share if item[0] not in self.records]
            if not left or w.attempt >= self.max_retries:
                return None
            self.retries += 1
            self.observe("retry", {"worker": w.name, "left": len(left), "error": type(exc).__name__})
            base = w.name.split(".")[0]
            return self._spawn(f"{base}.{w.attempt + 1}", left, w.attempt + 1)

    def _drain(self) -> None:
        for msg in ray.get(self.inbox.drain.remote()):
            w = self.workers.get(msg["tag"])
            if w is not None and msg["kind"] == "load_record":
                self._keep(w, int(msg["index"]), msg["record"])

    def _keep(self, w: _Worker | None, index: int, record: dict[str, Any]) -> None:
        if index in self.records:
            self.duplicates += 1
            return
        offset = w.info["clock_offset_s"] if w else None
        record.update(
            seq=self.seq + 1,
            load_index=index,
            node=w.info["node"] if w else None,
            clock_offset_s=offset,
            wall_start_driver=record["wall_start"] - offset if offset is not None else None,
        )
        self.seq += 1
        self.records[index] = record
        if self.store is not None:
            self.store.append_record(cast(RequestRecord, record))
        self.observe("request", {"index": index, "worker": record.get("worker"), "error": record["error"]})

    def _missing(self, index: int) -> dict[str, Any]:
        req = self.shares[index % len(self.shares)][index // len(self.shares)][1]
        return {
            **self.meta,
            "worker": None,
            "phase": req.phase,
            "prompt_id": req.prompt_id,
            "category": req.category,
            "warmup": False,
            "started_at": None,
            "wall_start": None,
            "concurrency": self.concurrency,
            "chunks": [],
            "error": {
                "type": "worker_lost",
                "message": f"no worker could send it ({self.max_retries} retries)",
            },
        }
