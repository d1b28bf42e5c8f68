"""What serving a cell writes into: the run directory (:class:`~specbench.store.rundir.RunStore`)
here, or a relay to it from a worker elsewhere (a Ray executor's node).

A protocol, so the runner, the cell driver, the record writer and the executors depend on this
small interface rather than on one another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from specbench.store.redact import Redactor
from specbench.store.rundir import RecordKey
from specbench.store.schema import CellInfo, RequestRecord


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
