"""Library entry points the CLI wraps: plain typed functions that tests call directly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from specbench.config import Matrix, load_matrix, plan_cells
from specbench.engines.base import Engine
from specbench.engines.install import BuildOptions, find_llama_server
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.openai import AttachedEngine
from specbench.engines.sglang import SglangEngine
from specbench.engines.vllm import VllmEngine
from specbench.errors import ConfigError, InstallError
from specbench.runner import Observer, Runner
from specbench.store import RunStore, environment, file_sha256
from specbench.workloads.suites import build_requests


def make_engine(matrix: Matrix, llama_server: str | None = None, attach: str | None = None) -> Engine:
    if attach:
        return AttachedEngine()
    if matrix.engine == "llamacpp":
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


def prepare_run(
    matrix_path: Path,
    out: Path,
    *,
    resume: bool = False,
    attach: str | None = None,
    arm: str | None = None,
    llama_server: str | None = None,
    observe: Observer | None = None,
) -> Runner:
    """Validate everything and create (or reopen) the run directory; nothing is launched yet."""
    matrix = load_matrix(matrix_path)
    if attach:
        matrix = _attach_matrix(matrix, arm)
    engine = make_engine(matrix, llama_server, attach)
    requests, warmup, concurrency = build_requests(matrix, matrix_path.parent)
    cells = plan_cells(matrix, requests, warmup, concurrency)
    store = RunStore(out)
    store.create(
        {
            "matrix": matrix.model_dump(mode="json"),
            "matrix_path": str(matrix_path.resolve()),
            "attach": attach,
            "planned_requests": len(cells) * len(requests),
            "prompts": [r.model_dump(mode="json") for r in requests],
        },
        resume=resume,
    )
    if not resume or not (out / "env.json").exists():
        store.write_env(_environment(matrix, engine))
    shutil.copyfile(matrix_path, out / "matrix.yaml") if not (out / "matrix.yaml").exists() else None
    return Runner(
        matrix=matrix,
        engine=engine,
        store=store,
        cells=cells,
        attach_url=attach,
        observe=observe or (lambda e, i: None),
    )


def _attach_matrix(matrix: Matrix, arm: str | None) -> Matrix:
    name = arm or "attached"
    return matrix.model_copy(update={"arms": {name: ()}, "baseline": name, "common_args": ()})


def _environment(matrix: Matrix, engine: Engine) -> dict[str, object]:
    env: dict[str, object] = {**environment(), "engine": {"kind": engine.kind, **engine.version()}}
    if matrix.engine == "llamacpp" and os.path.isfile(matrix.model):
        env["model"] = {
            "path": matrix.model,
            "sha256": file_sha256(Path(matrix.model)),
            "bytes": os.path.getsize(matrix.model),
        }
    return env


def dry_run(matrix_path: Path, llama_server: str | None = None) -> list[tuple[str, list[str]]]:
    """Every arm's exact command line, without launching anything; the environment the engine is
    given (e.g. vLLM's CPU build) comes first as ``VAR=value`` words, as a shell would take it."""
    matrix = load_matrix(matrix_path)
    engine = make_engine(matrix, llama_server)
    env = [f"{k}={v}" for k, v in sorted({**engine.launch_env(matrix.model), **matrix.env}.items())]
    return [
        (arm, [*env, *engine.command(matrix.model, matrix.arm_args(arm), matrix.host, 0)])
        for arm in matrix.arms
    ]
