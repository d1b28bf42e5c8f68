"""``specbench tune MATRIX --out DIR``: the race of :mod:`specbench.tune.race` on real engines.

DIR holds ``tune.json`` (the search space, every candidate, when and why each was dropped,
predicted vs measured, the answer) and one ordinary run directory per workload (DIR/<workload>),
whose arms are the baseline and the candidates and whose repeats are the race's rounds — so
``report``, ``compare``, ``summary`` and ``merge`` work on it as on any run. ``--resume`` reads
tune.json and the records and goes on where the tune stopped.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from specbench.analysis import stats
from specbench.analysis.launches import MIN_LAUNCHES
from specbench.analysis.launchorder import ordered_frame
from specbench.engines import DEFAULT_ENGINE, ENGINES
from specbench.engines.tuning import candidate_args
from specbench.errors import ConfigError, StoreError
from specbench.executors.local import LocalExecutor
from specbench.matrix.config import Cell, Matrix, WorkloadSpec
from specbench.matrix.files import matrix_path, resolve_matrix_files
from specbench.matrix.load import load_matrix
from specbench.matrix.names import check_arm_name
from specbench.matrix.tuneblock import Candidate, TuneSpec
from specbench.run.prepare import RunOptions, prepare
from specbench.store.redact import mask_args
from specbench.store.rundir import RunStore, now_iso
from specbench.store.safeio import write_atomic
from specbench.theory.formulas import leviathan_speedup
from specbench.tune.race import RaceState, TuneAnswer, initial_state, race, tune_answer, unmeasured
from specbench.tune.screen import screens
from specbench.tune.screenrun import screen_from_run, screen_lines, start_screening, theory_errors

if TYPE_CHECKING:
    from specbench.executors.base import CellJob, Observer
    from specbench.run.runner import Runner

SERVE_PORT = 8080  # the port printed in the command to serve the winner


@dataclass(frozen=True)
class WorkloadResult:
    workload: str
    run_dir: Path
    state: RaceState
    answer: TuneAnswer
    command: list[str]  # the engine command line to serve: the winner's, or the baseline's when none wins
    best_command: list[str] = field(default_factory=list)  # the best candidate's, winner or not


class _Measure:
    """Rounds of the race as cells of a run directory (the runner serves and records them)."""

    def __init__(self, runner: Runner, template: Cell) -> None:
        self.runner, self.template = runner, template

    def run_round(self, round_no: int, arms: list[str]) -> None:
        for arm in arms:
            if self.runner.arm_failed(arm):
                continue
            # The runner's matrix, read now: refinement replaces it with one that has the new arms.
            args = tuple(self.runner.matrix.arm_args(arm))
            cell = self.template.model_copy(update={"arm": arm, "repeat": round_no, "args": args})
            todo = self.runner.todo(cell, self.runner.store.completed())
            if todo:
                self.runner.run_cell(cell, todo)

    def compare(self, arm: str, other: str, confidence: float) -> stats.Comparison | None:
        store = self.runner.store  # who ran first in each round: from the cells' start times
        df = ordered_frame(store.records(), store.manifest(), store.cells())
        c = stats.speedup(df, arm, other, "decode_tok_s", confidence=confidence)
        return None if c.too_few else c  # too few values on a side: not measured yet, not a NaN ratio

    def spent(self) -> tuple[int, int]:
        # Every served cell is a launch (restarts included); warm-ups are requests too.
        return len(self.runner.store.cells()), len(self.runner.store.records())

    def failed(self, arm: str) -> str | None:
        entry = self.runner.store.manifest().get("arms", {}).get(arm, {})
        return str(entry.get("error", "failed")) if entry.get("status") == "failed" else None


class _TuneExecutor(LocalExecutor):
    """Runs the race instead of the planned cells (a LocalExecutor, so the machine is probed)."""

    own_order = True  # the race orders its own launches: the runner's counterbalanced order is not used

    def __init__(
        self, spec: TuneSpec, state: RaceState, save: Callable[[RaceState], None], say: Callable[[str], None]
    ) -> None:
        self.spec, self.state, self.save, self.say = spec, state, save, say

    def run_cells(self, cells: Sequence[Cell], job: CellJob) -> None:
        runner = cast("Runner", job)  # installed only on the tune's own Runner (run_tune)
        measure = _Measure(runner, cells[0])
        prompts = len(cells[0].requests) + len(cells[0].warmup)
        store = runner.store
        screen = screen_from_run(self.spec, store.records, store.cells, runner.matrix.model, self.say)
        save, alpha = self._save(runner), runner.matrix.alpha
        self.state = race(self.spec, self.state, measure, prompts, save, self.say, screen, alpha)

    def _save(self, runner: Runner) -> Callable[[RaceState], None]:
        def save(state: RaceState) -> None:
            _sync_arms(runner, self.spec, state)
            self.save(state)

        return save


def _sync_arms(runner: Runner, spec: TuneSpec, state: RaceState) -> None:
    """Refinement adds arms: the runner's matrix, the manifest and matrix.yaml learn them, so
    every other command reads the run directory as a run of exactly these arms."""
    arms = _arms(runner.matrix, state)
    if arms == dict(runner.matrix.arms):
        return
    runner.matrix = runner.matrix.model_copy(update={"arms": arms})
    runner.store.update_manifest(matrix=runner.matrix.model_dump(mode="json"))
    runner.store.write_text("matrix.yaml", _yaml(runner.matrix))  # scrubbed; a full disk is exit 5


def _align_arms(run_dir: Path, state: RaceState) -> None:
    """An interrupt between saving tune.json and the manifest can leave them one refinement
    apart; the candidates are tune's own, so the manifest takes tune.json's (every other matrix
    field is still checked by --resume)."""
    store = RunStore(run_dir)
    matrix = dict(store.manifest().get("matrix") or {})
    arms = matrix.get("arms") or {}
    names = {state.baseline, *(e.name for e in state.entries)}
    if arms and set(arms) != names:
        engine = str(matrix.get("engine", DEFAULT_ENGINE))
        base = {state.baseline: arms.get(state.baseline, [])}
        new = {**base, **{e.name: list(candidate_args(engine, e.values)) for e in state.entries}}
        store.update_manifest(matrix={**matrix, "arms": new})


def _arms(matrix: Matrix, state: RaceState) -> dict[str, tuple[str, ...]]:
    engine = matrix.engine
    base = {state.baseline: matrix.arms[state.baseline]}
    return {**base, **{e.name: candidate_args(engine, e.values) for e in state.entries}}


def _data(matrix: Matrix) -> dict[str, Any]:
    return matrix.model_dump(mode="json", exclude={"tune", "adaptive"}, exclude_none=True)


def _yaml(matrix: Matrix) -> str:
    return yaml.safe_dump(_data(matrix), sort_keys=False)


def load_tune(matrix_path: Path) -> tuple[Matrix, TuneSpec]:
    """The matrix and its tune block, draft model paths resolved against the matrix file."""
    matrix = load_matrix(matrix_path)
    if matrix.tune is None:
        raise ConfigError(f"{matrix_path}: tune: no tune block (see docs/tune.md)")
    spec = matrix.tune
    if "draft_model" in spec.dimensions:
        models = [_draft_path(matrix_path.parent, str(v)) for v in spec.values("draft_model")]
        spec = spec.model_copy(update={"dimensions": {**spec.dimensions, "draft_model": models}})
    for c in spec.grid():
        candidate_args(matrix.engine, c)  # every candidate spellable before anything launches
    for name in spec.workloads:
        try:
            check_arm_name(name)
        except ValueError as exc:
            raise ConfigError(f"{matrix_path}: tune.workloads.{name}: {exc}") from None
    return matrix, spec


def _draft_path(base: Path, value: str) -> str:
    path = matrix_path(base, value)
    if not path.is_file():
        raise ConfigError(f"tune.dimensions.draft_model: model file {path} does not exist")
    return str(path.resolve())


def predictor(matrix: Matrix, spec: TuneSpec) -> Callable[[Candidate], float | None]:
    """The theory's speedup for a draft-model candidate: Leviathan et al.'s τ/(K·c + 1) with α
    from tune.acceptance (or the lab pair's designed α) and the draft's cost ratio c taken as its
    share of the target's weight bytes (decode reads every weight once per token). Other methods:
    None (their acceptance depends on the text, not on a model pair)."""

    model_files = ENGINES[matrix.engine].model_is_file  # sizes are weight bytes (GGUF)

    def predict(c: Candidate) -> float | None:
        method = str(c.get("method", "draft"))
        if method not in ("draft", "draft-simple") or "draft_model" not in c or not model_files:
            return None
        alpha = spec.acceptance if spec.acceptance is not None else _lab_alpha(str(c["draft_model"]))
        if alpha is None or not os.path.isfile(matrix.model):
            return None
        ratio = os.path.getsize(str(c["draft_model"])) / os.path.getsize(matrix.model)
        return leviathan_speedup(alpha, int(c.get("draft_n_max", 3)), ratio, 1.0)

    return predict


def _lab_alpha(draft: str) -> float | None:
    truth = Path(draft).parent / "truth.json"
    try:
        return float(json.loads(truth.read_text())["alpha"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def tune_workloads(matrix: Matrix, spec: TuneSpec, base: Path) -> dict[str, WorkloadSpec]:
    if not spec.workloads:
        return {w.label: w for w in matrix.all_workloads}
    out = {}
    for name, raw in spec.workloads.items():
        try:
            w = WorkloadSpec.model_validate({"name": name, **raw})  # records say the tune's name
        except ValueError as exc:
            raise ConfigError(f"tune.workloads.{name}: {str(exc).splitlines()[-1].strip()}") from None
        if w.prompt_file and not Path(w.prompt_file).is_absolute():
            w = w.model_copy(update={"prompt_file": str(matrix_path(base, w.prompt_file).resolve())})
        out[name] = w
    return out


def run_tune(
    matrix_path: Path,
    out: Path,
    *,
    resume: bool = False,
    llama_server: str | None = None,
    say: Callable[[str], None] = lambda s: None,
    observe: Observer | None = None,
) -> list[WorkloadResult]:
    """Tune every workload of the matrix's tune block; the answers are also in DIR/tune.json."""
    matrix, spec = load_tune(matrix_path)
    log_path = out / "tune.json"
    if log_path.exists() and not resume:
        raise StoreError(f"{out} already holds a tune: pass --resume to continue it, or another --out")
    log: dict[str, Any] = json.loads(log_path.read_text()) if log_path.exists() else {}
    log.update(matrix=str(matrix_path.resolve()), spec=spec.model_dump(mode="json", by_alias=True))
    log.setdefault("started_at", now_iso())
    log.setdefault("workloads", {})
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name, workload in tune_workloads(matrix, spec, matrix_path.parent).items():
        say(f"tune {name}: {out / name}")
        results.append(_tune_workload(matrix, spec, name, workload, out, log, llama_server, say, observe))
    log["finished_at"] = now_iso()
    _write(log_path, log)
    return results


def _tune_workload(
    matrix: Matrix,
    spec: TuneSpec,
    name: str,
    workload: WorkloadSpec,
    out: Path,
    log: dict[str, Any],
    llama_server: str | None,
    say: Callable[[str], None],
    observe: Observer | None,
) -> WorkloadResult:
    saved = log["workloads"].get(name, {}).get("state")
    state = (
        RaceState.from_dict(saved) if saved else initial_state(spec, matrix.baseline, predictor(matrix, spec))
    )
    if not saved and screens(spec):
        start_screening(state, spec.grid())  # round 0 measures a few, the theory predicts the rest
    if not saved:
        say(f"order: {state.order_reason}")
    run_dir = out / name
    wl_matrix = matrix.model_copy(
        update={
            "arms": _arms(matrix, state),
            "workload": workload,
            "workloads": (),
            "adaptive": False,
            "tune": None,
            "repeats": min(2 * spec.max_rounds, 1000),
        }
    )
    # Validated as the matrix file written below would be on loading, without reading it back.
    data = _data(resolve_matrix_files(wl_matrix, out))
    resolved, text = Matrix.model_validate(data), yaml.safe_dump(data, sort_keys=False)
    gen = out / "matrices" / f"{name}.yaml"  # for the user: a plain matrix of these arms (docs/tune.md)
    gen.parent.mkdir(parents=True, exist_ok=True)
    gen.write_text(text)

    def save(s: RaceState) -> None:
        log["workloads"][name] = _workload_log(wl_matrix, s, run_dir)
        _write(out / "tune.json", log)

    resume = (run_dir / "manifest.json").exists()
    if resume:
        _align_arms(run_dir, state)
    options = RunOptions(resume=resume, llama_server=llama_server)
    executor = _TuneExecutor(spec, state, save, say)
    runner = prepare(
        resolved,
        gen,
        run_dir,
        options,
        text=text,
        observe=observe,
        executor=executor,
        spec_probe=state.stage == "screen",
    )
    if executor.state.stage != "done":
        runner.run()
    else:
        runner.store.close()
    state = executor.state
    save(state)
    ans = tune_answer(state)
    best = served_command(runner, ans.best.values) if ans.best else []
    command = best if not ans.serves_baseline else served_command(runner, None)
    log["workloads"][name].update(command=command, best_command=best)
    _write(out / "tune.json", log)
    return WorkloadResult(name, run_dir, state, ans, command, best)


def served_command(runner: Runner, values: Candidate | None) -> list[str]:
    """The engine command serving a candidate (None: the baseline, speculation off)."""
    m = runner.matrix
    own = candidate_args(m.engine, values) if values is not None else m.arms[m.baseline]
    return mask_args(runner.engine.command(m.model, [*m.common_args, *own], m.host, SERVE_PORT))


def _workload_log(matrix: Matrix, s: RaceState, run_dir: Path) -> dict[str, Any]:
    ans = tune_answer(s)
    return {
        "run_dir": str(run_dir),
        "state": s.to_dict(),
        "answer": {
            "text": ans.text,
            "best": ans.best.name if ans.best else None,
            "beats_baseline": ans.beats_baseline,
            "serve": ans.serve,
            "not_measured": [e.name for e in unmeasured(s)],
            "runner_up": ans.runner_up.name if ans.runner_up else None,
            "runner_up_why": ans.runner_up.reason if ans.runner_up else None,
            "theory_errors": [
                {"candidate": n, "predicted": p, "measured": m, "screened": screened}
                for n, p, m, screened in theory_errors(s)
            ],
        },
        "candidates": [
            {
                "name": e.name,
                "values": e.values,
                "args": list(candidate_args(matrix.engine, e.values)),
                "predicted": e.predicted,
                "measured": e.measured,
                "status": e.status,
                "dropped_round": e.dropped_round,
                "reason": e.reason,
                "joined": e.joined,
                "screen": e.screen,
            }
            for e in s.entries
        ],
    }


def _write(path: Path, obj: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(obj, indent=1, default=str))  # a full disk is exit 5


def answer_lines(r: WorkloadResult) -> list[str]:
    """The per-workload answer the CLI prints: a ``serve it:`` line only for a candidate shown
    faster than the baseline; otherwise the baseline's command, speculation off."""
    lines = [f"{r.workload}: {r.answer.text}"]
    ru = r.answer.runner_up
    if ru is not None and ru.measured:
        why = ru.reason or "still racing when the tune stopped (not separated from the best)"
        lines.append(f"  runner-up {ru.name}: ×{ru.measured['ratio']:.3f}; {why}")
    lines.append(f"  rounds {r.state.rounds}, stopped: {r.state.stop_reason}")
    lines += screen_lines(r.state)
    lines += unmeasured_lines(r.state)
    if r.command and not r.answer.serves_baseline:
        lines.append(f"  serve it: {shlex.join(r.command)}")
    elif r.command:
        lines.append(f"  serve the baseline (speculation off): {shlex.join(r.command)}")
    lines.append(f"  run directory: {r.run_dir}")
    return lines


def unmeasured_lines(state: RaceState) -> list[str]:
    """Which candidates were never measured, and why (the budget, or an engine that failed)."""
    missing = unmeasured(state)
    waiting = [e.name for e in missing if e.status == "waiting"]
    out = []
    if waiting:
        admitted = len(state.entries) - len(waiting)
        out.append(
            f"  not measured: {', '.join(waiting)}: the budget admitted {admitted} of "
            f"{len(state.entries)} candidates (it pays for a verdict, {MIN_LAUNCHES} rounds with the "
            "baseline, on every candidate it admits)"
        )
    failed = [e for e in missing if e.status != "waiting"]
    return out + [f"  not measured: {e.name}: {e.reason or 'no round ran'}" for e in failed]
