"""The driver's side of the Ray executor: one ``run_cells`` call on the process that called
``specbench run``.

Data flow: the driver submits one :func:`~specbench.executors._ray_cell.run_cell_remote` task
per cell (with the resources :mod:`specbench.executors._ray_resources` plans), drains the
messages those tasks send to its inbox into the one run directory (``_on_<kind>``), and settles
a task when its result arrives: done, or lost with its worker or node and resubmitted with the
requests that have no record yet. At the end it writes each node's environment and the
placement summary into the manifest.
"""

from __future__ import annotations

import contextlib
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import ray  # type: ignore[import-not-found, unused-ignore]

from specbench.engines import ENGINES
from specbench.executors._ray_cell import RemoteObserver, node_environment, reap_servers, run_cell_remote
from specbench.executors._ray_common import node_clock, node_name, node_table, pinned, start_inbox
from specbench.executors._ray_resources import (
    accelerator_pin,
    hardware_by_arm,
    json_key,
    names_accelerator,
    node_hardware,
    task_options,
)
from specbench.executors.base import CellJob
from specbench.matrix.config import Cell, Matrix
from specbench.store.rundir import RecordKey, now_iso, write_json
from specbench.store.schema import CellInfo, RequestRecord


class DriverSettings(Protocol):
    """What the driver reads of its executor (:class:`~specbench.executors.ray_executor.RayExecutor`
    is one): a protocol, so the executor imports the driver and never the other way round."""

    address: str | None
    resources: dict[str, dict[str, Any]]
    max_retries: int
    max_in_flight: int | None
    same_hardware: bool
    hash_models: bool
    remote_observer: RemoteObserver | None
    poll_s: float

    def requested(self, arm: str) -> dict[str, Any]: ...


@dataclass
class _Task:
    """One submission of a cell: where it ran and which engines it started, for retries and reaping."""

    cell: Cell
    attempt: int  # Ray-level: 0, then one more per lost worker/node
    options: dict[str, Any] = field(default_factory=dict)
    node_id: str | None = None
    node: str | None = None
    scratch: str | None = None
    servers: list[tuple[int, float]] = field(default_factory=list)
    finished: bool = False

    @property
    def tag(self) -> str:
        return f"{self.cell.arm}/r{self.cell.repeat}/a{self.attempt}"


class Driver:
    """One ``run_cells`` call: submits tasks, drains the inbox into the store, retries lost ones."""

    def __init__(self, ex: DriverSettings, job: CellJob, cells: list[Cell]) -> None:
        self.ex = ex
        self.job = job  # the plan's rules, the run's sequence numbers, fitted prompts, observer
        self.store = job.store
        self.remote = job.remote()
        self.matrix: Matrix = self.remote.matrix
        self.seen: set[RecordKey] = self.store.completed()
        self.waiting: deque[_Task] = deque(_Task(cell, 0) for cell in cells)
        self.pending: dict[Any, _Task] = {}
        self.tasks: dict[str, _Task] = {}
        self.first: _Task | None = None
        self.needs_fit = any(
            r.target_tokens and r.prompt_id not in job.fitted for c in cells for r in c.requests
        )
        self.pin: dict[str, float] | None = None if self._may_pin() else {}
        self.nodes: dict[str, dict[str, Any]] = {}  # node id → name, Ray description, env task, env
        self.cells_per_node: Counter[str] = Counter()
        self.reaps: dict[Any, _Task] = {}
        self.stats: Counter[str] = Counter()
        self.inbox = start_inbox()
        self.table = node_table()

    def _may_pin(self) -> bool:
        asked = {k for v in self.ex.resources.values() for k in v}
        return self.ex.same_hardware and not names_accelerator(asked)

    # -- loop -----------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            while self.waiting or self.pending:
                self._submit()
                if not self.pending:
                    continue
                ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=self.ex.poll_s)
                self._drain()
                for ref in ready:
                    self._finish(ref)
        except BaseException:
            self._abort()
            raise
        finally:
            with contextlib.suppress(Exception):
                self._drain()
            self._settle()

    def _gate_open(self) -> bool:
        """After the first cell is submitted, the rest wait for it to finish when prompts still
        need fitting (one tokenizer builds them) or to start when its node fixes the hardware."""
        first = self.first
        if first is None or first.finished:
            return True
        if self.needs_fit:
            return False
        return self.pin is not None

    def _submit(self) -> None:
        while self.waiting and self._gate_open():
            if self.ex.max_in_flight is not None and len(self.pending) >= self.ex.max_in_flight:
                return
            task = self.waiting.popleft()
            cell = task.cell
            todo = self.job.todo(cell, self.seen)
            if self.job.arm_failed(cell.arm) or not todo:
                continue
            request = self.ex.requested(cell.arm)
            if self.pin and not names_accelerator(request):
                request.update(self.pin)
            task.options = request
            job = {
                "tag": task.tag,
                "cell": cell,
                "todo": todo,
                "done": {k for k in self.seen if k[0] == cell.arm and k[2] == cell.repeat},
                "remote": self.remote,
                "fitted": dict(self.job.fitted),
                "remote_observer": self.ex.remote_observer,
            }
            remote = ray.remote(run_cell_remote).options(
                name=f"specbench {task.tag}", max_retries=0, **task_options(request)
            )
            self.pending[remote.remote(job, self.inbox)] = task
            self.tasks[task.tag] = task
            if self.first is None:
                self.first = task

    def _finish(self, ref: Any) -> None:
        task = self.pending.pop(ref)
        task.finished = True
        if task is self.first:
            self.needs_fit = False
        try:
            ray.get(ref)
        except ray.exceptions.RayTaskError:
            raise  # an exception in specbench's own code on the worker: stop, as a local run would
        except ray.exceptions.RayError as exc:
            self._lost(task, exc)
            return
        self.job.observe("cell_done", {"arm": task.cell.arm, "repeat": task.cell.repeat, "node": task.node})

    def _lost(self, task: _Task, exc: Exception) -> None:
        """Worker or node gone: keep what arrived, reap the orphan, resubmit what is missing."""
        self.stats["lost"] += 1
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
        cell = task.cell
        self.store.append_cell(
            {
                "arm": cell.arm,
                "repeat": cell.repeat,
                "attempt": None,
                "lost": True,
                "error": error,
                "ended_at": now_iso(),
                **self._where(task, env_timeout=30.0),  # the node may be gone
            }
        )
        if task.node_id and (task.servers or task.scratch):
            reap = ray.remote(reap_servers).options(
                num_cpus=0, max_retries=0, scheduling_strategy=pinned(task.node_id)
            )
            self.reaps[reap.remote(task.servers, task.scratch)] = task
        if task is self.first:
            self.first = None  # its retry goes first again (fitting, hardware pinning)
        info = {"arm": cell.arm, "repeat": cell.repeat, "node": task.node, "error": error}
        if task.attempt < self.ex.max_retries:
            self.stats["retried"] += 1
            self.job.observe("retry", {**info, "task_attempt": task.attempt + 1})
            self.waiting.appendleft(_Task(cell, task.attempt + 1))
        else:
            reason = f"cell lost {task.attempt + 1} times in repeat {cell.repeat}: {error}"
            self.store.set_arm_status(cell.arm, status="failed", error=reason, log_tail="")
            self.job.observe("failed", {"arm": cell.arm, "reason": reason, "log_tail": ""})

    def _abort(self) -> None:
        """Ctrl-C or an error: cancel running cells (their engines stop), keep what they sent."""
        with contextlib.suppress(Exception):
            for ref in self.pending:
                ray.cancel(ref)
            ray.wait(list(self.pending), num_returns=len(self.pending), timeout=30)
            self._drain()
            for task in self.pending.values():
                if task.node_id and task.servers:
                    reap = ray.remote(reap_servers).options(
                        num_cpus=0, scheduling_strategy=pinned(task.node_id)
                    )
                    self.reaps[reap.remote(task.servers, None)] = task
        self.pending.clear()

    # -- messages from workers -------------------------------------------------------------------
    def _drain(self) -> None:
        for msg in ray.get(self.inbox.drain.remote()):
            task = self.tasks.get(msg["tag"])
            if task is not None:
                getattr(self, f"_on_{msg['kind']}")(task, msg)

    def _on_start(self, task: _Task, msg: dict[str, Any]) -> None:
        node = msg["node"]
        task.node_id, task.scratch = node["node_id"], msg["scratch"]
        task.node = self._see_node(node)
        self.cells_per_node[task.node] += 1
        if self.pin is None:
            ray_node = self.nodes[task.node_id]["ray"]
            self.pin = accelerator_pin(ray_node["resources"])

    def _on_server(self, task: _Task, msg: dict[str, Any]) -> None:
        task.servers.append((int(msg["pid"]), float(msg["create_time"])))

    def _on_arm_status(self, task: _Task, msg: dict[str, Any]) -> None:
        fields = dict(msg["fields"])
        if fields.get("status") == "ok" and self.job.arm_failed(msg["arm"]):
            del fields["status"]  # another cell failed the arm: one cell's success does not undo it
        if fields:
            self.store.set_arm_status(msg["arm"], **fields)

    def _on_record(self, task: _Task, msg: dict[str, Any]) -> None:
        rec: RequestRecord = msg["record"]
        key = (rec["arm"], rec["prompt_id"], rec["repeat"])
        measured_ok = not rec.get("warmup") and rec.get("error") is None
        if measured_ok and key in self.seen:
            self.stats["duplicates_dropped"] += 1
            return
        rec["seq"], rec["node"], rec["task_attempt"] = self.job.next_seq(), task.node, task.attempt
        self.store.append_record(rec)
        if measured_ok:
            self.seen.add(key)
        info = {"arm": rec["arm"], "warmup": rec.get("warmup"), "error": rec.get("error"), "node": task.node}
        self.job.observe("request", info)

    def _on_cell(self, task: _Task, msg: dict[str, Any]) -> None:
        self.store.append_cell({**msg["info"], **self._where(task)})

    def _on_scrape(self, task: _Task, msg: dict[str, Any]) -> None:
        self.store.write_text(f"metrics/{Path(msg['name']).name}", msg["text"])  # scrubbed, guarded

    def _on_fitted(self, task: _Task, msg: dict[str, Any]) -> None:
        for prompt_id, fitted in msg["fitted"].items():
            self.job.fitted.setdefault(prompt_id, fitted)  # the first fit wins: one set of prompts
        self.store.save_fitted_prompts(self.job.fitted)

    def _on_observe(self, task: _Task, msg: dict[str, Any]) -> None:
        info = {**msg["info"], "node": task.node, "task_attempt": task.attempt}
        if msg["event"] == "cell":
            info["node_cells"] = self.cells_per_node[task.node or ""]
        self.job.observe(msg["event"], info)

    def _on_log(self, task: _Task, msg: dict[str, Any]) -> None:
        self._append_log(task, msg["text"], "")

    def _append_log(self, task: _Task, text: str, note: str) -> None:
        if not text:
            return
        header = f"\n===== specbench: ray task {task.tag} on node {task.node}{note}\n"
        self.store.append_log(task.cell.arm, header + text)  # scrubbed, guarded

    # -- nodes ------------------------------------------------------------------------------------
    def _see_node(self, node: dict[str, Any]) -> str:
        node_id = node["node_id"]
        if node_id not in self.nodes:
            if node_id not in self.table:
                self.table = node_table()
            hashed = self.ex.hash_models and ENGINES[self.matrix.engine].model_is_file
            model = self.matrix.model if hashed else None
            env_task = ray.remote(node_environment).options(num_cpus=0, scheduling_strategy=pinned(node_id))
            self.nodes[node_id] = {
                "name": node_name(node["host"], node_id),
                "ray": self.table.get(node_id, {"resources": {}, "labels": {}}),
                "env_task": env_task.remote(self.remote.engine, model),
                "env": None,
            }
        return str(self.nodes[node_id]["name"])

    def _env(self, node_id: str, timeout: float = 300.0) -> dict[str, Any]:
        """The node's environment, written to ``envs/<node>.json`` the first time it is needed."""
        node = self.nodes[node_id]
        if node["env"] is None:
            try:
                env = ray.get(node["env_task"], timeout=timeout)
                env["clock"] = node_clock(node_id)
            except ray.exceptions.RayError as exc:
                env = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            env["ray_node"] = {"node_id": node_id, **node["ray"]}
            node["env"] = env
            (self.store.root / "envs").mkdir(exist_ok=True)
            write_json(self.store.root / "envs" / f"{node['name']}.json", env)
        env_: dict[str, Any] = node["env"]
        return env_

    def _where(self, task: _Task, env_timeout: float = 300.0) -> CellInfo:
        """Where a cell ran, for its cells.jsonl line."""
        out: CellInfo = {
            "executor": "ray",
            "task_attempt": task.attempt,
            "node": task.node,
            "node_id": task.node_id,
            "requested_resources": task.options,
        }
        if task.node_id is not None and task.node_id in self.nodes:
            ray_node = self.nodes[task.node_id]["ray"]
            env = self._env(task.node_id, env_timeout)
            out["node_resources"] = ray_node.get("resources", {})
            out["node_labels"] = ray_node.get("labels", {})
            out["hardware"] = node_hardware(ray_node, env)
        return out

    # -- end --------------------------------------------------------------------------------------
    def _settle(self) -> None:
        """Collect reaped logs and node environments; summarise placement in the manifest."""
        with contextlib.suppress(Exception):
            ready, _ = ray.wait(list(self.reaps), num_returns=len(self.reaps), timeout=30)
            for ref in ready:
                with contextlib.suppress(ray.exceptions.RayError):
                    self._append_log(self.reaps[ref], ray.get(ref), " (recovered after the task was lost)")
        for node_id in self.nodes:
            with contextlib.suppress(Exception):
                self._env(node_id, timeout=60)
        with contextlib.suppress(Exception):
            ray.kill(self.inbox)
        by_arm = hardware_by_arm(self.store)
        classes = {json_key(v) for v in by_arm.values()}
        confounds = []
        if len(classes) > 1 or any(len(v) > 1 for v in by_arm.values()):
            confounds.append(f"arms ran on different hardware: {by_arm}")
            self.job.observe("confound", {"hardware_by_arm": by_arm})
        self.store.update_manifest(
            executor={
                "kind": "ray",
                "ray_version": ray.__version__,
                "address": self.ex.address,
                "resources": self.ex.resources,
                "pinned": self.pin or {},
                "nodes": {n["name"]: {"node_id": i, **n["ray"]} for i, n in self.nodes.items()},
                "cells_per_node": dict(self.cells_per_node),
                "hardware_by_arm": by_arm,
                "confounds": confounds,
                **{k: int(v) for k, v in self.stats.items()},
            }
        )
