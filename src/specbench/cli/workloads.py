"""``specbench workloads`` and ``specbench predict``: what a run would send and what theory expects."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specbench.cli._app import app
from specbench.errors import ConfigError
from specbench.run.console import console, printable

workloads_app = typer.Typer(no_args_is_help=True, help="Workload suites, bundled prompts, datasets.")
app.add_typer(workloads_app, name="workloads")


@workloads_app.command("list")
def workloads_list() -> None:
    """The named suites."""
    from specbench.workloads.suites import SUITES

    width = max(len(name) for name in SUITES)  # aligned however long the longest name is
    for suite in SUITES.values():
        print(f"{suite.name:{width}}  {suite.description}")


@workloads_app.command("show")
def workloads_show(name: Annotated[str, typer.Argument(metavar="NAME", help="suite name")]) -> None:
    """One suite's defaults."""
    from specbench.workloads.suites import get_suite

    suite = get_suite(name)
    for key, value in vars(suite).items():
        if value is not None:  # unset: the suite leaves it to the prompts (printing "None" says nothing)
            print(f"{key}: {value}")


@workloads_app.command("prompts")
def workloads_prompts(
    category: Annotated[str | None, typer.Option(help="only this category")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", help="a prompt JSONL file instead of the bundled set")
    ] = None,
) -> None:
    """Prompt ids by category, with the start of each prompt (what `prompts`/`categories` pick from)."""
    from specbench.workloads.prompts import listing, preview

    groups = listing(category, file)
    for name, prompts in groups.items():
        print(f"{name} ({len(prompts)})")
        for prompt in prompts:
            print(printable(f"  {prompt.id:24} {preview(prompt)}", markup=False))


@workloads_app.command("load")
def workloads_load(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="dataset file")],
    format: Annotated[
        str, typer.Option("--format", help="spec-bench, speed-bench, sharegpt or jsonl")
    ] = "jsonl",
    skip_bad: Annotated[bool, typer.Option(help="skip malformed rows and count them")] = False,
) -> None:
    """Read a dataset and print its prompt count by category."""
    from specbench.workloads.datasets import count_by_category, load_dataset

    result = load_dataset(file, format, skip_bad=skip_bad)
    for category, count in count_by_category(result.prompts).items():
        print(f"{category:16} {count}")
    print(
        f"{'total':16} {len(result.prompts)}"
        + (f" ({result.skipped} bad rows skipped)" if result.skipped else "")
    )


@app.command("predict")
def predict_command(
    model: Annotated[
        str | None, typer.Option(help="model preset or path to a Hugging Face config.json")
    ] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU preset, or 'cpu' to probe this machine")] = None,
    method: Annotated[str | None, typer.Option(help="draft, mtp, eagle3, dflash or ngram")] = None,
    quant: Annotated[str, typer.Option(help="quantisation, e.g. Q4_K_M, FP8, BF16")] = "Q4_K_M",
    draft_max: Annotated[int, typer.Option(help="K, drafted tokens per round")] = 4,
    acceptance: Annotated[float | None, typer.Option(help="server-style accepted/drafted ratio")] = None,
    accepted_length: Annotated[
        float | None, typer.Option(help="published mean tokens per round, bonus included (vLLM/SGLang AL)")
    ] = None,
    tree_top_k: Annotated[int, typer.Option(help="tree draft: candidates per level (1: a chain)")] = 1,
    tree_tokens: Annotated[int, typer.Option(help="tree draft: draft tokens verified per round")] = 0,
    alpha: Annotated[float | None, typer.Option(help="per-token acceptance probability")] = None,
    alpha_range: Annotated[
        tuple[float, float] | None,
        typer.Option(help="LOW HIGH: the acceptance was estimated; its band widens the interval"),
    ] = None,
    draft_model: Annotated[str | None, typer.Option(help="draft model preset (method draft)")] = None,
    concurrency: Annotated[
        str,
        typer.Option(help="requests in flight; several (1,8,64): each, and where speculation stops paying"),
    ] = "1",
    context: Annotated[int, typer.Option(help="tokens in context")] = 4096,
    calibrate: Annotated[
        Path | None, typer.Option(help="run directory: calibrate on its baseline, predict every arm")
    ] = None,
    fit_arm: Annotated[
        str | None, typer.Option(help="with --calibrate: also fit the per-round overhead to this arm")
    ] = None,
    replay: Annotated[
        bool,
        typer.Option(help="hybrid targets: re-run the accepted prefix after each restore (pinned llama.cpp)"),
    ] = False,
    baseline_tok_s: Annotated[
        float | None, typer.Option(help="fit the bandwidth efficiency to this published baseline first")
    ] = None,
    tensor_parallel: Annotated[int, typer.Option(help="devices one pass is split over")] = 1,
    bandwidth_gbs: Annotated[
        float | None, typer.Option(help="memory bandwidth, GB/s (overrides --gpu's, or describes a device)")
    ] = None,
    tflops: Annotated[
        float | None, typer.Option(help="dense BF16 TFLOPS (overrides --gpu's, or describes a device)")
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(help=f"{_theory_engines()}: add that engine's named host costs (docs/theory.md)"),
    ] = None,
    format: Annotated[str, typer.Option("--format", help="text or json")] = "text",
    presets: Annotated[
        bool, typer.Option("--presets", help="list the model and GPU presets --model and --gpu take")
    ] = False,
) -> None:
    """Predict baseline and speculative decode speed from architecture and hardware."""
    import json

    from specbench import theory
    from specbench.analysis import predicted
    from specbench.engines import theory_priors
    from specbench.theory.levels import parse_levels, predict_levels

    if presets:
        _print_presets()
        return
    if calibrate is not None:
        ignored = {"--model": model, "--gpu": gpu, "--method": method, "--baseline-tok-s": baseline_tok_s,
                   "--bandwidth-gbs": bandwidth_gbs, "--tflops": tflops, "--draft-model": draft_model,
                   "--tensor-parallel": None if tensor_parallel == 1 else tensor_parallel}  # fmt: skip
        given = [flag for flag, value in ignored.items() if value is not None]
        if given:  # the run directory describes model, device and arms; say so rather than ignore
            raise ConfigError(
                f"predict: --calibrate takes its model and device from the run; drop {', '.join(given)}"
            )
        fitted = predicted.run_theory(calibrate, fit_arm=fit_arm)
        print(
            json.dumps(fitted.to_dict(), indent=1)
            if format == "json"
            else predicted.format_arm_predictions(fitted)
        )
        return
    device = _device(gpu, bandwidth_gbs, tflops)
    if not (model and device and method):
        raise ConfigError("predict: give --model, --gpu and --method (or --calibrate RUNDIR)")
    _check_predict_flags(method, draft_model, acceptance, alpha, accepted_length)
    _check_engine(engine)
    results = predict_levels(
        parse_levels(concurrency),
        model,
        device,
        quant,
        method,
        draft_max,
        acceptance=acceptance,
        alpha=alpha,
        draft_model=draft_model,
        context=context,
        replay=replay,
        baseline_tok_s=baseline_tok_s,
        tensor_parallel=tensor_parallel,
        accepted_length=accepted_length,
        tree=theory.Tree(tree_top_k, tree_tokens or draft_max) if tree_top_k > 1 or tree_tokens else None,
        engine=engine,
        alpha_range=alpha_range,
        priors=theory_priors(),  # what each engine was measured to do; without --engine, their envelope
    )
    _note_gpu_alias(gpu)
    print(_prediction_text(results, format))


def _prediction_text(results: list[Any], format: str) -> str:
    """One level as before; several as one line each and where speculation stops paying."""
    import json

    from specbench import theory
    from specbench.theory.levels import levels_of

    if len(results) == 1:
        (one,) = results
        return json.dumps(one.to_dict(), indent=1) if format == "json" else theory.format_prediction(one)
    if format != "json":
        return theory.format_levels(results)
    stop = theory.stops_paying(levels_of(results))
    return json.dumps({"levels": [r.to_dict() for r in results], "stops_paying": stop}, indent=1)


def _check_engine(engine: str | None) -> None:
    """--engine: one the theory names host costs and verify curves for (docs/theory.md); without
    it the engine is unknown, and the interval says so."""
    if engine is not None and engine not in _modelled():
        raise ConfigError(f"--engine: {engine!r} is not one of {', '.join(_modelled())}")


def _modelled() -> tuple[str, ...]:
    from specbench.engines import kinds

    return kinds(lambda c: c.modelled_by_theory)


def _theory_engines() -> str:
    """The engines ``--engine`` takes, from the registry: ``llamacpp, vllm or sglang``."""
    *rest, last = _modelled()
    return f"{', '.join(rest)} or {last}" if rest else last


def _device(gpu: str | None, bandwidth_gbs: float | None, tflops: float | None) -> Any:
    """--gpu (a preset, a hardware YAML file or cpu), with --bandwidth-gbs / --tflops overriding its
    numbers; without --gpu the two flags describe a device on their own."""
    from dataclasses import replace

    from specbench.theory.hardware import gpu_from_mapping
    from specbench.theory.presets import get_gpu

    if bandwidth_gbs is None and tflops is None:
        return gpu
    if gpu is None:
        if bandwidth_gbs is None or tflops is None:
            raise ConfigError("--bandwidth-gbs and --tflops: give both to describe a device without --gpu")
        return gpu_from_mapping(
            "custom", {"bandwidth_gbs": bandwidth_gbs, "tflops": tflops, "memory_gb": 1e3}
        )
    base = get_gpu(gpu)
    numbers = {"bandwidth_gbs": bandwidth_gbs or base.bandwidth_gbs, "tflops": tflops or base.tflops}
    checked = gpu_from_mapping(base.name, {**numbers, "memory_gb": base.memory_gb})
    return replace(base, bandwidth_gbs=checked.bandwidth_gbs, tflops=checked.tflops)


def _print_presets() -> None:
    from specbench.theory.presets import gpus, models

    print("models (--model, --draft-model; or a Hugging Face config.json):")
    print("\n".join(f"  {name}" for name in models().names()))
    print("gpus (--gpu; or cpu to probe this machine):")
    print("\n".join(f"  {name}" for name in gpus().names()))


def _note_gpu_alias(gpu: str | None) -> None:
    """A short name that picks one of several variants (h100: SXM, not PCIe) is said aloud: the
    variants differ in bandwidth, and so in every predicted rate."""
    from specbench.theory.presets import gpus, preset_key

    catalog = gpus()
    if gpu is None or gpu.lower() == "cpu" or gpu.endswith((".yaml", ".yml")) or Path(gpu).is_file():
        return
    chosen = catalog.resolve(gpu)
    others = [n for n in catalog.names() if n != chosen and preset_key(n).startswith(preset_key(gpu))]
    if preset_key(chosen) != preset_key(gpu) and others:
        console.print(
            f"note: --gpu {gpu} is the {chosen} preset; also known: {', '.join(others)}", highlight=False
        )


def _check_predict_flags(
    method: str,
    draft_model: str | None,
    acceptance: float | None,
    alpha: float | None,
    accepted_length: float | None = None,
) -> None:
    """The library names its parameters; the user typed flags, so the message names those."""
    if (draft_model is None) == (method == "draft"):
        raise ConfigError(
            "--draft-model: needed with --method draft (the draft's preset or config.json), and only then"
        )
    if sum(x is not None for x in (acceptance, alpha, accepted_length)) != 1:
        raise ConfigError(
            "predict: give exactly one of --acceptance (accepted/drafted), --alpha (per token)"
            " or --accepted-length (mean tokens per round)"
        )
