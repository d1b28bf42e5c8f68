"""The seam between the runner and the executors: where a cell's lines go, and what an executor
is handed to make the cells happen.

Neither side imports the other. The runner (:mod:`specbench.runner`) serves one cell and writes
what it measures to a :class:`RecordSink`: the run directory (:class:`specbench.store.RunStore`)
when the cell runs here, the Ray executor's relay when it runs on a cluster node. An executor
(:mod:`specbench.executors`) gets the planned cells and a :class:`CellJob`: the rules of the plan
(what is still to do, which arms failed), a function that serves one cell here, and a
:class:`RemoteCell` (a picklable function and its inputs) to serve one somewhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from specbench.config import Matrix, RequestSpec, RunSpec
from specbench.engines.base import Engine
from specbench.redact import Redactor
from specbench.schema import CellInfo, RequestRecord
from specbench.store import RecordKey, RunStore

Observer = Callable[[str, dict[str, Any]], None]  # (event, details) for progress display


class RecordSink(Protocol):
    """Everything serving a cell writes, and the little it reads back (its arm's status, what
    is already measured, the engine log it streams into)."""

    #: True when :meth:`append_records` may be called from a writer thread (recordwriter.py);
    #: False keeps every append on the caller's thread, in order.
    batches: bool

    @property
    def root(self) -> Path: ...  # folder for files a cell leaves beside its lines (arrival schedules)

    @property
    def redactor(self) -> Redactor: ...

    def manifest(self) -> dict[str, Any]: ...

    def set_arm_status(self, arm: str, **fields: Any) -> None: ...

    def append_record(self, record: RequestRecord) -> None: ...

    def append_records(self, records: list[RequestRecord]) -> None: ...

    def append_lines(self, lines: list[str]) -> None: ...  # records serialized by schema.record_line

    def append_cell(self, cell: CellInfo) -> None: ...

    def completed(self) -> set[RecordKey]: ...

    def log_path(self, arm: str) -> Path: ...

    def save_scrape(self, arm: str, repeat: int, when: str, text: str) -> str: ...

    def save_fitted_prompts(self, fitted: dict[str, Any]) -> None: ...

    def sync(self) -> None: ...


class ServeCell(Protocol):
    """Serve ``todo`` of ``cell`` on this machine, writing to ``sink`` (``scratch`` is a local
    run directory for what the runner keeps on disk); ``launched`` is told each engine's pid.
    Returns whether the arm has failed."""

    def __call__(
        self,
        remote: RemoteCell,
        cell: RunSpec,
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

    def todo(self, cell: RunSpec, done: set[RecordKey]) -> list[RequestSpec]: ...

    def arm_failed(self, arm: str) -> bool: ...

    def next_seq(self) -> int: ...

    def run_cell(self, cell: RunSpec, todo: list[RequestSpec]) -> None: ...  # serve it here

    def remote(self) -> RemoteCell: ...


class Executor(Protocol):
    """Runs cells. Must skip arms that have failed and requests already completed
    (``job.todo(cell, job.store.completed())``), so ``--resume`` works across executors."""

    kind: str

    def run_cells(self, cells: Sequence[RunSpec], job: CellJob) -> None: ...
