"""Run a matrix's cells on a Ray cluster: one Ray task per (arm, repeat) cell.

Each task asks for the arm's resources (``num_cpus``, ``num_gpus``, ``memory`` and custom ones
such as ``accelerator_type:H100``), launches the engine on the node Ray picks, runs the cell's
requests with the same code as a local run (:class:`specbench.runner.Runner`) and sends every
record, cell summary, /metrics scrape, arm status and the engine log to the driver as it goes.
The driver — the process that called ``specbench run`` — appends them to the one run directory,
so the layout and the record schema are those of a local run, plus where things ran:

* every record and cell line carries ``node`` (``<host>-<node id prefix>``) and ``task_attempt``;
  cell lines also carry the node's Ray resources and labels, the resources the task asked for
  and a ``hardware`` summary (accelerator labels, GPU names, CPU) so checks can see arms that
  ran on different hardware;
* ``envs/<node>.json`` holds each node's :func:`specbench.store.environment`, engine version,
  model SHA-256 and the offset of its clock from the driver's.

Exactly once: the driver drops a measured record whose (arm, prompt_id, repeat) already has a
successful record (resume keys, :meth:`specbench.store.RunStore.completed`). A task lost with its
worker or node (``WorkerCrashedError``, ``NodeDiedError``, ``RayActorError``, OOM kill, ...) is
resubmitted — Ray places it on any node with the resources, the dead one excluded — with only the
requests that have no record yet; records already written stay. Its orphaned engine is killed by
a clean-up task on that node when the node is still there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import ray  # type: ignore[import-not-found, unused-ignore]

from specbench.config import Matrix, RunSpec
from specbench.engines.base import Engine
from specbench.executors._ray_common import (
    Relay,
    hardware_labels,
    here,
    node_clock,
    node_name,
    node_table,
    pinned,
    start_inbox,
)
from specbench.runner import Runner, Server
from specbench.store import RecordKey, RunStore, _write_json, environment, file_sha256, now_iso

RemoteObserver = Callable[[str, dict[str, Any]], None]
TASK_OPTIONS = ("num_cpus", "num_gpus", "memory")
SLOT = "specbench_slot"  # custom resource, 1 per node: a cell holds its node alone


# == the worker's side ============================================================================
class _RelayStore(RunStore):
    """A cell's run directory on the worker: a scratch folder (the engine log, and a manifest the
    runner reads the arm status back from) whose every write also goes to the driver."""

    def __init__(self, root: Path, relay: Relay, done: set[RecordKey]) -> None:
        super().__init__(root)
        self.relay = relay
        self.done = set(done)

    def set_arm_status(self, arm: str, **fields: Any) -> None:
        super().set_arm_status(arm, **fields)
        self.relay.send("arm_status", arm=arm, fields=fields)

    def append_record(self, record: dict[str, Any]) -> None:
        self.relay.send("record", record=record)
        if not record.get("warmup") and record.get("error") is None:
            self.done.add((record["arm"], record["prompt_id"], record["repeat"]))

    def append_cell(self, cell: dict[str, Any]) -> None:
        self.relay.send("cell", info=cell)

    def records(self) -> list[dict[str, Any]]:
        return []

    def completed(self) -> set[RecordKey]:
        return set(self.done)

    def save_scrape(self, arm: str, repeat: int, when: str, text: str) -> str:
        name = super().save_scrape(arm, repeat, when, text)
        self.relay.send("scrape", name=name, text=text)
        return name

    def save_fitted_prompts(self, fitted: dict[str, Any]) -> None:
        self.relay.send("fitted", fitted=fitted)


class _RemoteRunner(Runner):
    """A runner that also tells the driver each engine it starts, so an orphan can be reaped."""

    def _launch(self, cell: RunSpec) -> Server:
        server = super()._launch(cell)
        pid = server.process.pid if server.process else None
        if pid is not None and isinstance(self.store, _RelayStore):
            self.store.relay.send("server", pid=pid, create_time=psutil.Process(pid).create_time())
        return server


def _run_cell_remote(job: dict[str, Any], inbox: Any) -> dict[str, Any]:
    """The Ray task: serve one cell on this node, relaying everything to the driver."""
    cell: RunSpec = job["cell"]
    relay = Relay(inbox, job["tag"])
    scratch = Path(tempfile.mkdtemp(prefix="specbench-cell-"))
    relay.send("start", node=here(), scratch=str(scratch), wall=time.time())
    store = _RelayStore(scratch, relay, job["done"])
    store.create({"scratch_for": job["tag"]}, resume=False)
    hook: RemoteObserver | None = job["remote_observer"]

    def observe(event: str, info: dict[str, Any]) -> None:
        if event != "request":  # the driver counts requests as it stores them
            relay.send("observe", event=event, info=info)
        if hook is not None:
            hook(event, info)

    runner = _RemoteRunner(
        matrix=job["matrix"],
        engine=job["engine"],
        store=store,
        cells=[cell],
        attach_url=job["attach_url"],
        observe=observe,
    )
    runner.fitted.update(job["fitted"])
    try:
        runner.run_cell(cell, job["todo"])
        return {"failed": runner.arm_failed(cell.arm)}
    finally:
        log = store.log_path(cell.arm)
        with contextlib.suppress(Exception):
            relay.send("log", text=log.read_text(errors="replace") if log.is_file() else "")
        shutil.rmtree(scratch, ignore_errors=True)


def _probe_node(engine: Engine, model: str | None) -> dict[str, Any]:
    """This node's environment, engine version and model checksum (as env.json, per node)."""
    env: dict[str, Any] = {**environment(), "node": here()}
    try:
        env["engine"] = {"kind": engine.kind, **engine.version()}
    except Exception as exc:  # a missing binary is the cell's error to report, not the probe's
        env["engine"] = {"kind": engine.kind, "error": f"{type(exc).__name__}: {exc}"}
    if model and os.path.isfile(model):
        env["model"] = {"path": model, "sha256": file_sha256(Path(model)), "bytes": os.path.getsize(model)}
    elif model:
        env["model"] = {"path": model, "error": "not a file on this node"}
    return env


def _reap(servers: list[tuple[int, float]], scratch: str | None) -> str:
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


# == the driver's side ============================================================================
@dataclass
class _Task:
    cell: RunSpec
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


class RayExecutor:
    """Cells as Ray tasks; records streamed back and appended here, exactly once.

    ``address``: passed to ``ray.init`` when Ray is not initialised yet (``"auto"``: the cluster
    started with ``ray start``; None: ``RAY_ADDRESS`` or a local one); a Ray this executor
    started it also shuts down. ``resources``: per arm name, ``"*"`` for every arm, e.g.
    ``{"*": {"num_gpus": 1, "accelerator_type:H100": 0.001}}``; keys other than ``num_cpus``,
    ``num_gpus`` and ``memory`` are custom resources (default ``{"num_cpus": 1}``).
    ``same_hardware``: when no arm names an ``accelerator_type:`` resource, the first cell runs
    alone and every later cell asks for the accelerator type of the node it ran on, so arms
    are compared on one GPU model. ``max_in_flight``: cells running at once (None: as many as
    the cluster's resources allow; 1 keeps the planned ABBA order strictly). ``max_retries``:
    resubmissions of a cell whose worker or node was lost before the arm is failed.
    ``remote_observer``: called on the worker with the runner's events (for tests and logging).
    """

    kind = "ray"

    def __init__(
        self,
        address: str | None = None,
        resources: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        max_retries: int = 2,
        max_in_flight: int | None = None,
        same_hardware: bool = True,
        hash_models: bool = True,
        runtime_env: dict[str, Any] | None = None,
        init_options: dict[str, Any] | None = None,
        remote_observer: RemoteObserver | None = None,
        poll_s: float = 0.2,
    ) -> None:
        self.address = address
        self.resources = {k: dict(v) for k, v in (resources or {}).items()}
        self.max_retries = max_retries
        self.max_in_flight = max_in_flight
        self.same_hardware = same_hardware
        self.hash_models = hash_models
        self.runtime_env = runtime_env
        self.init_options = dict(init_options or {})
        self.remote_observer = remote_observer
        self.poll_s = poll_s

    def requested(self, arm: str) -> dict[str, Any]:
        """The arm's resource request, flat: ``{"specbench_slot": 1, "accelerator_type:H100": 0.001}``.

        By default a cell holds its node alone (:func:`exclusive_request`): two cells sharing a
        node's cores or memory bandwidth would measure each other, not their arms."""
        base = getattr(self, "exclusive", {"num_cpus": 1})
        return {**base, **self.resources.get("*", {}), **self.resources.get(arm, {})}

    def run_cells(self, runner: Runner, cells: Sequence[RunSpec]) -> None:
        started = not ray.is_initialized()
        if started:
            options = dict(self.init_options)
            if self.address is None and not os.environ.get("RAY_ADDRESS"):
                options.setdefault("resources", {SLOT: 1})  # a throwaway local Ray: one cell at a time
            ray.init(address=self.address, runtime_env=self.runtime_env, **options)
        self.exclusive = exclusive_request()
        try:
            _Driver(self, runner, list(cells)).run()
        finally:
            if started:
                ray.shutdown()


def exclusive_request() -> dict[str, Any]:
    """One cell per node: the ``specbench_slot`` resource (``ray start --resources
    '{"specbench_slot": 1}'`` on every node) when the cluster has it, else every CPU of the
    smallest node."""
    if SLOT in ray.cluster_resources():  # type: ignore[no-untyped-call, unused-ignore]
        return {SLOT: 1}
    nodes = ray.nodes()  # type: ignore[no-untyped-call, unused-ignore]
    cpus = [n["Resources"].get("CPU", 1) for n in nodes if n.get("Alive")]
    return {"num_cpus": min(cpus) if cpus else 1}


def task_options(request: Mapping[str, Any]) -> dict[str, Any]:
    """A flat resource request → ``.options()`` keywords (custom names under ``resources``)."""
    opts: dict[str, Any] = {}
    custom: dict[str, float] = {}
    for key, value in request.items():
        if key in TASK_OPTIONS:
            opts[key] = value
        elif key == "resources" and isinstance(value, Mapping):
            custom.update({str(k): float(v) for k, v in value.items()})
        else:
            custom[key] = float(value)
    if custom:
        opts["resources"] = custom
    return opts


class _Driver:
    """One ``run_cells`` call: submits tasks, drains the inbox into the store, retries lost ones."""

    def __init__(self, ex: RayExecutor, runner: Runner, cells: list[RunSpec]) -> None:
        self.ex = ex
        self.runner = runner
        self.store = runner.store
        self.matrix: Matrix = runner.matrix
        self.seen: set[RecordKey] = self.store.completed()
        self.waiting: deque[_Task] = deque(_Task(cell, 0) for cell in cells)
        self.pending: dict[Any, _Task] = {}
        self.tasks: dict[str, _Task] = {}
        self.first: _Task | None = None
        self.needs_fit = any(
            r.target_tokens and r.prompt_id not in runner.fitted for c in cells for r in c.requests
        )
        self.pin: dict[str, float] | None = None if self._may_pin() else {}
        self.nodes: dict[str, dict[str, Any]] = {}  # node id → name, Ray description, probe, env
        self.cells_per_node: Counter[str] = Counter()
        self.reaps: dict[Any, _Task] = {}
        self.stats: Counter[str] = Counter()
        self.inbox = start_inbox()
        self.table = node_table()

    def _may_pin(self) -> bool:
        asked = {k for v in self.ex.resources.values() for k in v}
        return self.ex.same_hardware and not any(k.startswith("accelerator_type:") for k in asked)

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
            todo = self.runner.todo(cell, self.seen)
            if self.runner.arm_failed(cell.arm) or not todo:
                continue
            request = self.ex.requested(cell.arm)
            if self.pin and not any(k.startswith("accelerator_type:") for k in request):
                request.update(self.pin)
            task.options = request
            job = {
                "tag": task.tag,
                "cell": cell,
                "todo": todo,
                "done": {k for k in self.seen if k[0] == cell.arm and k[2] == cell.repeat},
                "matrix": self.matrix,
                "engine": self.runner.engine,
                "attach_url": self.runner.attach_url,
                "fitted": dict(self.runner.fitted),
                "remote_observer": self.ex.remote_observer,
            }
            remote = ray.remote(_run_cell_remote).options(
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
        self.runner.observe(
            "cell_done", {"arm": task.cell.arm, "repeat": task.cell.repeat, "node": task.node}
        )

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
            reap = ray.remote(_reap).options(
                num_cpus=0, max_retries=0, scheduling_strategy=pinned(task.node_id)
            )
            self.reaps[reap.remote(task.servers, task.scratch)] = task
        if task is self.first:
            self.first = None  # its retry goes first again (fitting, hardware pinning)
        info = {"arm": cell.arm, "repeat": cell.repeat, "node": task.node, "error": error}
        if task.attempt < self.ex.max_retries:
            self.stats["retried"] += 1
            self.runner.observe("retry", {**info, "task_attempt": task.attempt + 1})
            self.waiting.appendleft(_Task(cell, task.attempt + 1))
        else:
            reason = f"cell lost {task.attempt + 1} times in repeat {cell.repeat}: {error}"
            self.store.set_arm_status(cell.arm, status="failed", error=reason, log_tail="")
            self.runner.observe("failed", {"arm": cell.arm, "reason": reason, "log_tail": ""})

    def _abort(self) -> None:
        """Ctrl-C or an error: cancel running cells (their engines stop), keep what they sent."""
        with contextlib.suppress(Exception):
            for ref in self.pending:
                ray.cancel(ref)
            ray.wait(list(self.pending), num_returns=len(self.pending), timeout=30)
            self._drain()
            for task in self.pending.values():
                if task.node_id and task.servers:
                    reap = ray.remote(_reap).options(num_cpus=0, scheduling_strategy=pinned(task.node_id))
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
            self.pin = {k: 0.001 for k in ray_node["resources"] if k.startswith("accelerator_type:")}

    def _on_server(self, task: _Task, msg: dict[str, Any]) -> None:
        task.servers.append((int(msg["pid"]), float(msg["create_time"])))

    def _on_arm_status(self, task: _Task, msg: dict[str, Any]) -> None:
        fields = dict(msg["fields"])
        if fields.get("status") == "ok" and self.runner.arm_failed(msg["arm"]):
            del fields["status"]  # another cell failed the arm: one cell's success does not undo it
        if fields:
            self.store.set_arm_status(msg["arm"], **fields)

    def _on_record(self, task: _Task, msg: dict[str, Any]) -> None:
        rec: dict[str, Any] = msg["record"]
        key = (rec["arm"], rec["prompt_id"], rec["repeat"])
        measured_ok = not rec.get("warmup") and rec.get("error") is None
        if measured_ok and key in self.seen:
            self.stats["duplicates_dropped"] += 1
            return
        rec.update(seq=self.runner.next_seq(), node=task.node, task_attempt=task.attempt)
        self.store.append_record(rec)
        if measured_ok:
            self.seen.add(key)
        info = {"arm": rec["arm"], "warmup": rec.get("warmup"), "error": rec.get("error"), "node": task.node}
        self.runner.observe("request", info)

    def _on_cell(self, task: _Task, msg: dict[str, Any]) -> None:
        self.store.append_cell({**msg["info"], **self._where(task)})

    def _on_scrape(self, task: _Task, msg: dict[str, Any]) -> None:
        path = self.store.root / "metrics" / Path(msg["name"]).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(msg["text"])

    def _on_fitted(self, task: _Task, msg: dict[str, Any]) -> None:
        for prompt_id, fitted in msg["fitted"].items():
            self.runner.fitted.setdefault(prompt_id, fitted)  # the first fit wins: one set of prompts
        self.store.save_fitted_prompts(self.runner.fitted)

    def _on_observe(self, task: _Task, msg: dict[str, Any]) -> None:
        info = {**msg["info"], "node": task.node, "task_attempt": task.attempt}
        if msg["event"] == "cell":
            info["node_cells"] = self.cells_per_node[task.node or ""]
        self.runner.observe(msg["event"], info)

    def _on_log(self, task: _Task, msg: dict[str, Any]) -> None:
        self._append_log(task, msg["text"], "")

    def _append_log(self, task: _Task, text: str, note: str) -> None:
        if not text:
            return
        log = self.store.log_path(task.cell.arm)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as fh:
            fh.write(f"\n===== specbench: ray task {task.tag} on node {task.node}{note}\n{text}")

    # -- nodes ------------------------------------------------------------------------------------
    def _see_node(self, node: dict[str, Any]) -> str:
        node_id = node["node_id"]
        if node_id not in self.nodes:
            if node_id not in self.table:
                self.table = node_table()
            model = self.matrix.model if self.ex.hash_models and self.matrix.engine == "llamacpp" else None
            probe = ray.remote(_probe_node).options(num_cpus=0, scheduling_strategy=pinned(node_id))
            self.nodes[node_id] = {
                "name": node_name(node["host"], node_id),
                "ray": self.table.get(node_id, {"resources": {}, "labels": {}}),
                "probe": probe.remote(self.runner.engine, model),
                "env": None,
            }
        return str(self.nodes[node_id]["name"])

    def _env(self, node_id: str, timeout: float = 300.0) -> dict[str, Any]:
        """The node's environment, written to ``envs/<node>.json`` the first time it is needed."""
        node = self.nodes[node_id]
        if node["env"] is None:
            try:
                env = ray.get(node["probe"], timeout=timeout)
                env["clock"] = node_clock(node_id)
            except ray.exceptions.RayError as exc:
                env = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            env["ray_node"] = {"node_id": node_id, **node["ray"]}
            node["env"] = env
            (self.store.root / "envs").mkdir(exist_ok=True)
            _write_json(self.store.root / "envs" / f"{node['name']}.json", env)
        env_: dict[str, Any] = node["env"]
        return env_

    def _where(self, task: _Task, env_timeout: float = 300.0) -> dict[str, Any]:
        """Where a cell ran, for its cells.jsonl line."""
        out: dict[str, Any] = {
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
            out["hardware"] = _hardware(ray_node, env)
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
            self.runner.observe("confound", {"hardware_by_arm": by_arm})
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


def _hardware(ray_node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    return {
        "labels": hardware_labels(ray_node.get("resources", {}), ray_node.get("labels", {})),
        "gpus": sorted(g.get("name", "") for g in env.get("gpus") or []),
        "cpu": env.get("cpu"),
    }


def json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def hardware_by_arm(store: RunStore) -> dict[str, list[dict[str, Any]]]:
    """The distinct hardware each arm's cells ran on (cells without a ``hardware`` field ran
    locally, on the machine env.json describes)."""
    local = store.env()
    local_hw = {"labels": [], "gpus": sorted(g.get("name", "") for g in local.get("gpus") or []),
                "cpu": local.get("cpu")}  # fmt: skip
    seen: dict[str, dict[str, dict[str, Any]]] = {}
    for cell in store.cells():
        if cell.get("lost"):
            continue
        hw = cell.get("hardware") or local_hw
        seen.setdefault(cell["arm"], {})[json_key(hw)] = hw
    return {arm: list(v.values()) for arm, v in seen.items()}


def distributed_load(*args: Any, **kwargs: Any) -> Any:
    """See :func:`specbench.executors.ray_load.distributed_load`."""
    from specbench.executors.ray_load import distributed_load as load

    return load(*args, **kwargs)
