"""The seam between the runner and the executors: where a cell's lines go, and what an executor
is handed to make the cells happen.

Neither side imports the other. The runner (:mod:`specbench.run.runner`) serves one cell and writes
what it measures to a :class:`~specbench.store.sink.RecordSink`: the run directory
(:class:`specbench.store.rundir.RunStore`) when the cell runs here, the Ray executor's relay when it
runs on a cluster node. An executor
(:mod:`specbench.executors`) gets the planned cells and a :class:`CellJob`: the rules of the plan
(what is still to do, which arms failed), a function that serves one cell here, and a
:class:`RemoteCell` (a picklable function and its inputs) to serve one somewhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from specbench.engines.base import Engine
from specbench.matrix.config import Cell, Matrix, RequestSpec
from specbench.store.rundir import RecordKey, RunStore
from specbench.store.sink import RecordSink

Observer = Callable[[str, dict[str, Any]], None]  # (event, details) for progress display


class ServeCell(Protocol):
    """Serve ``todo`` of ``cell`` on this machine, writing to ``sink`` (``scratch`` is a local
    run directory for what the runner keeps on disk); ``launched`` is told each engine's pid.
    Returns whether the arm has failed."""

    def __call__(
        self,
        remote: RemoteCell,
        cell: Cell,
        todo: list[RequestSpec],
        fitted: dict[str, Any],
        scratch: RunStore,
        sink: RecordSink,
        observe: Observer,
        launched: Callable[[int], None],
    ) -> bool: ...


@dataclass(frozen=True)
class RemoteCell:
    """What a worker needs to serve a cell: picklable, so it travels in a Ray task's arguments.
    ``serve`` is a module-level function (pickled by reference, imported on the worker)."""

    matrix: Matrix
    engine: Engine
    attach_url: str | None
    serve: ServeCell


class CellJob(Protocol):
    """What an executor is handed besides the cells (the runner is one)."""

    @property
    def store(self) -> RunStore: ...  # the run directory every cell's lines end up in

    @property
    def matrix(self) -> Matrix: ...

    @property
    def observe(self) -> Observer: ...

    @property
    def fitted(self) -> dict[str, Any]: ...  # prompts built to their target length so far

    def todo(self, cell: Cell, done: set[RecordKey]) -> list[RequestSpec]: ...

    def arm_failed(self, arm: str) -> bool: ...

    def next_seq(self) -> int: ...

    def run_cell(self, cell: Cell, todo: list[RequestSpec]) -> None: ...  # serve it here

    def remote(self) -> RemoteCell: ...


class Executor(Protocol):
    """Runs cells. Must skip arms that have failed and requests already completed
    (``job.todo(cell, job.store.completed())``), so ``--resume`` works across executors."""

    kind: str

    def run_cells(self, cells: Sequence[Cell], job: CellJob) -> None: ...
