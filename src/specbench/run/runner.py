"""Schedule cells, serve each arm, drive its requests and keep every record.

Cells run round by round (one launch of every arm per repeat), the arms of each round in a seeded,
counterbalanced order (:mod:`specbench.run.order`, stored in the manifest's ``order``): forward then
reversed in every pair of rounds, as ABBA, but with no arm — the baseline least of all — keeping a
position or a neighbour of its own. Each cell launches the arm's server (:mod:`specbench.run.launch`)
and drives its warm-ups and requests (:mod:`specbench.run.drive`). Records are appended as they
complete, so Ctrl-C or a crash loses nothing measured and ``--resume`` redoes only what is
missing. A server that crashes mid-cell is restarted once; then the arm is failed.

*Where* cells run is an executor's business (:mod:`specbench.executors`): the default
:class:`~specbench.executors.local.LocalExecutor` runs them here, one after another, in that
order; the Ray executor runs each cell as a task on a cluster node and streams its records back.
Either way the records, cells and manifest land in this run directory with the same schema.
An executor gets the cells and this runner as a :class:`~specbench.executors.base.CellJob`; serving a
cell writes to a :class:`~specbench.executors.base.RecordSink` (the run directory here, a relay on a
Ray worker: :func:`serve_cell`), so executors never import this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specbench.engines.base import Engine
from specbench.engines.process import log_tail
from specbench.errors import EngineStartError
from specbench.executors.base import Executor, Observer, RemoteCell
from specbench.matrix.config import Cell, Matrix, RequestSpec
from specbench.run.drive import CellDriver
from specbench.run.launch import Launcher
from specbench.run.order import RULE, counterbalance
from specbench.run.pace import Pace, cell_tokens
from specbench.run.servedfiles import ServedFiles
from specbench.store.machineprobe import record_machine_probe
from specbench.store.rundir import RunStore, now_iso
from specbench.store.sink import RecordSink

if TYPE_CHECKING:  # run.plan loads the analysis (NumPy); the runner must not
    from specbench.run.plan import Plan

#: An arm's manifest ``failure`` when its engine would not start (exited or never healthy).
START_FAILURE = "start"


@dataclass
class Runner:
    matrix: Matrix
    engine: Engine
    store: RunStore
    cells: list[Cell]
    attach_url: str | None = None
    observe: Observer = field(default=lambda event, info: None)
    executor: Executor | None = None  # None: LocalExecutor (cells here, in order)
    api_key: str | None = None  # sent as a bearer token (--api-key-env); else the arm's --api-key
    relay: RecordSink | None = None  # where a cell's lines go instead of ``store`` (a Ray worker's)
    launched: Callable[[int], None] = field(default=lambda pid: None)  # each engine pid started
    spec_probe: bool = False  # probe per-request speculative settings (tune's screening; specprobe.py)
    served: ServedFiles | None = None  # re-checks each launch's model files (None: attached, remote)
    pace: Pace | None = None  # the plan's pace, checked after the first launch (pace.py)
    plan: Plan | None = None  # what prepare estimated (the CLI prints it; None: built by hand)
    clock: Callable[[], float] = time.monotonic
    _seq: int = 0
    _fitted: dict[str, Any] = field(default_factory=dict)

    # -- plan -------------------------------------------------------------------------------
    def todo(self, cell: Cell, done: set[tuple[str, str, int]]) -> list[RequestSpec]:
        return [r for r in cell.requests if (cell.arm, r.prompt_id, cell.repeat) not in done]

    def total_todo(self) -> int:
        done = self.store.completed()
        return sum(len(self.todo(c, done)) for c in self.cells)

    @property
    def sink(self) -> RecordSink:
        """Where serving a cell writes: the run directory, or the relay that forwards to it."""
        return self.relay if self.relay is not None else self.store

    def arm_failed(self, arm: str) -> bool:
        return bool(self.sink.manifest().get("arms", {}).get(arm, {}).get("status") == "failed")

    def run(self, observe: Observer | None = None) -> None:
        """Serve every cell; ``observe`` (a progress display made for this runner) sees its events."""
        from specbench.executors.local import LocalExecutor

        if observe is not None:
            self.observe = observe
        try:
            self._seq = len(self.store.records())
            self._fitted = self.store.fitted_prompts()
            executor = self.executor or LocalExecutor()
            # An attached run measures the arm it is told to; the tune's race orders its own rounds.
            if self.attach_url is None and not getattr(executor, "own_order", False):
                self._order_cells()
            self._record_theory_inputs(isinstance(executor, LocalExecutor))
            if self.pace is not None:
                self.pace.left = self._tokens_left()
            executor.run_cells(self.cells, self)
            self.store.update_manifest(finished_at=now_iso())
        finally:
            self.store.close()  # fsync the journals, release the directory lock

    def _order_cells(self) -> None:
        """Each round's arms in their counterbalanced order, kept in the manifest (the same for a
        seed and a set of arms, so ``--resume`` continues in the order the run began with)."""
        self.cells, rounds = counterbalance(self.cells, self.matrix.seed)
        self.store.update_manifest(order={"rule": RULE, "seed": self.matrix.seed, "rounds": rounds})

    def _record_theory_inputs(self, local: bool) -> None:
        """Probe this machine for the theory before any engine starts (stored, read back by reports).

        Only when the cells are served here: a cluster's cells run on other machines."""
        if local:
            record_machine_probe(self.store.root)

    def _tokens_left(self) -> int:
        """Output tokens at most of what is left to run, warm-ups included (the pace's unit)."""
        done = self.store.completed()
        return sum(cell_tokens(c, todo, True) for c in self.cells if (todo := self.todo(c, done)))

    # -- state executors share with the runner -----------------------------------------------
    def next_seq(self) -> int:
        """The next record sequence number of this run directory."""
        self._seq += 1
        return self._seq

    @property
    def fitted(self) -> dict[str, Any]:
        """Prompts built to their target length so far (prompt_id → messages, tokens, ...)."""
        return self._fitted

    def remote(self) -> RemoteCell:
        """This run's cell-serving inputs for another machine (the Ray executor's tasks)."""
        return RemoteCell(self.matrix, self.engine, self.attach_url, serve_cell)

    # -- one cell ---------------------------------------------------------------------------
    def run_cell(self, cell: Cell, todo: list[RequestSpec]) -> None:
        """Serve ``cell`` here and run ``todo``: the unit of work every executor hands out."""
        self._run_cell(cell, todo)

    def _run_cell(self, cell: Cell, todo: list[RequestSpec]) -> None:
        self.observe("cell", {"arm": cell.arm, "repeat": cell.repeat, "requests": len(todo)})
        for attempt in range(2):
            files = self._served_files(cell)
            began, tokens = self.clock(), cell_tokens(cell, todo, attempt == 0)
            try:
                server = self._launcher().start(cell)
            except EngineStartError as exc:
                reason = f"engine did not start with {self._loads(cell)}: {exc}"
                self._fail_arm(cell, reason, exc.log_tail, START_FAILURE)
                return
            server.model_files = files  # kept in the cell (drive.py)
            try:
                self._driver().serve(cell, todo, server, attempt)
            finally:
                crashed = not server.alive()
                code = server.process.stop() if server.process else None
                self.sink.redactor.scrub_file(self.sink.log_path(cell.arm))  # engine stopped
            if attempt == 0 and not crashed:
                self._check_pace(self.clock() - began, tokens)
            todo = self.todo(cell, self.sink.completed())
            if not todo or not crashed:
                return  # failed requests on a live server are data, not a reason to restart
            self.observe(  # hung: specbench stopped it, so its exit code is specbench's signal
                "restart", {"arm": cell.arm, "repeat": cell.repeat, "exit_code": code, "hung": server.hung}
            )
        why = "stopped answering" if server.hung else "crashed"
        self._fail_arm(
            cell,
            f"engine {why} twice in repeat {cell.repeat}",
            log_tail(self.sink.log_path(cell.arm)),
            "hang" if server.hung else "crash",
        )

    def _served_files(self, cell: Cell) -> list[dict[str, object]]:
        """The model files this launch serves, re-checked against env.json (servedfiles.py): one
        whose old content a launch measured stops the run (ModelChangedError, exit 5); one never
        measured is adopted into the run's description, and said."""
        if self.served is None:
            return []
        files, changes = self.served.changes(cell.args)
        self.served.adopt(changes)
        for change in changes:
            self.observe("model_changed", {"arm": cell.arm, "text": change.note()})
        return files

    def _check_pace(self, elapsed: float, tokens: int) -> None:
        """After the first launch: a line when the plan's estimate is off by more than 2×."""
        line = self.pace.first_launch(elapsed, tokens) if self.pace is not None else None
        if line:
            self.observe("pace", {"text": line})

    def _launcher(self) -> Launcher:
        """Starting the arm's server (launch.py), or attaching to the one at ``attach_url``."""
        return Launcher(self.matrix, self.engine, self.sink, self.attach_url, self.launched)

    def _driver(self) -> CellDriver:
        """Serving one cell (drive.py), sharing this run's fitted prompts and record numbering."""
        return CellDriver(
            self.matrix, self.engine, self.sink, self._fitted, self.next_seq, self.observe,
            self.attach_url, self.api_key, self.spec_probe,
        )  # fmt: skip

    def _loads(self, cell: Cell) -> str:
        """The model files the arm's engine was given: the engine's own error line often names
        none of them ("tensor data is not within the file bounds"), and the fix is one of them."""
        draft = self.engine.draft_model(list(cell.args))
        return f"model {self.matrix.model}" + (f" and draft {draft}" if draft else "")

    def _fail_arm(self, cell: Cell, reason: str, tail: str, failure: str) -> None:
        """``failure``: how it failed (:data:`START_FAILURE`, "crash", "hang"), kept in the
        manifest: an arm whose engine would not start ends the run with exit 4, not 6."""
        self.sink.set_arm_status(cell.arm, status="failed", error=reason, log_tail=tail, failure=failure)
        self.observe("failed", {"arm": cell.arm, "reason": reason, "log_tail": tail})


def serve_cell(
    remote: RemoteCell,
    cell: Cell,
    todo: list[RequestSpec],
    fitted: dict[str, Any],
    scratch: RunStore,
    sink: RecordSink,
    observe: Observer,
    launched: Callable[[int], None],
) -> bool:
    """Serve one cell on this machine for an executor elsewhere (it is the executors'
    :class:`~specbench.executors.base.ServeCell`): every line goes to ``sink``; returns whether
    the arm has failed."""
    runner = Runner(
        matrix=remote.matrix,
        engine=remote.engine,
        store=scratch,
        cells=[cell],
        attach_url=remote.attach_url,
        observe=observe,
        relay=sink,
        launched=launched,
    )
    runner.fitted.update(fitted)
    runner.run_cell(cell, todo)
    return runner.arm_failed(cell.arm)
