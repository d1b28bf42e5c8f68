"""``specbench report``, ``import``, ``merge`` and ``compare``: commands over run directories."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from specbench.cli._app import app
from specbench.run.console import console


@app.command("report")
def report(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="run directory")],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="comma-separated: md, html, json, csv; json alone also prints findings.json on stdout",
        ),
    ] = "md,html,json,csv",
) -> None:
    """Render the report from the run directory alone (nothing is re-run); print the files
    written, or with --format json the findings themselves (for jq and scripts)."""
    from specbench.report import render_report

    formats = [f.strip() for f in format.split(",") if f.strip()]
    paths = render_report(run_dir, formats)
    if not (run_dir / "env.json").is_file() and not (run_dir / "envs").is_dir():
        console.print(  # stderr: with --format json, stdout is the JSON document alone
            f"[yellow]warning: {escape(str(run_dir / 'env.json'))} is missing: the environment is "
            "reported as unknown",
            soft_wrap=True,
        )
    if formats == ["json"]:
        print(next(p for p in paths if p.name == "findings.json").read_text())
        return
    for path in paths:
        print(path)


@app.command("import")
def import_(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="per-request CSV, JSON or JSONL from another tool")
    ],
    out_text: Annotated[str, typer.Option("--out", metavar="PATH", help="run directory to create")],
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
    from specbench.analysis import analyse_dir
    from specbench.importer import import_file, parse_columns, parse_map
    from specbench.report.summary import print_summary
    from specbench.store.outdir import out_path

    result = import_file(
        file,
        out_path(out_text),
        mapping=parse_map(map or []),
        flags=parse_columns(flags or []),
        baseline=baseline,
        fmt=format,
        speculative=parse_columns(speculative or []),
        controls=parse_columns(control or []),
    )
    console.print(f"imported {result.records} records into {result.out}")
    print_summary(analyse_dir(result.out))


@app.command("merge")
def merge(
    runs: Annotated[
        list[Path], typer.Argument(metavar="RUNS", help="run directories, e.g. from several machines")
    ],
    out_text: Annotated[str, typer.Option("--out", metavar="PATH", help="merged run directory")],
    force: Annotated[
        bool,
        typer.Option("--force", help="pool runs of different models, prompts, workloads or engines anyway"),
    ] = False,
) -> None:
    """Combine runs into one dataset, each keeping its environment; refuses runs whose prompts,
    workloads, arm arguments or engine differ (naming each difference) unless --force."""
    from specbench.report.compat import merge_checked
    from specbench.store.outdir import out_path

    merged, warnings = merge_checked(runs, out_path(out_text), force=force)
    for line in warnings:
        console.print(f"[yellow]{escape(line)}", soft_wrap=True)
    print(merged)


@app.command("compare")
def compare(
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="the earlier run")],
    run_b: Annotated[Path, typer.Argument(metavar="RUN_B", help="the later run")],
) -> None:
    """What changed between two runs of the same matrix, with significance per arm; a baseline
    that moved and each run's findings follow the table."""
    from specbench.analysis.compare import compare_runs
    from specbench.report import format_comparison
    from specbench.report.compat import compare_lines
    from specbench.run.console import UNWRAPPED

    df = compare_runs(run_a, run_b)
    # Off a terminal the table is never wrapped (a log keeps each row whole, issue 44).
    print(format_comparison(df, width=150 if sys.stdout.isatty() else UNWRAPPED))
    print("\n".join(compare_lines(run_a, run_b, df)))
