"""Run a matrix's cells on a Ray cluster: one Ray task per (arm, repeat) cell.

Each task asks for the arm's resources (``num_cpus``, ``num_gpus``, ``memory`` and custom ones
such as ``accelerator_type:H100``), launches the engine on the node Ray picks, runs the cell's
requests with the same code as a local run (the job's :class:`~specbench.executors.base.RemoteCell`)
and sends every record, cell summary, /metrics scrape, arm status and the engine log to the
driver as it goes.
The driver — the process that called ``specbench run`` — appends them to the one run directory,
so the layout and the record schema are those of a local run, plus where things ran:

* every record and cell line carries ``node`` (``<host>-<node id prefix>``) and ``task_attempt``;
  cell lines also carry the node's Ray resources and labels, the resources the task asked for
  and a ``hardware`` summary (accelerator labels, GPU names, CPU) so checks can see arms that
  ran on different hardware;
* ``envs/<node>.json`` holds each node's :func:`specbench.store.rundir.environment`, engine version,
  model SHA-256 and the offset of its clock from the driver's.

Exactly once: the driver drops a measured record whose (arm, prompt_id, repeat) already has a
successful record (resume keys, :meth:`specbench.store.rundir.RunStore.completed`). A task lost with its
worker or node (``WorkerCrashedError``, ``NodeDiedError``, ``RayActorError``, OOM kill, ...) is
resubmitted — Ray places it on any node with the resources, the dead one excluded — with only the
requests that have no record yet; records already written stay. Its orphaned engine is killed by
a clean-up task on that node when the node is still there.

The code follows the data: :mod:`~specbench.executors._ray_resources` plans what each cell asks
Ray for, :mod:`~specbench.executors._ray_driver` submits the cells and appends what they send,
:mod:`~specbench.executors._ray_cell` is the worker's side (the cell task and its relay sink)
and :mod:`~specbench.executors._ray_common` holds what they share with the distributed load
generator (:mod:`specbench.executors.ray_load`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import ray  # type: ignore[import-not-found, unused-ignore]

from specbench.executors._ray_cell import RemoteObserver
from specbench.executors._ray_driver import Driver
from specbench.executors._ray_resources import (
    SLOT,
    TASK_OPTIONS,
    exclusive_request,
    hardware_by_arm,
    json_key,
    task_options,
)
from specbench.executors.base import CellJob
from specbench.matrix.config import Cell

__all__ = [
    "SLOT",
    "TASK_OPTIONS",
    "RayExecutor",
    "RemoteObserver",
    "distributed_load",
    "exclusive_request",
    "hardware_by_arm",
    "json_key",
    "task_options",
]


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

    def run_cells(self, cells: Sequence[Cell], job: CellJob) -> None:
        started = not ray.is_initialized()
        if started:
            options = dict(self.init_options)
            if self.address is None and not os.environ.get("RAY_ADDRESS"):
                options.setdefault("resources", {SLOT: 1})  # a throwaway local Ray: one cell at a time
            ray.init(address=self.address, runtime_env=self.runtime_env, **options)
        self.exclusive = exclusive_request()
        try:
            Driver(self, job, list(cells)).run()
        finally:
            if started:
                ray.shutdown()


def distributed_load(*args: Any, **kwargs: Any) -> Any:
    """See :func:`specbench.executors.ray_load.distributed_load`."""
    from specbench.executors.ray_load import distributed_load as load

    return load(*args, **kwargs)
