"""Schedule cells, serve each arm, drive its requests and keep every record.

Cells run in the order :func:`specbench.config.plan_cells` gives (arms interleaved ABBA across
repeats). Each cell launches the arm's server, scrapes /metrics before and after, runs warm-ups
(stored, flagged) and then the requests with at most ``concurrency`` in flight. Records are
appended as they complete, so Ctrl-C or a crash loses nothing measured and ``--resume`` redoes
only what is missing. A server that crashes mid-cell is restarted once; then the arm is failed.

*Where* cells run is an executor's business (:mod:`specbench.executors`): the default
:class:`~specbench.executors.local.LocalExecutor` runs them here, one after another, exactly as
listed; the Ray executor runs each cell as a task on a cluster node and streams its records back.
Either way the records, cells and manifest land in this run directory with the same schema.
An executor gets the cells and this runner as a :class:`~specbench.cellwork.CellJob`; serving a
cell writes to a :class:`~specbench.cellwork.RecordSink` (the run directory here, a relay on a
Ray worker: :func:`serve_cell`), so executors never import this module.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import httpx

from specbench import serverlog
from specbench.cellwork import Executor, Observer, RecordSink, RemoteCell
from specbench.client import Session, chat_body, open_streamer, stream_chat
from specbench.clientlag import LoopLag
from specbench.config import Matrix, RequestSpec, RunSpec
from specbench.engines.base import Engine, count_prompt_tokens, parse_metrics
from specbench.engines.process import ServerProcess, free_port, log_tail
from specbench.errors import EngineStartError, PortTakenError
from specbench.machine import MachineProbe, threads_arg
from specbench.probe import forward_probe
from specbench.recordwriter import RecordWriter
from specbench.redact import flag_values
from specbench.schema import CellInfo, RequestRecord
from specbench.store import RunStore, now_iso
from specbench.theory.machine import record_machine_probe
from specbench.workloads import arrivals
from specbench.workloads.length import check_fit, estimate_tokens, fit_messages
from specbench.workloads.rendered import render_samples

PORT_RETRIES = 3
START_ATTEMPTS = 2  # an engine that dies before answering /health is launched once more
HEALTH_TIMEOUT = 5.0  # the watchdog's patience after a failed request
# Transport failures worth one more try on a server that still answers /health.
# Error type names of both transports (httpx for the fakes, aiohttp for measured requests).
_RETRYABLE = frozenset(
    {"RemoteProtocolError", "ReadError", "WriteError", "ConnectError", "ServerDisconnectedError",
     "ClientOSError", "ClientConnectorError", "ClientPayloadError"}
)  # fmt: skip
_TIMEOUTS = frozenset(
    {"ReadTimeout", "WriteTimeout", "ConnectTimeout", "PoolTimeout", "TimeoutError",
     "ServerTimeoutError", "SocketTimeoutError", "ConnectionTimeoutError"}
)  # fmt: skip


@dataclass
class Server:
    base_url: str
    process: ServerProcess | None = None
    log_offset: int = 0
    hung: str | None = None  # set by the watchdog: the server stopped answering /health
    measured_offset: int | None = None  # log offset where the measured requests' lines begin
    expected_lines: int = 0  # acceptance lines the engine owes for requests finished so far

    def alive(self) -> bool:
        return self.hung is None and (self.process is None or self.process.alive())


@dataclass
class Runner:
    matrix: Matrix
    engine: Engine
    store: RunStore
    cells: list[RunSpec]
    attach_url: str | None = None
    observe: Observer = field(default=lambda event, info: None)
    executor: Executor | None = None  # None: LocalExecutor (cells here, in order)
    api_key: str | None = None  # sent as a bearer token (--api-key-env); else the arm's --api-key
    relay: RecordSink | None = None  # where a cell's lines go instead of ``store`` (a Ray worker's)
    launched: Callable[[int], None] = field(default=lambda pid: None)  # each engine pid started
    _seq: int = 0
    _fitted: dict[str, Any] = field(default_factory=dict)
    _writer: RecordWriter | None = None  # records written off the event loop (recordwriter.py)
    _session: Session | None = None  # the streaming session measured requests go through

    # -- plan -------------------------------------------------------------------------------
    def todo(self, cell: RunSpec, done: set[tuple[str, str, int]]) -> list[RequestSpec]:
        return [r for r in cell.requests if (cell.arm, r.prompt_id, cell.repeat) not in done]

    def total_todo(self) -> int:
        done = self.store.completed()
        return sum(len(self.todo(c, done)) for c in self.cells)

    @property
    def sink(self) -> RecordSink:
        """Where serving a cell writes: the run directory, or the relay that forwards to it."""
        return self.relay if self.relay is not None else self.store

    def arm_failed(self, arm: str) -> bool:
        return bool(self.sink.manifest().get("arms", {}).get(arm, {}).get("status") == "failed")

    def run(self) -> None:
        from specbench.executors.local import LocalExecutor

        try:
            self._seq = len(self.store.records())
            self._fitted = self.store.fitted_prompts()
            executor = self.executor or LocalExecutor()
            self._record_theory_inputs(isinstance(executor, LocalExecutor))
            executor.run_cells(self.cells, self)
            self.store.update_manifest(finished_at=now_iso())
        finally:
            self.store.close()  # fsync the journals, release the directory lock

    def _record_theory_inputs(self, local: bool) -> None:
        """Probe this machine for the theory before any engine starts (stored, read back by reports).

        Only when the cells are served here: a cluster's cells run on other machines."""
        if local:
            record_machine_probe(self.store.root)

    # -- state executors share with the runner -----------------------------------------------
    def next_seq(self) -> int:
        """The next record sequence number of this run directory."""
        self._seq += 1
        return self._seq

    @property
    def fitted(self) -> dict[str, Any]:
        """Prompts built to their target length so far (prompt_id → messages, tokens, ...)."""
        return self._fitted

    def remote(self) -> RemoteCell:
        """This run's cell-serving inputs for another machine (the Ray executor's tasks)."""
        return RemoteCell(self.matrix, self.engine, self.attach_url, serve_cell)

    # -- one cell ---------------------------------------------------------------------------
    def run_cell(self, cell: RunSpec, todo: list[RequestSpec]) -> None:
        """Serve ``cell`` here and run ``todo``: the unit of work every executor hands out."""
        self._run_cell(cell, todo)

    def _run_cell(self, cell: RunSpec, todo: list[RequestSpec]) -> None:
        self.observe("cell", {"arm": cell.arm, "repeat": cell.repeat, "requests": len(todo)})
        for attempt in range(2):
            try:
                server = self._launch_retrying(cell)
            except EngineStartError as exc:
                self._fail_arm(cell, f"engine did not start: {exc}", exc.log_tail)
                return
            try:
                self._serve_cell(cell, todo, server, attempt)
            finally:
                crashed = not server.alive()
                code = server.process.stop() if server.process else None
                self.sink.redactor.scrub_file(self.sink.log_path(cell.arm))  # engine stopped
            todo = self.todo(cell, self.sink.completed())
            if not todo or not crashed:
                return  # failed requests on a live server are data, not a reason to restart
            self.observe("restart", {"arm": cell.arm, "repeat": cell.repeat, "exit_code": code})
        why = "stopped answering" if server.hung else "crashed"
        self._fail_arm(
            cell, f"engine {why} twice in repeat {cell.repeat}", log_tail(self.sink.log_path(cell.arm))
        )

    def _launch_retrying(self, cell: RunSpec) -> Server:
        """Launch, trying again once when the engine dies before it is healthy (a flaky start,
        a transient out-of-memory); each failure is kept in the arm's manifest entry."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._launch(cell)
            except EngineStartError as exc:
                entry = self.sink.manifest().get("arms", {}).get(cell.arm, {})
                failures = [*entry.get("start_failures", []), {"repeat": cell.repeat, "error": str(exc)}]
                self.sink.set_arm_status(cell.arm, start_failures=failures)
                if attempt == START_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def _launch(self, cell: RunSpec) -> Server:
        if self.attach_url:
            self.sink.set_arm_status(cell.arm, command=[], attached=self.attach_url)
            return Server(base_url=self.attach_url.rstrip("/"))
        log = self.sink.log_path(cell.arm)
        last: EngineStartError | None = None
        for _ in range(PORT_RETRIES):
            port = free_port(self.matrix.host)
            argv = self.engine.command(self.matrix.model, list(cell.args), self.matrix.host, port)
            env = {**self.engine.launch_env(self.matrix.model), **self.matrix.env}
            self.sink.set_arm_status(cell.arm, command=argv, env=env)  # env + argv reproduce the launch
            offset = log.stat().st_size if log.exists() else 0
            proc = ServerProcess(argv, log, env=env)
            try:
                proc.start(
                    f"http://{self.matrix.host}:{port}{self.engine.health_path}", self.matrix.startup_timeout
                )
                server = Server(f"http://{self.matrix.host}:{port}", proc, offset)
                if proc.pid is not None:
                    self.launched(proc.pid)  # an orphan can be reaped by whoever is told
                return server
            except EngineStartError as exc:
                proc.stop()
                last = exc
                if not isinstance(exc, PortTakenError) and "bind" not in exc.log_tail.lower():
                    break  # not a port clash: retrying would fail the same way
        assert last is not None
        raise last

    def _fail_arm(self, cell: RunSpec, reason: str, tail: str) -> None:
        self.sink.set_arm_status(cell.arm, status="failed", error=reason, log_tail=tail)
        self.observe("failed", {"arm": cell.arm, "reason": reason, "log_tail": tail})

    def _serve_cell(self, cell: RunSpec, todo: list[RequestSpec], server: Server, attempt: int) -> None:
        info: CellInfo = {
            "arm": cell.arm,
            "repeat": cell.repeat,
            "attempt": attempt,
            "started_at": now_iso(),
            "base_url": server.base_url,
            "pid": server.process.pid if server.process else None,
        }
        probe = MachineProbe()  # the box's load and steal are evidence too (machine.py)
        # Only a sink that batches is written from a thread; one that relays records elsewhere
        # (the Ray executor's) keeps its own synchronous append_record.
        self._writer = RecordWriter(self.sink) if self.sink.batches else None
        try:
            asyncio.run(self._drive(cell, todo, server, info, warm=attempt == 0))
        finally:
            writer, self._writer = self._writer, None
            if writer is not None:
                writer.close()
        pid = server.process.pid if server.process else None
        info["machine_load"] = probe.finish(pid, threads_arg(cell.args))
        info["ended_at"] = now_iso()
        info["alive_at_end"] = server.alive()
        info["log_lines"] = self._new_log_lines(cell.arm, server)
        self.sink.append_cell(info)
        self.sink.sync()
        # Keep a status already set ("failed"), else "ok". Read with .get: the arm's entry exists
        # only if _launch registered it first, and a served cell must never die on the manifest.
        arm_entry = self.sink.manifest().get("arms", {}).get(cell.arm, {})
        failed = arm_entry.get("status") == "failed"  # "retrying" (--retry-failed) becomes "ok"
        self.sink.set_arm_status(cell.arm, status="failed" if failed else "ok")

    async def _drive(
        self, cell: RunSpec, todo: list[RequestSpec], server: Server, info: CellInfo, warm: bool
    ) -> None:
        headers = _auth_headers(self.api_key, cell.args)
        peak = max([cell.concurrency, *(r.concurrency or 0 for r in todo)])
        async with (
            httpx.AsyncClient(timeout=self.matrix.request_timeout, headers=headers) as client,
            open_streamer(self.matrix.request_timeout, peak, headers) as self._session,
        ):
            info["server"] = await self._safe(self.engine.describe(client, server.base_url))
            await self._fit(client, server, cell.requests)
            if cell.repeat == 0:  # once per arm: an arm's flags may change the chat template
                info["rendered_prompts"] = await render_samples(
                    client, server.base_url, cell.requests, self._fitted
                )
            for req in cell.warmup if warm else ():
                await self._one(client, server, cell, req, warmup=True)
            await self._log_window(server, cell, info, start=True)
            # After the warm-ups: /metrics deltas must cover exactly the measured requests, so
            # they can be compared with the per-request timings (acceptance sources).
            info["metrics_before"] = await self._scrape(client, server, cell, "before")
            lag = LoopLag()
            lag.start()
            for phase in _phases(todo):
                await self._run_phase(client, server, cell, phase)
            info["client_lag"] = await lag.stop()
            if server.hung:
                info["hung"] = server.hung
            else:
                await self._log_window(server, cell, info, start=False)
                info["metrics_after"] = await self._scrape(client, server, cell, "after")
            # Last, after the "after" scrape: extra work before the measured requests would warm the
            # baseline more than the other arms (an A/A run on the tiny lab model read ×0.57).
            if warm and self._probes(cell) and server.alive():
                info["forward_probe"] = await self._safe(forward_probe(client, self.engine, server.base_url))

    def _probes(self, cell: RunSpec) -> bool:
        """Probe the verify-cost curve once per baseline launch (the target alone is served there)."""
        return self.matrix.forward_probe and cell.arm == self.matrix.baseline and not self.attach_url

    async def _run_phase(
        self, client: httpx.AsyncClient, server: Server, cell: RunSpec, phase: list[RequestSpec]
    ) -> None:
        cap = phase[0].concurrency or cell.concurrency
        if phase[0].request_rate or self.matrix.workload.request_rate:
            await self._open_loop(client, server, cell, phase, cap)
            return
        limit = asyncio.Semaphore(cap)

        async def bounded(req: RequestSpec) -> None:
            async with limit:
                if server.alive():
                    await self._one(client, server, cell, req, warmup=False)

        await asyncio.gather(*(bounded(r) for r in phase))

    async def _open_loop(
        self, client: httpx.AsyncClient, server: Server, cell: RunSpec, phase: list[RequestSpec], cap: int
    ) -> None:
        """Send on a seeded arrival schedule (workloads/arrivals.py): the same for every arm of a
        repeat, stored in the run directory; each record keeps its lateness."""
        # The phase's own workload (several may run) and rate (a rate sweep gives each phase one).
        named = (w for w in self.matrix.all_workloads if w.label == phase[0].workload)
        wl = next(named, self.matrix.workload)
        rate = float(phase[0].request_rate or wl.request_rate or 0.0)
        seed = self.matrix.seed * 1000 + cell.repeat
        offsets = arrivals.schedule(len(phase), rate, wl.burstiness, seed, wl.ramp_up_s)
        name = f"{cell.arm}-r{cell.repeat}-{phase[0].phase}".replace("/", "_")  # phases may hold "/"
        info = {"rate": rate, "burstiness": wl.burstiness, "ramp_up_s": wl.ramp_up_s, "seed": seed}
        arrivals.save_schedule(self.sink.root, name, {**info, "cap": cap, "offsets_s": offsets})

        async def send(req: RequestSpec, timing: dict[str, Any]) -> None:
            if server.alive():
                await self._one(client, server, cell, req, warmup=False, timing={**timing, "arrival": info})

        await arrivals.open_loop(phase, offsets, cap, send)

    async def _fit(
        self, client: httpx.AsyncClient, server: Server, requests: tuple[RequestSpec, ...]
    ) -> None:
        """Build prompts to their target length once, with this server's tokenizer; every arm and
        repeat then sends exactly these messages (kept in the run directory for resume)."""
        todo = [r for r in requests if r.target_tokens and r.prompt_id not in self._fitted]
        if not todo:
            return
        probe = [{"role": "user", "content": "probe"}]
        exact = await count_prompt_tokens(client, server.base_url, probe) is not None

        async def count(messages: list[dict[str, Any]]) -> int:
            n = await count_prompt_tokens(client, server.base_url, messages) if exact else None
            return n if n is not None else await estimate_tokens(messages)

        # One filler per fill key (default: the prompt's own id, so no two prompts share a prefix);
        # requests sharing a key share the filler text and length found for the first of them.
        chars_by_key = {f["fill_key"]: f["chars"] for f in self._fitted.values() if "fill_key" in f}
        for req in todo:
            key = req.fill_key or req.prompt_id
            offset = zlib.crc32(key.encode())
            messages, tokens, chars = await fit_messages(
                list(req.messages), req.target_tokens or 0, count, offset, chars_by_key.get(key)
            )
            chars_by_key.setdefault(key, chars)
            check_fit(req.prompt_id, req.target_tokens or 0, tokens)
            self._fitted[req.prompt_id] = {
                "messages": messages,
                "tokens": tokens,
                "target": req.target_tokens,
                "counted_by": "tokenize" if exact else "estimate",
                "fill_key": key,
                "chars": chars,
            }
        self.sink.save_fitted_prompts(self._fitted)

    async def _one(
        self,
        client: httpx.AsyncClient,
        server: Server,
        cell: RunSpec,
        req: RequestSpec,
        warmup: bool,
        timing: dict[str, Any] | None = None,
    ) -> None:
        fitted = self._fitted.get(req.prompt_id)
        messages = fitted["messages"] if fitted else list(req.messages)
        extras = {**self.engine.request_extras(req.ignore_eos), **req.extra}
        if req.tools:
            extras["tools"] = list(req.tools)
        body = chat_body(messages, req.max_tokens, req.temperature, req.seed, extras)
        started, wall0 = now_iso(), time.time()
        url = f"{server.base_url}/v1/chat/completions"
        session = self._session if self._session is not None else client
        result = await self._request(session, client, server, url, body)
        record: dict[str, Any] = {
            "arm": cell.arm,
            "repeat": cell.repeat,
            "workload": req.workload or cell.workload,
            "phase": req.phase,
            "prompt_id": req.prompt_id,
            "category": req.category,
            "warmup": warmup,
            "seq": self.next_seq(),
            "started_at": started,
            "wall_start": wall0,
            "concurrency": req.concurrency or cell.concurrency,
            "request": req.echo(fitted["tokens"] if fitted else None),
            **(timing or {}),
            **result,
        }
        typed = cast(RequestRecord, record)  # the response's keys (client.stream_chat) are its too
        if self._writer is not None:
            self._writer.append(typed)
        else:
            self.sink.append_record(typed)
        server.expected_lines += self.engine.expected_log_lines(record)
        self.observe("request", {"arm": cell.arm, "warmup": warmup, "error": result["error"]})

    async def _request(
        self, session: Session, client: httpx.AsyncClient, server: Server, url: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """One streamed request; after a transport failure or timeout the watchdog asks /health:
        no answer marks the server hung (the cell stops), an answer earns a dropped connection
        one more try (the first error is kept in ``retried``)."""
        result = await stream_chat(session, url, body, self.matrix.request_timeout)
        kind = (result["error"] or {}).get("type")
        if kind not in _RETRYABLE | _TIMEOUTS or not server.alive():
            return result
        if not await self._answers_health(client, server):
            server.hung = f"no /health answer within {HEALTH_TIMEOUT:g} s after {kind}"
        elif kind in _RETRYABLE:
            again = await stream_chat(session, url, body, self.matrix.request_timeout)
            return {**again, "retried": result["error"]}
        return result

    async def _answers_health(self, client: httpx.AsyncClient, server: Server) -> bool:
        """The watchdog: a hung engine fails the cell now, not after every request's timeout."""
        if server.process is not None and not server.process.alive():
            return False
        try:
            resp = await client.get(f"{server.base_url}{self.engine.health_path}", timeout=HEALTH_TIMEOUT)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    async def _scrape(
        self, client: httpx.AsyncClient, server: Server, cell: RunSpec, when: str
    ) -> dict[str, Any]:
        try:
            resp = await client.get(f"{server.base_url}/metrics")
        except httpx.HTTPError as exc:
            return {"error": str(exc)}
        if resp.status_code != 200:
            return {"error": f"HTTP {resp.status_code}"}
        path = self.sink.save_scrape(cell.arm, cell.repeat, when, resp.text)
        return {"file": path, "spec": self.engine.spec_counters(parse_metrics(resp.text))}

    async def _safe(self, coro: Any) -> Any:
        try:
            return await coro
        except (httpx.HTTPError, ValueError) as exc:
            return {"error": str(exc)}

    async def _log_window(self, server: Server, cell: RunSpec, info: CellInfo, start: bool) -> None:
        """Wait for the acceptance lines of the requests finished so far (sources.py); at the start
        of the measured requests, remember where their lines begin so warm-ups stay out."""
        if server.process is None:
            return
        patterns = self.engine.acceptance_log_patterns()
        found, size = await serverlog.settle(
            self.sink.log_path(cell.arm),
            server.measured_offset if server.measured_offset is not None else server.log_offset,
            lambda ln: any(p in ln for p in patterns),
            server.expected_lines,
        )
        if start:
            server.measured_offset, server.expected_lines = size, 0
            info["log_window"] = "measured"
        else:
            info["log_lines_expected"], info["log_lines_found"] = server.expected_lines, found

    def _new_log_lines(self, arm: str, server: Server) -> list[str]:
        """Failure lines from the launch on, then acceptance lines of the measured requests only."""
        log = self.sink.log_path(arm)
        if server.process is None or not log.exists():
            return []
        lines = [ln.strip() for ln in serverlog.read_from(log, server.log_offset).splitlines()]
        failures = [ln for ln in lines if any(p in ln for p in self.engine.fallback_patterns())]
        if server.measured_offset is not None:
            lines = [ln.strip() for ln in serverlog.read_from(log, server.measured_offset).splitlines()]
        # Capped: SGLang logs one every few steps.
        accepts = [ln for ln in lines if any(p in ln for p in self.engine.acceptance_log_patterns())]
        return failures[:100] + accepts[:1000]


def _auth_headers(api_key: str | None, args: tuple[str, ...]) -> dict[str, str]:
    """The key a protected server wants: the user's (from the environment) or the one the arm
    starts the engine with; llama.cpp, vLLM and SGLang all take it as a bearer token."""
    key = api_key or next(iter(flag_values(args, ["--api-key"])), None)
    return {"Authorization": f"Bearer {key}"} if key else {}


def _phases(requests: list[RequestSpec]) -> list[list[RequestSpec]]:
    """Consecutive requests grouped by phase, in order (sweeps run one level at a time)."""
    groups: dict[str, list[RequestSpec]] = {}
    for req in requests:
        groups.setdefault(req.phase, []).append(req)
    return list(groups.values())


def serve_cell(
    remote: RemoteCell,
    cell: RunSpec,
    todo: list[RequestSpec],
    fitted: dict[str, Any],
    scratch: RunStore,
    sink: RecordSink,
    observe: Observer,
    launched: Callable[[int], None],
) -> bool:
    """Serve one cell on this machine for an executor elsewhere (:class:`cellwork.ServeCell`):
    every line goes to ``sink``; returns whether the arm has failed."""
    runner = Runner(
        matrix=remote.matrix,
        engine=remote.engine,
        store=scratch,
        cells=[cell],
        attach_url=remote.attach_url,
        observe=observe,
        relay=sink,
        launched=launched,
    )
    runner.fitted.update(fitted)
    runner.run_cell(cell, todo)
    return runner.arm_failed(cell.arm)
