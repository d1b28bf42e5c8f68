"""A runner with the executor seam and no engine: cells recorded instead of served."""

from __future__ import annotations

from pathlib import Path

from specbench.engines.llamacpp import LlamaCppEngine
from specbench.matrix.config import Cell, Matrix, RequestSpec, plan_cells
from specbench.run.runner import Runner
from specbench.store.rundir import RunStore


def _requests(n: int = 3) -> tuple[RequestSpec, ...]:
    return tuple(
        RequestSpec(
            prompt_id=f"p{i}",
            category="chat",
            messages=({"role": "user", "content": "hi"},),
            max_tokens=4,
            temperature=0.0,
            seed=0,
        )
        for i in range(n)
    )


class RecordingRunner(Runner):
    """Records the cells it is asked to serve instead of launching anything."""

    served: list[tuple[str, int, list[str]]]

    def run_cell(self, cell: Cell, todo: list[RequestSpec]) -> None:
        self.served.append((cell.arm, cell.repeat, [r.prompt_id for r in todo]))


def make_runner(tmp_path: Path, cls: type[Runner] = Runner) -> Runner:
    matrix = Matrix(model="m.gguf", arms={"baseline": (), "draft": ("-md", "d.gguf"), "other": ()}, repeats=2)
    store = RunStore(tmp_path / "run")
    store.create({"matrix": matrix.model_dump(mode="json")}, resume=False)
    cells = plan_cells(matrix, _requests(), (), 1)
    runner = cls(matrix=matrix, engine=LlamaCppEngine(Path("llama-server")), store=store, cells=cells)
    if isinstance(runner, RecordingRunner):
        runner.served = []
    return runner
