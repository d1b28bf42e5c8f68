"""Start (or attach to) the server one cell measures.

A launch picks a free port, records the argv and environment that reproduce it in the arm's
manifest entry, and waits for the engine's health endpoint. A port taken between choosing and
binding is retried on another port; an engine that dies before it answers is launched once more
(a flaky start, a transient out-of-memory). Attach mode launches nothing: the server is the URL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specbench.engines.base import Engine
from specbench.engines.process import ServerProcess, free_port
from specbench.errors import EngineStartError, PortTakenError
from specbench.matrix.config import Cell, Matrix
from specbench.store.sink import RecordSink

PORT_RETRIES = 3
START_ATTEMPTS = 2  # an engine that dies before answering /health is launched once more


@dataclass
class Server:
    base_url: str
    process: ServerProcess | None = None
    log_offset: int = 0
    hung: str | None = None  # set by the watchdog: the server stopped answering /health
    measured_offset: int | None = None  # log offset where the measured requests' lines begin
    expected_lines: int = 0  # acceptance lines the engine owes for requests finished so far
    model_files: list[dict[str, Any]] = field(default_factory=list)  # served: role, path, sha256, bytes

    def alive(self) -> bool:
        return self.hung is None and (self.process is None or self.process.alive())


@dataclass
class Launcher:
    """Serves one arm's cell: what to launch (matrix, engine), where its log and status go."""

    matrix: Matrix
    engine: Engine
    sink: RecordSink
    attach_url: str | None = None
    launched: Callable[[int], None] = field(default=lambda pid: None)  # each engine pid started

    def start(self, cell: Cell) -> Server:
        """Launch, trying again once when the engine dies before it is healthy; each failure is
        kept in the arm's manifest entry."""
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

    def _launch(self, cell: Cell) -> Server:
        if self.attach_url:
            self.sink.set_arm_status(cell.arm, command=[], attached=self.attach_url)
            return Server(base_url=self.attach_url.rstrip("/"))
        last: EngineStartError | None = None
        for _ in range(PORT_RETRIES):
            try:
                return self._launch_on(cell, free_port(self.matrix.host))
            except EngineStartError as exc:
                last = exc
                if not isinstance(exc, PortTakenError) and "bind" not in exc.log_tail.lower():
                    break  # not a port clash: retrying would fail the same way
        assert last is not None
        raise last

    def _launch_on(self, cell: Cell, port: int) -> Server:
        log = self.sink.log_path(cell.arm)
        argv = self.engine.command(self.matrix.model, list(cell.args), self.matrix.host, port)
        env = {**self.engine.launch_env(self.matrix.model), **self.matrix.env}
        self.sink.set_arm_status(cell.arm, command=argv, env=env)  # env + argv reproduce the launch
        offset = log.stat().st_size if log.exists() else 0
        proc = ServerProcess(argv, log, env=env, redactor=self.sink.redactor)  # scrubs the log it ends
        try:
            proc.start(
                f"http://{self.matrix.host}:{port}{self.engine.health_path}", self.matrix.startup_timeout
            )
        except EngineStartError:
            proc.stop()
            raise
        if proc.pid is not None:
            self.launched(proc.pid)  # an orphan can be reaped by whoever is told
        return Server(f"http://{self.matrix.host}:{port}", proc, offset)
