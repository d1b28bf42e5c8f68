"""The default executor: every cell here, one after another, in the planned (ABBA) order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from specbench.config import RunSpec

if TYPE_CHECKING:
    from specbench.runner import Runner


class LocalExecutor:
    """Serve each cell on this machine in order; skip arms that failed and requests already done."""

    kind = "local"

    def run_cells(self, runner: Runner, cells: Sequence[RunSpec]) -> None:
        for cell in cells:
            if runner.arm_failed(cell.arm):
                continue
            todo = runner.todo(cell, runner.store.completed())
            if todo:
                runner.run_cell(cell, todo)
