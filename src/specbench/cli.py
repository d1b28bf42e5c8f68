"""Command line: parse, build config, call the library, map errors to exit codes. Nothing else."""

from __future__ import annotations

import shlex
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Annotated, NoReturn

import typer

from specbench.errors import SpecbenchError
from specbench.progress import console

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
engine_app = typer.Typer(no_args_is_help=True, help="Build or find inference engines.")
lab_app = typer.Typer(no_args_is_help=True, help="Synthetic GGUF models with designed acceptance.")
app.add_typer(engine_app, name="engine")
app.add_typer(lab_app, name="lab")


def fail(err: SpecbenchError) -> NoReturn:
    console.print(f"[red]error:[/red] {err}", markup=True, highlight=False)
    raise typer.Exit(err.exit_code)


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # same clean-up path as Ctrl-C: stop engines, keep records


@engine_app.command("install")
def engine_install(
    engine: Annotated[str, typer.Argument(help="llamacpp")] = "llamacpp",
    cuda: Annotated[bool, typer.Option(help="build with GGML_CUDA=ON")] = False,
    native: Annotated[
        bool, typer.Option(help="GGML_NATIVE: tune for this CPU (--no-native: portable build)")
    ] = True,
    jobs: Annotated[int | None, typer.Option(help="parallel compile jobs (default: all cores)")] = None,
    llama_server: Annotated[
        str | None, typer.Option(help="use this llama-server instead of building")
    ] = None,
) -> None:
    """Build llama-server from the pinned llama-cpp-python sdist into the cache (once); print its path."""
    from specbench.engines.install import BuildOptions, find_llama_server
    from specbench.progress import build_llama_server

    if engine != "llamacpp":
        fail(SpecbenchError(f"engine install: only 'llamacpp' can be built here, not {engine!r}"))
    try:
        found = find_llama_server(llama_server, BuildOptions(cuda=cuda, native=native))
        if found is None:
            found = build_llama_server(BuildOptions(cuda=cuda, native=native), jobs)
    except SpecbenchError as err:
        fail(err)
    print(found)


@lab_app.command("make")
def lab_make(
    out: Annotated[Path, typer.Option(help="directory for target.gguf, draft.gguf, truth.json")],
    arch: Annotated[
        str, typer.Option(help="dense, moe or hybrid (qwen35: Gated DeltaNet + attention)")
    ] = "dense",
    alpha: Annotated[float, typer.Option(help="fraction of tokens where the draft agrees")] = 0.8,
    size: Annotated[str, typer.Option(help="tiny, small or membound")] = "tiny",
    seed: Annotated[int, typer.Option()] = 0,
    experts: Annotated[int | None, typer.Option(help="MoE: routed experts (default 128)")] = None,
    top_k: Annotated[int | None, typer.Option(help="MoE: experts per token (default 8)")] = None,
    vocab_extra: Annotated[int, typer.Option(help="extra printable tokens beyond ASCII")] = 512,
    incompatible_draft: Annotated[
        bool, typer.Option(help="draft whose vocabulary llama.cpp rejects")
    ] = False,
) -> None:
    """Write a target/draft GGUF pair whose greedy behaviour is designed."""
    from specbench.lab.gguf_model import ARCHS
    from specbench.lab.make import LabSpec, make_pair

    if arch not in ARCHS:
        fail(SpecbenchError(f"--arch: {arch!r} is not available; use {', '.join(ARCHS)}"))
    try:
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
    except SpecbenchError as err:
        fail(err)
    for name in ("target.gguf", "draft.gguf", "truth.json"):
        print(truth.parent / name)


@lab_app.command("check")
def lab_check(
    alpha: Annotated[float, typer.Option(help="designed per-token agreement")] = 0.6,
    draft_max: Annotated[int, typer.Option(help="--spec-draft-n-max K")] = 4,
    max_tokens: Annotated[int, typer.Option()] = 400,
    llama_server: Annotated[str | None, typer.Option()] = None,
    arch: Annotated[str, typer.Option(help="target: dense, moe or hybrid (the draft is dense)")] = "dense",
    size: Annotated[str, typer.Option(help="tiny, small or membound")] = "tiny",
    log: Annotated[Path | None, typer.Option(help="keep the server log here")] = None,
) -> None:
    """Serve a tiny lab pair with draft-simple; print designed vs measured acceptance."""
    from specbench.engines.install import BuildOptions, find_llama_server
    from specbench.lab.check import run_check
    from specbench.lab.gguf_model import ARCHS

    if arch not in ARCHS:
        fail(SpecbenchError(f"--arch: {arch!r} is not available; use {', '.join(ARCHS)}"))
    try:
        binary = find_llama_server(llama_server, BuildOptions())
        if binary is None:
            fail(SpecbenchError("llama-server not found: run `specbench engine install llamacpp` first"))
        result = run_check(binary, alpha, draft_max, max_tokens, arch=arch, log=log, size=size)
    except SpecbenchError as err:
        fail(err)
    print(result.line())


@app.command("run")
def run(
    matrix: Annotated[Path, typer.Argument(help="matrix YAML file")],
    out: Annotated[Path, typer.Option(help="run directory")] = Path("runs/latest"),
    resume: Annotated[bool, typer.Option(help="continue a run: skip completed requests")] = False,
    dry_run: Annotated[bool, typer.Option(help="print each arm's command line and exit")] = False,
    attach: Annotated[str | None, typer.Option(help="measure an already running server at this URL")] = None,
    arm: Annotated[str | None, typer.Option(help="with --attach: the arm name to record")] = None,
    llama_server: Annotated[str | None, typer.Option(help="llama-server binary to use")] = None,
    executor: Annotated[str, typer.Option(help="local, or ray (pip install 'specbench[ray]')")] = "local",
    address: Annotated[str | None, typer.Option(help="with --executor ray: the cluster address")] = None,
) -> None:
    """Run a matrix: every arm, interleaved repeats, every request recorded raw."""
    from specbench import api
    from specbench.analysis import load_run
    from specbench.executors import make_executor
    from specbench.progress import RunProgress
    from specbench.summary import print_summary

    try:
        if dry_run:
            for name, argv in api.dry_run(matrix, llama_server):
                print(f"{name}: {shlex.join(argv)}")  # quoted: a --speculative-config JSON pastes as is
            return
        if attach and executor != "local":
            fail(SpecbenchError("--attach measures one running server: use the default --executor local"))
        runner = api.prepare_run(
            matrix, out, resume=resume, attach=attach, arm=arm, llama_server=llama_server
        )
        runner.executor = make_executor(executor, address=address, resources=dict(runner.matrix.resources))
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
        with RunProgress(runner.total_todo(), matrix.stem) as bar:
            runner.observe = bar
            runner.run()
        print_summary(load_run(out))
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: records so far are in {out}; continue with --resume")
        raise typer.Exit(130) from None
    except SpecbenchError as err:
        fail(err)


@app.command("summary")
def summary(run_dir: Annotated[Path, typer.Argument(help="run directory")]) -> None:
    """Print the per-arm summary of a run directory."""
    from specbench.analysis import load_run
    from specbench.summary import print_summary

    try:
        print_summary(load_run(run_dir))
    except SpecbenchError as err:
        fail(err)


@app.command("demo")
def demo(
    out: Annotated[Path, typer.Option(help="where the demo's runs go")] = Path("runs/demo"),
    llama_server: Annotated[str | None, typer.Option()] = None,
    repeats: Annotated[int, typer.Option(help="repeats per arm")] = 3,
) -> None:
    """The embedded default: build/find llama-server, make lab models, run a matrix, summarise."""
    from specbench.demo import run_demo

    try:
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
        run_demo(out, llama_server=llama_server, repeats=repeats)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: partial runs are in {out}; rerun to resume")
        raise typer.Exit(130) from None
    except SpecbenchError as err:
        fail(err)


@app.command("report")
def report(
    run_dir: Annotated[Path, typer.Argument(help="run directory")],
    format: Annotated[
        str, typer.Option("--format", help="comma-separated: md, html, json, csv")
    ] = "md,html,json,csv",
) -> None:
    """Render the report from the run directory alone (nothing is re-run); print the files."""
    from specbench.report import render_report

    try:
        paths = render_report(run_dir, [f.strip() for f in format.split(",") if f.strip()])
    except SpecbenchError as err:
        fail(err)
    for path in paths:
        print(path)


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="per-request CSV, JSON or JSONL from another tool")],
    out: Annotated[Path, typer.Option(help="run directory to create")],
    map: Annotated[list[str] | None, typer.Option("--map", help="field=column[,field=column...]")] = None,
    flags: Annotated[
        list[str] | None, typer.Option("--flags", help="columns that are per-arm configuration")
    ] = None,
    baseline: Annotated[str | None, typer.Option(help="the baseline arm")] = None,
    format: Annotated[
        str | None, typer.Option("--format", help="csv, tsv, json or jsonl (default: suffix)")
    ] = None,
    speculative: Annotated[
        list[str] | None, typer.Option("--speculative", help="arms that speculate (default: drafted > 0)")
    ] = None,
    control: Annotated[
        list[str] | None, typer.Option("--control", help="arms that never speculate (baseline re-runs)")
    ] = None,
) -> None:
    """Turn another harness's per-request results into a run directory; print its summary."""
    from specbench.analysis import load_run
    from specbench.importer import import_file, parse_columns, parse_map
    from specbench.summary import print_summary

    try:
        result = import_file(
            file,
            out,
            mapping=parse_map(map or []),
            flags=parse_columns(flags or []),
            baseline=baseline,
            fmt=format,
            speculative=parse_columns(speculative or []),
            controls=parse_columns(control or []),
        )
        console.print(f"imported {result.records} records into {result.out}")
        print_summary(load_run(result.out))
    except SpecbenchError as err:
        fail(err)


@app.command("merge")
def merge(
    runs: Annotated[list[Path], typer.Argument(help="run directories, e.g. from several machines")],
    out: Annotated[Path, typer.Option(help="merged run directory")],
    force: Annotated[bool, typer.Option(help="pool different model hashes or engine commits anyway")] = False,
) -> None:
    """Combine runs into one dataset, each keeping its environment."""
    from specbench.report import merge_runs

    try:
        print(merge_runs(runs, out, force=force))
    except SpecbenchError as err:
        fail(err)


@app.command("compare")
def compare(
    run_a: Annotated[Path, typer.Argument(help="the earlier run")],
    run_b: Annotated[Path, typer.Argument(help="the later run")],
) -> None:
    """What changed between two runs of the same matrix, with significance per arm."""
    from specbench.report import compare_runs, format_comparison

    try:
        print(format_comparison(compare_runs(run_a, run_b)))
    except SpecbenchError as err:
        fail(err)


workloads_app = typer.Typer(no_args_is_help=True, help="Workload suites, bundled prompts, datasets.")
app.add_typer(workloads_app, name="workloads")


@workloads_app.command("list")
def workloads_list() -> None:
    """The named suites."""
    from specbench.workloads.suites import SUITES

    for suite in SUITES.values():
        print(f"{suite.name:12} {suite.description}")


@workloads_app.command("show")
def workloads_show(name: Annotated[str, typer.Argument(help="suite name")]) -> None:
    """One suite's defaults."""
    from specbench.workloads.suites import get_suite

    try:
        suite = get_suite(name)
    except SpecbenchError as err:
        fail(err)
    for key, value in vars(suite).items():
        print(f"{key}: {value}")


@workloads_app.command("load")
def workloads_load(
    file: Annotated[Path, typer.Argument(help="dataset file")],
    format: Annotated[
        str, typer.Option("--format", help="spec-bench, speed-bench, sharegpt or jsonl")
    ] = "jsonl",
    skip_bad: Annotated[bool, typer.Option(help="skip malformed rows and count them")] = False,
) -> None:
    """Read a dataset and print its prompt count by category."""
    from specbench.workloads.datasets import count_by_category, load_dataset

    try:
        result = load_dataset(file, format, skip_bad=skip_bad)
    except SpecbenchError as err:
        fail(err)
    for category, count in count_by_category(result.prompts).items():
        print(f"{category:16} {count}")
    print(
        f"{'total':16} {len(result.prompts)}"
        + (f" ({result.skipped} bad rows skipped)" if result.skipped else "")
    )


@app.command("predict")
def predict(
    model: Annotated[
        str | None, typer.Option(help="model preset or path to a Hugging Face config.json")
    ] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU preset, or 'cpu' to probe this machine")] = None,
    method: Annotated[str | None, typer.Option(help="draft, mtp, eagle3, dflash or ngram")] = None,
    quant: Annotated[str, typer.Option(help="quantisation, e.g. Q4_K_M, FP8, BF16")] = "Q4_K_M",
    draft_max: Annotated[int, typer.Option(help="K, drafted tokens per round")] = 4,
    acceptance: Annotated[float | None, typer.Option(help="server-style accepted/drafted ratio")] = None,
    alpha: Annotated[float | None, typer.Option(help="per-token acceptance probability")] = None,
    draft_model: Annotated[str | None, typer.Option(help="draft model preset (method draft)")] = None,
    concurrency: Annotated[int, typer.Option()] = 1,
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
    format: Annotated[str, typer.Option("--format", help="text or json")] = "text",
) -> None:
    """Predict baseline and speculative decode speed from architecture and hardware."""
    import json

    from specbench import theory

    try:
        if calibrate is not None:
            fitted = theory.run_theory(calibrate, fit_arm=fit_arm)
            print(
                json.dumps(fitted.to_dict(), indent=1)
                if format == "json"
                else theory.format_arm_predictions(fitted)
            )
            return
        if not (model and gpu and method):
            fail(SpecbenchError("predict: give --model, --gpu and --method (or --calibrate RUNDIR)"))
        result = theory.predict(
            model,
            gpu,
            quant,
            method,
            draft_max,
            acceptance=acceptance,
            alpha=alpha,
            draft_model=draft_model,
            concurrency=concurrency,
            context=context,
            replay=replay,
        )
    except SpecbenchError as err:
        fail(err)
    print(json.dumps(result.to_dict(), indent=1) if format == "json" else theory.format_prediction(result))


def main() -> None:  # pragma: no cover - console entry
    sys.exit(app())


if __name__ == "__main__":  # pragma: no cover - `python -m specbench.cli`
    app()
