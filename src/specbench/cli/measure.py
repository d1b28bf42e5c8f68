"""``specbench run``, ``tune``, ``demo`` and ``summary``: commands that measure."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from specbench.cli._app import EXIT_CODES, app, interrupt_on_signals
from specbench.errors import ConfigError, SpecbenchError
from specbench.matrix.config import LOOPBACK
from specbench.run.console import console, printable
from specbench.store.outdir import out_path

if TYPE_CHECKING:
    from specbench.analysis.result import Analysis
    from specbench.run.runner import Runner


def _finish_partial(out: Path, no_report: bool, result: Analysis) -> None:
    """What a run with a failed arm still measured is reported; a report that cannot be made
    (nothing measured) is not an error of its own: the run's problem is the one to show."""
    from specbench import api

    try:
        print("\n".join(api.finish_lines(out, report=not no_report, analysis=result)))
    except SpecbenchError as err:
        console.print(f"[yellow]no report: {printable(err)}", soft_wrap=True)


def _announce(runner: Runner) -> None:
    """Before anything is launched: exposure, repairs, the plan; signals act like Ctrl-C from here."""
    if runner.matrix.host not in LOOPBACK:
        console.print(
            f"[yellow]warning: engines listen on {runner.matrix.host}, reachable from other machines"
        )
    for line in runner.store.repairs:
        console.print(f"[yellow]repaired: {printable(line)}", soft_wrap=True)
    interrupt_on_signals()
    console.print(
        printable("\n".join(runner.plan.lines() if runner.plan else ()), markup=False),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command("run", epilog=EXIT_CODES)
def run_command(
    matrix: Annotated[Path, typer.Argument(metavar="MATRIX", help="matrix YAML file")],
    out_text: Annotated[str, typer.Option("--out", metavar="PATH", help="run directory")] = "runs/latest",
    # Each switch names only its on form: "--no-dry-run" and the like are offered by typer's
    # default pairs, and mean nothing here.
    resume: Annotated[bool, typer.Option("--resume", help="continue a run: skip completed requests")] = False,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="with --resume: run the arms that failed again")
    ] = False,
    allow_remote_host: Annotated[
        bool,
        typer.Option(
            "--allow-remote-host", help="let a matrix 'host:' other than loopback expose the engine"
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the plan and the commands; launch nothing")
    ] = False,
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
    from specbench import api
    from specbench.analysis import analyse_dir
    from specbench.report.summary import print_summary
    from specbench.run.attach import parse_arm_args
    from specbench.run.progress import RunProgress

    out = out_path(out_text)
    try:
        _check_attach_flags(attach, arm, arm_args, executor)
        if dry_run:
            plan = api.plan_run(
                matrix,
                out,
                llama_server,
                resume=resume,
                retry_failed=retry_failed,
                allow_remote_host=allow_remote_host,
            )
            print(printable("\n".join(plan.lines()), markup=False) + "\ncommands:")
            for name, argv in plan.commands.items():
                # quoted: a --speculative-config JSON pastes as is
                print(printable(f"{name}: {shlex.join(argv)}", markup=False))
            return
        api.run_matrix(
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
            executor=executor,
            address=address,
            on_ready=_announce,
            progress=lambda runner: RunProgress(runner.total_todo(), matrix.stem),
        )
        result = analyse_dir(out)  # once: the summary and the report show the same numbers
        print_summary(result)
        incomplete = api.run_incomplete(out, result.run.records)
        if incomplete is not None:  # after the summary: the reason is the console's last line
            _finish_partial(out, no_report, result)
            raise incomplete
        print("\n".join(api.finish_lines(out, report=not no_report, analysis=result)))
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: records so far are in {printable(out)}; continue with --resume")
        raise typer.Exit(130) from None


def _check_attach_flags(attach: str | None, arm: str | None, arm_args: str | None, executor: str) -> None:
    """Flags that only mean something with --attach are refused without it, not ignored."""
    if arm_args is not None and not attach:
        raise ConfigError("--arm-args: only with --attach (a launched arm's flags are in the matrix)")
    if arm is not None and not attach:
        raise ConfigError("--arm: only with --attach (a launched run measures every arm of the matrix)")
    if attach and executor != "local":
        raise ConfigError("--attach measures one running server: use the default --executor local")


@app.command("tune", epilog=EXIT_CODES)
def tune_command(
    matrix: Annotated[Path, typer.Argument(help="matrix YAML file with a tune: block")],
    out_text: Annotated[
        str, typer.Option("--out", metavar="PATH", help="tune.json and a run directory per workload")
    ] = "runs/tune",
    resume: Annotated[
        bool, typer.Option("--resume", help="continue an interrupted tune where it stopped")
    ] = False,
    llama_server: Annotated[str | None, typer.Option(help="llama-server binary to use")] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="print the plan: candidates, what the budget admits, the time"),
    ] = False,
) -> None:
    """Which speculative settings to ship: race the tune block's candidates, fewest requests first."""
    from specbench import api
    from specbench.tune.execute import answer_lines

    out = out_path(out_text)
    if dry_run:
        print("\n".join(api.plan_tune(matrix, out, resume=resume, llama_server=llama_server).lines()))
        return

    def say(text: str) -> None:
        console.print(printable(text, markup=False), markup=False, highlight=False, soft_wrap=True)

    def observe(event: str, info: dict[str, Any]) -> None:
        if event == "cell":
            say(f"  round {info['repeat'] + 1}: {info['arm']}")  # 1-based, as the round's own line
        elif event == "failed":
            say(f"  {info['arm']} failed: {info['reason']}")

    try:
        interrupt_on_signals()
        results = api.tune(matrix, out, resume=resume, llama_server=llama_server, say=say, observe=observe)
        for result in results:
            print("\n".join(answer_lines(result)))
        print(f"tune log: {out / 'tune.json'}")
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: the tune so far is in {printable(out)}; continue with --resume")
        raise typer.Exit(130) from None


@app.command("summary")
def summary(run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="run directory")]) -> None:
    """Print the per-arm summary of a run directory."""
    from specbench.analysis import analyse_dir
    from specbench.report.summary import print_summary

    print_summary(analyse_dir(run_dir))


@app.command("demo")
def demo(
    out_text: Annotated[
        str, typer.Option("--out", metavar="PATH", help="where the demo's runs go")
    ] = "runs/demo",
    llama_server: Annotated[
        str | None,
        typer.Option(help="llama-server binary to use (default: the cached build, made if missing)"),
    ] = None,
    repeats: Annotated[int, typer.Option(help="repeats per arm")] = 3,
    real: Annotated[bool, typer.Option(help="also run the real model (Gemma 3 270M) on real text")] = True,
) -> None:
    """The embedded default: build/find llama-server, make lab models, run a matrix, summarise."""
    from specbench.cli.demo import run_demo

    out = out_path(out_text)
    try:
        interrupt_on_signals()
        run_demo(out, llama_server=llama_server, repeats=repeats, real=real)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: partial runs are in {printable(out)}; rerun to resume")
        raise typer.Exit(130) from None
