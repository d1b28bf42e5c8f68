"""The worker's side of the Ray executor: the Ray task that serves one cell on the node Ray
picked, and the helpers the driver pins to a node (node environment, orphan reaper).

The task serves the cell with the same code as a local run (the job's
:class:`~specbench.executors.base.RemoteCell`); only where its lines go differs: :class:`_RelaySink`
sends every record, cell summary, /metrics scrape, arm status and fitted prompt set to the
driver's inbox as it is written, so the driver (:mod:`specbench.executors._ray_driver`) can append
them to the one run directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import psutil

from specbench.engines.base import Engine
from specbench.executors._ray_common import Relay, node_identity
from specbench.executors.base import RemoteCell
from specbench.matrix.config import Cell
from specbench.store.redact import Redactor
from specbench.store.rundir import RecordKey, RunStore, environment, file_sha256
from specbench.store.schema import CellInfo, RequestRecord

RemoteObserver = Callable[[str, dict[str, Any]], None]


class _RelaySink:
    """A cell's lines on the worker (a :class:`~specbench.executors.base.RecordSink`): each goes to the
    driver; a scratch run directory keeps the engine log, the scrapes and a manifest the runner
    reads its arm's status back from."""

    batches = False  # each send waits for delivery, in order, on the runner's thread

    def __init__(self, scratch: RunStore, relay: Relay, done: set[RecordKey]) -> None:
        self.scratch = scratch
        self.relay = relay
        self.done = set(done)  # measured keys: this cell's own, as the driver's run directory has them

    @property
    def root(self) -> Path:
        return self.scratch.root

    @property
    def redactor(self) -> Redactor:
        return self.scratch.redactor

    def manifest(self) -> dict[str, Any]:
        return self.scratch.manifest()

    def set_arm_status(self, arm: str, **fields: Any) -> None:
        self.scratch.set_arm_status(arm, **fields)
        self.relay.send("arm_status", arm=arm, fields=fields)

    def append_record(self, record: RequestRecord) -> None:
        self.relay.send("record", record=record)
        if not record.get("warmup") and record.get("error") is None:
            self.done.add((record["arm"], record["prompt_id"], record["repeat"]))

    def append_records(self, records: list[RequestRecord]) -> None:
        for record in records:
            self.append_record(record)

    def append_lines(self, lines: list[str]) -> None:
        for line in lines:  # never called (batches is False), kept so the protocol holds whole
            self.append_record(cast(RequestRecord, json.loads(line)))

    def append_cell(self, cell: CellInfo) -> None:
        self.relay.send("cell", info=cell)

    def completed(self) -> set[RecordKey]:
        return set(self.done)

    def log_path(self, arm: str) -> Path:
        return self.scratch.log_path(arm)

    def save_scrape(self, arm: str, repeat: int, when: str, text: str) -> str:
        name = self.scratch.save_scrape(arm, repeat, when, text)
        self.relay.send("scrape", name=name, text=text)
        return name

    def save_fitted_prompts(self, fitted: dict[str, Any]) -> None:
        self.relay.send("fitted", fitted=fitted)

    def sync(self) -> None:
        self.scratch.sync()


def run_cell_remote(job: dict[str, Any], inbox: Any) -> dict[str, Any]:
    """The Ray task: serve one cell on this node, relaying everything to the driver."""
    cell: Cell = job["cell"]
    remote: RemoteCell = job["remote"]
    relay = Relay(inbox, job["tag"])
    scratch = Path(tempfile.mkdtemp(prefix="specbench-cell-"))
    relay.send("start", node=node_identity(), scratch=str(scratch), wall=time.time())
    store = RunStore(scratch)
    store.create({"scratch_for": job["tag"]}, resume=False)
    sink = _RelaySink(store, relay, job["done"])
    hook: RemoteObserver | None = job["remote_observer"]

    def observe(event: str, info: dict[str, Any]) -> None:
        if event != "request":  # the driver counts requests as it stores them
            relay.send("observe", event=event, info=info)
        if hook is not None:
            hook(event, info)

    def launched(pid: int) -> None:  # so the driver can reap an orphaned engine
        relay.send("server", pid=pid, create_time=psutil.Process(pid).create_time())

    try:
        failed = remote.serve(remote, cell, job["todo"], job["fitted"], store, sink, observe, launched)
        return {"failed": failed}
    finally:
        log = store.log_path(cell.arm)
        with contextlib.suppress(Exception):
            relay.send("log", text=log.read_text(errors="replace") if log.is_file() else "")
        shutil.rmtree(scratch, ignore_errors=True)


def node_environment(engine: Engine, model: str | None) -> dict[str, Any]:
    """This node's environment, engine version and model checksum (as env.json, per node)."""
    env: dict[str, Any] = {**environment(), "node": node_identity()}
    try:
        env["engine"] = {"kind": engine.kind, **engine.version()}
    except Exception as exc:  # a missing binary is the cell's error to report, not this task's
        env["engine"] = {"kind": engine.kind, "error": f"{type(exc).__name__}: {exc}"}
    if model and os.path.isfile(model):
        env["model"] = {"path": model, "sha256": file_sha256(Path(model)), "bytes": os.path.getsize(model)}
    elif model:
        env["model"] = {"path": model, "error": "not a file on this node"}
    return env


def reap_servers(servers: list[tuple[int, float]], scratch: str | None) -> str:
    """After a lost task: kill its engines' process groups (same pid *and* start time, so a
    reused pid is left alone) and return its engine log from the scratch folder."""
    for pid, created in servers:
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            if abs(psutil.Process(pid).create_time() - created) < 0.01:
                os.killpg(pid, signal.SIGKILL)
    text = ""
    if scratch and os.path.isdir(scratch):
        logs = sorted(Path(scratch, "logs").glob("*.log"))
        text = "".join(p.read_text(errors="replace") for p in logs)
        shutil.rmtree(scratch, ignore_errors=True)
    return text
