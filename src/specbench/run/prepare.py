"""Prepare a run once: from a :class:`~specbench.matrix.config.Matrix` and the run's options to a
:class:`~specbench.run.runner.Runner` that is ready to launch.

Everything a run can refuse is refused here, before anything launches: the run directory
(``--out``), a non-loopback host, the engine binary, the arms' flags against the engine's own
``--help``, the API key. Then the requests are built (once), the cells planned, the run directory
created or reopened (manifest, environment, the argument table, the matrix copy) and the plan
written. ``specbench run``, ``tune``, the demo and ``bench/`` all come through :func:`prepare`:
the CLI and the library through :func:`specbench.api.prepare_run` (a matrix file), ``tune`` with the
matrix it built itself (no file read back).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from specbench.analysis.predicted.stored import ARCH_FILE
from specbench.engines import ENGINES, argstore
from specbench.engines.argtable import ArgTable, check_flags
from specbench.engines.base import Engine
from specbench.engines.openai import AttachedEngine
from specbench.errors import ConfigError
from specbench.executors.base import Executor, Observer
from specbench.matrix.config import LOOPBACK, Cell, Matrix, RequestSpec, plan_cells
from specbench.run import adaptive
from specbench.run.attach import attach_engine, attach_matrix
from specbench.run.machineload import cpu_room, threads_warning
from specbench.run.modelfiles import check_model_files
from specbench.run.pace import Pace
from specbench.run.plan import Plan, cpu_decode, make_plan, write_plan
from specbench.run.runner import Runner
from specbench.run.servedfiles import Change, ServedFiles, architectures_of, arm_files, file_record
from specbench.store.outdir import check_run_dir
from specbench.store.paths import path_problem
from specbench.store.redact import MASK, Redactor, mask_args, secret_env_name
from specbench.store.rundir import RunStore, environment
from specbench.workloads.cut import cut_note
from specbench.workloads.suites import build_requests


@dataclass(frozen=True)
class RunOptions:
    """How to run a matrix, beyond the matrix itself: the ``specbench run`` flags."""

    resume: bool = False
    retry_failed: bool = False
    attach: str | None = None  # URL of a server that runs elsewhere (attach mode)
    arm: str | None = None  # attach mode: the arm this server is
    arm_args: tuple[str, ...] | None = None  # attach mode: the flags it was started with
    llama_server: str | None = None
    api_key_env: str | None = None
    allow_remote_host: bool = False


def check_out(out: Path, options: RunOptions) -> None:
    """The run directory's own checks (lock, a run to resume, writable), first of all."""
    if options.retry_failed and not options.resume:
        raise ConfigError("--retry-failed: only with --resume (a new run has no failed arms)")
    check_run_dir(out, resume=options.resume)


@dataclass(frozen=True)
class Checked:
    """A matrix that passed every check a run makes before it writes or launches anything."""

    matrix: Matrix  # attach mode: with the attached arm
    engine: Engine
    table: ArgTable | None  # the engine's own argument table, the flags were checked against
    requests: tuple[RequestSpec, ...]  # built once
    cells: list[Cell]
    #: --resume: model files that changed since env.json recorded them, none of them measured yet
    changes: tuple[Change, ...] = ()


def check(matrix: Matrix, source: Path, out: Path, options: RunOptions = RunOptions()) -> Checked:
    """Everything a run can refuse, refused before anything is written or launched (``run
    --dry-run`` stops here): the run directory, the host, the engine, the arms' flags; then the
    requests are built and the cells planned."""
    check_out(out, options)
    check_host(matrix, source, options.allow_remote_host)
    attach = options.attach
    if not attach:  # an attached server loaded its own files
        check_model_files(matrix)
    engine = make_engine(matrix, options.llama_server) if not attach else None
    changes = resumed_changes(matrix, engine, out) if engine and options.resume else ()
    if attach:
        attached = attach_engine(matrix, attach)
        matrix = attach_matrix(matrix, options.arm, options.arm_args, attached.kind_name, out, options.resume)
        engine = attached
    assert engine is not None
    table = engine.arg_table()
    check_flags(table, matrix.common_args, matrix.arms)  # the engine's own --help
    requests, warmup, concurrency = build_requests(matrix, source.parent)
    cells = plan_cells(matrix, requests, warmup, concurrency)
    if attach:  # the arms attached earlier were measured by earlier calls
        cells = [c for c in cells if c.arm == (options.arm or "attached")]
    return Checked(matrix, engine, table, requests, cells, changes)


def resumed_changes(matrix: Matrix, engine: Engine, out: Path) -> tuple[Change, ...]:
    """The model files that changed since the run in ``out`` recorded them: refused (exit 5) when
    a launch measured the old file, else returned to be adopted (servedfiles.py)."""
    if not (out / "env.json").is_file():
        return ()
    return tuple(ServedFiles(matrix, engine, RunStore(out)).every_arm())


def prepare(
    matrix: Matrix,
    source: Path,
    out: Path,
    options: RunOptions = RunOptions(),
    *,
    text: str | None = None,
    observe: Observer | None = None,
    executor: Executor | None = None,
    spec_probe: bool = False,
) -> Runner:
    """Validate everything (:func:`check`) and create (or reopen) the run directory; nothing is
    launched yet.

    ``matrix``: loaded once, its paths resolved (:func:`specbench.matrix.load.load_matrix`, or
    built by ``tune``); ``source``: the matrix file it stands for (its folder resolves relative
    prompt files; recorded in the manifest); ``text``: the matrix copy the run directory keeps
    (default: the file's text); ``executor``: where the cells run (None: here, in order), wrapped
    for adaptive repeats when the matrix asks for them; the runner comes back fully built, with
    the plan it was estimated by (``Runner.plan``; plan.json keeps it for later readers)."""
    checked = check(matrix, source, out, options)
    matrix, engine, table, requests, cells = (
        checked.matrix,
        checked.engine,
        checked.table,
        checked.requests,
        checked.cells,
    )
    attach = options.attach
    key = api_key(matrix.api_key_env or options.api_key_env)
    store = RunStore(out, redactor(matrix, attach, key))
    store.create(
        {
            "matrix": matrix.model_dump(mode="json"),
            "matrix_path": str(source.resolve()),
            "cwd": str(Path.cwd()),  # vLLM reads a relative model path against it (predicted.models.run_path)
            "attach": attach,
            "planned_requests": len(cells) * len(requests),
            "prompts": [r.model_dump(mode="json") for r in requests],
        },
        resume=options.resume,
    )
    if options.retry_failed:
        store.retry_failed()
    if checked.changes:  # --resume: nothing was measured with the old files (check refused that)
        ServedFiles(matrix, engine, store).adopt(checked.changes)
    if not options.resume or not (out / "env.json").exists():
        store.write_env(environment_of(matrix, engine))
        # The table the flags were checked against: CONFOUND reads it back from the run, never
        # from whatever engine is installed where the report is made (engines/argstore.py).
        store.write_text(argstore.ARGS_FILE, argstore.dumps(table))
        # The models' shapes, so the theory is recomputed from the run alone (predicted/stored.py).
        store.write_text(ARCH_FILE, json.dumps(architectures_of(matrix, engine), indent=1))
    if not (out / "matrix.yaml").exists():  # scrubbed; a full disk is exit 5
        store.write_text("matrix.yaml", source.read_text() if text is None else text)
    plan = plan_for(matrix, engine, cells, out, changes=checked.changes)
    write_plan(plan, out)  # for later readers of the run directory (this process keeps `plan`)
    return Runner(
        matrix=matrix,
        engine=engine,
        store=store,
        cells=cells,
        attach_url=attach,
        observe=observe or (lambda e, i: None),
        executor=adaptive.executor_for(matrix.adaptive, executor),
        plan=plan,
        spec_probe=spec_probe,
        api_key=key,
        # Every launch re-checks the files it serves against env.json (an attached server's are
        # not ours to read).
        served=ServedFiles(matrix, engine, store) if not attach else None,
        pace=Pace.of(plan.estimate),
    )


def make_engine(matrix: Matrix, llama_server: str | None = None, attach: str | None = None) -> Engine:
    """The engine that will serve ``matrix``: the registry's class (specbench.engines.ENGINES) with
    what only a launch needs, the binary to run (or nothing, for an attached server)."""
    if attach:
        return AttachedEngine()
    if llama_server and path_problem(llama_server):
        raise ConfigError(f"--llama-server: the path {path_problem(llama_server)}")
    return ENGINES[matrix.engine].for_run(matrix.engine_binary, llama_server)


def check_host(matrix: Matrix, path: Path, allowed: bool) -> None:
    """Engines listen on loopback unless the user says otherwise: an engine on 0.0.0.0 answers
    anyone on the network, API key or not."""
    if matrix.host not in LOOPBACK and not allowed:
        raise ConfigError(
            f"{path}: host: {matrix.host} makes the engine reachable from other machines; "
            "pass --allow-remote-host if that is what you want"
        )


def api_key(env_name: str | None) -> str | None:
    """The API key held in environment variable ``env_name`` (never in a file specbench writes)."""
    if not env_name:
        return None
    value = os.environ.get(env_name)
    if not value:
        raise ConfigError(f"api_key_env: environment variable {env_name} is not set (or empty)")
    return value


def redactor(matrix: Matrix, attach: str | None, key: str | None) -> Redactor:
    """Every secret of this run, so that no file of the run directory holds one."""
    found = Redactor()
    found.add_args(matrix.common_args)
    for args in matrix.arms.values():
        found.add_args(args)
    found.add_env(matrix.env)
    found.add(key, urlsplit(attach).password if attach else None)
    return found


def environment_of(matrix: Matrix, engine: Engine) -> dict[str, object]:
    try:
        version = engine.version()
    except OSError as exc:  # not a program at all (a data file, another architecture)
        raise ConfigError(f"engine binary cannot run: {exc.strerror or exc}") from exc
    env: dict[str, object] = {**environment(), "engine": {"kind": engine.kind_name, **version}}
    if ENGINES[matrix.engine].model_is_file:  # a model folder (vLLM, SGLang) is not hashed
        if os.path.isfile(matrix.model):
            env["model"] = file_record(matrix.model)
        env["arm_files"] = arm_files(matrix)
    return env


def commands(matrix: Matrix, engine: Engine) -> dict[str, list[str]]:
    """Every arm's command line with secret values masked (plans and dry runs are printed); the
    environment the engine is given (e.g. vLLM's CPU build) comes first as ``VAR=value`` words,
    as a shell would take it."""
    given = {**engine.launch_env(matrix.model), **matrix.env}
    env = [f"{k}={MASK if secret_env_name(k) else v}" for k, v in sorted(given.items())]
    return {
        arm: [*env, *mask_args(engine.command(matrix.model, matrix.arm_args(arm), matrix.host, 0))]
        for arm in matrix.arms
    }


def plan_for(
    matrix: Matrix,
    engine: Engine,
    cells: list[Cell],
    out: Path,
    probe: bool = True,
    changes: Sequence[Change] = (),
) -> Plan:
    """The plan of ``cells``; ``changes``: model files a resumed run finds changed (and adopts)."""
    probes = engine.forward_probe_request([1]) is not None
    room = cpu_room() if probe and cpu_decode(matrix) else None  # one sample for both uses
    warnings = [
        *(c.note() for c in changes),
        *_arm_warnings(matrix, engine),
        *_thread_warnings(matrix, engine, room),
        *_cut_warnings(cells, out),
    ]
    return make_plan(
        matrix,
        cells,
        out,
        commands(matrix, engine),
        probe,
        forward_probe=probes,
        warnings=warnings,
        room=room,
    )


def _cut_warnings(cells: list[Cell], out: Path) -> list[str]:
    """Bundled prompts that an earlier fit in ``out`` cut to their target (workloads.cut): known
    once this model's tokenizer has counted them, so shown when a run is continued."""
    if not cells or not (out / "fitted_prompts.json").is_file():
        return []
    note = cut_note(cells[0].requests, RunStore(out).fitted_prompts())
    return [note] if note else []


def _arm_warnings(matrix: Matrix, engine: Engine) -> list[str]:
    """The engine's warnings, one line each, naming every arm it concerns (common_args: all)."""
    return _per_arm(matrix, lambda arm: engine.arm_warnings(list(matrix.arm_args(arm))))


def _thread_warnings(matrix: Matrix, engine: Engine, room: tuple[int, float] | None = None) -> list[str]:
    """Arms whose engine threads outnumber the cores free of other work, measured now: an
    oversubscribed CPU decode measures the machine's contention, not the method. The engine
    reads its own thread flag (an attached server's flags are not ours to judge: none); the
    machine is sampled (unless ``room`` holds a sample) only when an arm asks for more than one
    thread."""
    asked = {arm: engine.threads(matrix.arm_args(arm)) for arm in matrix.arms}
    if not any(a and a[1] > 1 for a in asked.values()):
        return []
    cores, busy = room or cpu_room()

    def warn(arm: str) -> list[str]:
        flag = asked[arm]
        found = threads_warning(*flag, cores, busy) if flag else None
        return [found] if found else []

    return _per_arm(matrix, warn)


def _per_arm(matrix: Matrix, warnings: Callable[[str], list[str]]) -> list[str]:
    """``warnings`` of each arm, one line each, naming every arm it concerns (common_args: all)."""
    arms: dict[str, list[str]] = {}
    for arm in matrix.arms:
        for warning in warnings(arm):
            arms.setdefault(warning, []).append(arm)
    return [f"arm{'s' if len(a) > 1 else ''} {', '.join(a)}: {w}" for w, a in arms.items()]
