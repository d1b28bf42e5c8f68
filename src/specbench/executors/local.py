"""The default executor: every cell here, one after another, in the planned (ABBA) order."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.executors.base import CellJob
from specbench.matrix.config import Cell


class LocalExecutor:
    """Serve each cell on this machine in order; skip arms that failed and requests already done."""

    kind = "local"

    def run_cells(self, cells: Sequence[Cell], job: CellJob) -> None:
        for cell in cells:
            if job.arm_failed(cell.arm):
                continue
            todo = job.todo(cell, job.store.completed())
            if todo:
                job.run_cell(cell, todo)
