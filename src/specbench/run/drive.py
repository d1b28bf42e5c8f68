"""Drive one cell's requests against a running server and keep what they show.

A cell is one arm's server for one repeat. Before the measured requests: the server's
self-description, prompts fitted to their target length with this server's tokenizer, one rendered
prompt per category (first repeat), the warm-ups (stored, flagged). Then /metrics and the log
window open, the requests run phase by phase (closed loop with at most ``concurrency`` in flight,
or on a seeded arrival schedule), the window closes and /metrics is scraped again; the
verify-cost probe comes last so it warms no arm more than another. A watchdog asks /health after a
transport failure so a hung engine ends the cell at once (:mod:`specbench.run.runner` restarts it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from specbench.client.looplag import LoopLag
from specbench.client.pool import StreamerPool, auto_processes, stream_request
from specbench.client.readstamps import clamps_of, combined_stamps, stamps_of
from specbench.client.stream import Session, chat_body, open_streamer
from specbench.engines.base import Engine, parse_metrics
from specbench.engines.specprobe import per_request_probe
from specbench.errors import ClientError
from specbench.executors.base import Observer
from specbench.matrix.config import Cell, Matrix, RequestSpec
from specbench.run import serverlog
from specbench.run.forwardprobe import forward_probe
from specbench.run.launch import Server
from specbench.run.machineload import MachineLoad, threads_arg
from specbench.store.recordwriter import RecordWriter
from specbench.store.redact import flag_values
from specbench.store.rundir import now_iso
from specbench.store.schema import CellInfo, RequestRecord
from specbench.store.sink import RecordSink
from specbench.transport import Http, open_http
from specbench.workloads import arrivals
from specbench.workloads.length import check_fit, estimate_tokens, fit_messages
from specbench.workloads.rendered import render_samples

HEALTH_TIMEOUT = 5.0  # the watchdog's patience after a failed request
# Transport failures worth one more try on a server that still answers /health.
# Error type names a stream records (specbench.transport: aiohttp's, for every request).
_RETRYABLE = frozenset(
    {"ServerDisconnectedError", "ClientOSError", "ClientConnectorError", "ClientPayloadError"}
)  # fmt: skip
_TIMEOUTS = frozenset(
    {"TimeoutError", "ServerTimeoutError", "SocketTimeoutError", "ConnectionTimeoutError"}
)  # fmt: skip


@dataclass
class CellDriver:
    """What serving one cell needs from its run: the matrix and engine, where lines go, the
    prompts fitted so far (shared with the run, filled in place) and the run's record numbering."""

    matrix: Matrix
    engine: Engine
    sink: RecordSink
    fitted: dict[str, Any]
    next_seq: Callable[[], int]
    observe: Observer
    attach_url: str | None = None
    api_key: str | None = None  # sent as a bearer token (--api-key-env); else the arm's --api-key
    spec_probe: bool = False  # tune's screening: do per-request speculative settings work? (specprobe.py)
    _writer: RecordWriter | None = None  # records written off the event loop (store/recordwriter.py)
    _session: Session | StreamerPool | None = None  # what measured requests stream through

    def serve(self, cell: Cell, todo: list[RequestSpec], server: Server, attempt: int) -> None:
        """Run ``todo`` (warm-ups first on a fresh launch) against ``server`` and store the cell."""
        info: CellInfo = {
            "arm": cell.arm,
            "repeat": cell.repeat,
            "attempt": attempt,
            "started_at": now_iso(),
            "base_url": server.base_url,
            "pid": server.process.pid if server.process else None,
        }
        if server.model_files:  # what this launch served (run/servedfiles.py)
            info["model_files"] = server.model_files
        load = MachineLoad()  # the box's load and steal are evidence too (machineload.py)
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
        info["machine_load"] = load.finish(pid, threads_arg(cell.args))
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
        self, cell: Cell, todo: list[RequestSpec], server: Server, info: CellInfo, warm: bool
    ) -> None:
        headers = _auth_headers(self.api_key, cell.args)
        peak = max([cell.concurrency, *(r.concurrency or 0 for r in todo)])
        async with (
            open_http(self.matrix.request_timeout, headers) as client,
            _streamer(self.matrix, peak, headers, threads_arg(cell.args)) as self._session,
        ):
            info["server"] = await self._safe(self.engine.describe(client, server.base_url))
            await self._fit(client, server, cell.requests)
            if cell.repeat == 0:  # once per arm: an arm's flags may change the chat template
                info["rendered_prompts"] = await render_samples(
                    self.engine, client, server.base_url, cell.requests, self.fitted
                )
            for req in cell.warmup if warm else ():
                await self._one(client, server, cell, req, warmup=True)
            await self._log_window(server, cell, info, start=True)
            # After the warm-ups: /metrics deltas must cover exactly the measured requests, so
            # they can be compared with the per-request timings (acceptance sources).
            info["metrics_before"] = await self._scrape(client, server, cell, "before")
            lag = LoopLag()
            lag.start()
            if isinstance(self._session, StreamerPool):
                await self._session.lag("reset")
            for phase in _phases(todo):
                await self._run_phase(client, server, cell, phase)
            info["client_lag"] = await self._client_lag(lag)
            if server.hung:
                info["hung"] = server.hung
            else:
                await self._log_window(server, cell, info, start=False)
                info["metrics_after"] = await self._scrape(client, server, cell, "after")
            # Last, after the "after" scrape: extra work before the measured requests would warm the
            # baseline more than the other arms (an A/A run on the tiny lab model read ×0.57).
            if warm and self._probes(cell) and server.alive():
                info["forward_probe"] = await self._safe(forward_probe(client, self.engine, server.base_url))
            if warm and self._spec_probes(cell) and server.alive():
                info["spec_probe"] = await self._safe(per_request_probe(client, self.engine, server.base_url))

    async def _client_lag(self, lag: LoopLag) -> dict[str, Any]:
        """The worst loop lag over the cell's loop and its client workers (whose loops stamp the
        reads where there are workers), which stamps the reads carried, and how many reads were
        not stamped with the kernel's receive time as it came (``stamp_clamps``, where any)."""
        lags = [await lag.stop()]
        if isinstance(self._session, StreamerPool):
            workers = await self._session.lag("report")
            lags += workers
            stamps, extra = (
                combined_stamps([w.get("stamps", "none") for w in workers]),
                {"processes": len(workers)},
            )
            clamps = sum((Counter(w.pop("stamp_clamps", {})) for w in workers), Counter[str]())
        else:
            stamps, extra, clamps = stamps_of(self._session), {}, Counter(clamps_of(self._session))
        worst = max(lags, key=lambda one: float(one.get("p99_ms", -1.0)))
        return {**worst, "stamps": stamps, **extra, **({"stamp_clamps": dict(clamps)} if clamps else {})}

    def _spec_probes(self, cell: Cell) -> bool:
        """A tune's screening round asks each speculative launch whether per-request settings work."""
        return self.spec_probe and cell.repeat == 0 and cell.arm != self.matrix.baseline

    def _probes(self, cell: Cell) -> bool:
        """Probe the verify-cost curve once per baseline launch (the target alone is served there)."""
        return self.matrix.forward_probe and cell.arm == self.matrix.baseline and not self.attach_url

    async def _run_phase(self, client: Http, server: Server, cell: Cell, phase: list[RequestSpec]) -> None:
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
        self, client: Http, server: Server, cell: Cell, phase: list[RequestSpec], cap: int
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

    async def _fit(self, client: Http, server: Server, requests: tuple[RequestSpec, ...]) -> None:
        """Build prompts to their target length once, with this server's tokenizer; every arm and
        repeat then sends exactly these messages (kept in the run directory for resume)."""
        todo = [r for r in requests if r.target_tokens and r.prompt_id not in self.fitted]
        if not todo:
            return
        probe = [{"role": "user", "content": "probe"}]
        # The engine asks its own endpoint (none on SGLang): one probe decides for the whole fit.
        exact = await self.engine.count_prompt_tokens(client, server.base_url, probe) is not None

        async def count(messages: list[dict[str, Any]]) -> int:
            n = await self.engine.count_prompt_tokens(client, server.base_url, messages) if exact else None
            return n if n is not None else await estimate_tokens(messages)

        # One filler per fill key (default: the prompt's own id, so no two prompts share a prefix);
        # requests sharing a key share the filler text and length found for the first of them.
        chars_by_key = {f["fill_key"]: f["chars"] for f in self.fitted.values() if "fill_key" in f}
        for req in todo:
            key = req.fill_key or req.prompt_id
            offset = zlib.crc32(key.encode())
            messages, tokens, chars = await fit_messages(
                list(req.messages), req.target_tokens or 0, count, offset, chars_by_key.get(key)
            )
            chars_by_key.setdefault(key, chars)
            check_fit(req.prompt_id, req.target_tokens or 0, tokens)
            self.fitted[req.prompt_id] = {
                "messages": messages,
                "tokens": tokens,
                "target": req.target_tokens,
                "counted_by": "tokenize" if exact else "estimate",
                "fill_key": key,
                "chars": chars,
            }
        self.sink.save_fitted_prompts(self.fitted)

    async def _one(
        self,
        client: Http,
        server: Server,
        cell: Cell,
        req: RequestSpec,
        warmup: bool,
        timing: dict[str, Any] | None = None,
    ) -> None:
        fitted = self.fitted.get(req.prompt_id)
        messages = fitted["messages"] if fitted else list(req.messages)
        extras = {**self.engine.request_extras(req.ignore_eos), **req.extra}
        if req.tools:
            extras["tools"] = list(req.tools)
        body = chat_body(messages, req.max_tokens, req.temperature, req.seed, extras)
        started, wall0 = now_iso(), time.time()
        url = f"{server.base_url}/v1/chat/completions"
        if self._session is None:  # opened by _drive for the cell, with the control client
            raise ClientError("no streaming session: requests are sent inside a cell")
        result = await self._request(self._session, client, server, url, body)
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
        self,
        session: Session | StreamerPool,
        client: Http,
        server: Server,
        url: str,
        body: dict[str, Any],
    ) -> dict[str, Any]:
        """One streamed request; after a transport failure or timeout the watchdog asks /health:
        no answer marks the server hung (the cell stops), an answer earns a dropped connection
        one more try (the first error is kept in ``retried``)."""
        result = await stream_request(session, url, body, self.matrix.request_timeout)
        kind = (result["error"] or {}).get("type")
        if kind not in _RETRYABLE | _TIMEOUTS or not server.alive():
            return result
        if not await self._answers_health(client, server):
            server.hung = f"no /health answer within {HEALTH_TIMEOUT:g} s after {kind}"
        elif kind in _RETRYABLE:
            again = await stream_request(session, url, body, self.matrix.request_timeout)
            return {**again, "retried": result["error"]}
        return result

    async def _answers_health(self, client: Http, server: Server) -> bool:
        """The watchdog: a hung engine fails the cell now, not after every request's timeout."""
        if server.process is not None and not server.process.alive():
            return False
        try:
            resp = await client.get(f"{server.base_url}{self.engine.health_path}", timeout=HEALTH_TIMEOUT)
        except ClientError:
            return False
        return resp.status_code == 200

    async def _scrape(self, client: Http, server: Server, cell: Cell, when: str) -> dict[str, Any]:
        try:
            resp = await client.get(f"{server.base_url}/metrics")
        except ClientError as exc:
            return {"error": str(exc)}
        if resp.status_code != 200:
            return {"error": f"HTTP {resp.status_code}"}
        path = self.sink.save_scrape(cell.arm, cell.repeat, when, resp.text)
        try:
            samples = parse_metrics(resp.text)
        except ValueError:  # a server whose /metrics went bad mid-run: the cell's counters are unknown
            return {"file": path, "error": "not Prometheus text"}
        return {"file": path, "spec": self.engine.spec_counters(samples)}

    async def _safe(self, coro: Any) -> Any:
        try:
            return await coro
        except (ClientError, ValueError) as exc:
            return {"error": str(exc)}

    async def _log_window(self, server: Server, cell: Cell, info: CellInfo, start: bool) -> None:
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
        """Failure and settings lines from the launch on (the settings are CONFOUND's evidence:
        two spellings the server reports alike are one setting), then acceptance lines of the
        measured requests only."""
        log = self.sink.log_path(arm)
        if server.process is None or not log.exists():
            return []
        lines = [ln.strip() for ln in serverlog.read_from(log, server.log_offset).splitlines()]
        kept = [*self.engine.fallback_patterns(), *self.engine.settings_log_patterns()]
        failures = [ln for ln in lines if any(p in ln for p in kept)]
        if server.measured_offset is not None:
            lines = [ln.strip() for ln in serverlog.read_from(log, server.measured_offset).splitlines()]
        # Capped: SGLang logs one every few steps.
        accepts = [ln for ln in lines if any(p in ln for p in self.engine.acceptance_log_patterns())]
        return failures[:100] + accepts[:1000]


def _streamer(
    matrix: Matrix, peak: int, headers: dict[str, str], engine_threads: str | None
) -> contextlib.AbstractAsyncContextManager[Session | StreamerPool]:
    """The cell's streaming session, or its client worker processes (``client_processes``; where
    the matrix does not set it, as many as the streams need and the cores free of the engine allow)."""
    processes = matrix.client_processes
    if "client_processes" not in matrix.model_fields_set:
        threads = int(engine_threads) if engine_threads and engine_threads.isdigit() else None
        processes = auto_processes(peak, threads)
    if processes > 1:
        return StreamerPool(processes, matrix.request_timeout, peak, headers)
    return open_streamer(matrix.request_timeout, peak, headers)


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
