"""The per-arm summary printed at the end of ``specbench run`` and ``specbench demo``, from the
same :class:`~specbench.analysis.result.Analysis` the report renders."""

from __future__ import annotations

import math
import sys
from collections.abc import Hashable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from specbench.analysis.result import Analysis
from specbench.report.answer import answer_lines, rates_text
from specbench.report.findinggroups import group_findings
from specbench.report.tables import acceptance_text
from specbench.run.console import UNWRAPPED, printable

# Off a terminal (a file, a CI log) nothing is wrapped: a table takes its natural width, a line is
# whole (rich assumes 80 columns there and wrapped verdicts and paths, issue 44).
stdout = Console(
    highlight=False, width=None if sys.stdout.isatty() else UNWRAPPED, soft_wrap=not sys.stdout.isatty()
)


#: Why "×1.10" can sit beside medians of 8.4 and 9.9 tok/s (issue 44: it read as an error).
PAIRED_NOTE = (
    "paired speedup: the geometric mean of each prompt's ratio to the baseline inside each launch "
    "pair, so it can differ from the ratio of the medians beside it (which mix prompts of other lengths)"
)


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def summary_table(result: Analysis, title: str = "") -> Table:
    """The per-arm rows of ``result.summary`` (:func:`specbench.analysis.arm_summary`), the same
    numbers findings.json holds under "summary"."""
    table = Table(title=title or None, title_justify="left")
    labels = {p.name: p.label for p in result.points}
    swept = "point" in result.summary and result.summary["point"].nunique() > 1
    headers = (
        *(("at",) if swept else ()),  # a sweep's rows, one per arm at each level (issue 40)
        "arm",
        "status",
        "requests",
        "TTFT ms",
        "decode tok/s",
        "e2e ms",
        "acceptance",
        "paired speedup",
        _ci_header(result),  # the level each verdict was read at: Holm over arms, or adaptive α′
        "verdict",
    )
    for col in headers:
        # An arm's name is never broken ("ngram-\nmod" read as two arms); the verdict wraps instead.
        table.add_column(
            col, justify="left" if col in ("at", "arm", "status") else "right", no_wrap=col == "arm"
        )
    last = None
    for row in result.summary.to_dict("records"):
        at: tuple[str, ...] = ()
        if swept:
            at = (printable(labels.get(row["point"], row["point"])) if row["point"] != last else "",)
            last = row["point"]
        errors = f" ({row['errors']} err)" if row["errors"] else ""
        speedup = _fmt(row["speedup"], ".2f")
        table.add_row(  # cells are rich markup: names from data are escaped (progress.printable)
            *at,
            printable(row["arm"]),
            printable(row["status"]),
            f"{row['requests']}{errors}",
            _fmt(row["ttft_ms"], ".1f"),
            _fmt(row["decode_tok_s"], ".1f"),
            _fmt(row["e2e_ms"], ".0f"),
            acceptance_text(row["acceptance"], row["acceptance_source"]),
            speedup + ("×" if speedup != "—" else ""),
            _ci_cell(row, several=_ci_header(result) == "CI"),
            printable(row["verdict"]),
        )
    return table


def _levels(result: Analysis) -> list[float]:
    col = result.summary.get("confidence")
    return sorted({float(v) for v in col.dropna()}) if col is not None else []


def _ci_header(result: Analysis) -> str:
    levels = _levels(result) or [result.run.confidence]
    return f"{levels[0] * 100:.3g} % CI" if len(levels) == 1 else "CI"


def _ci_cell(row: Mapping[Hashable, Any], several: bool) -> str:
    """The interval the verdict used; with several levels in one table, each cell names its own."""
    if math.isnan(row["ci_low"]):
        return ""
    level = f" ({row['confidence'] * 100:.3g} %)" if several else ""
    return f"{row['ci_low']:.2f}–{row['ci_high']:.2f}{level}"


def print_summary(result: Analysis, title: str = "") -> None:
    """The answer first (per workload: what to ship, its speedup and interval, per kind of prompt
    where that differs), then the per-arm table, then the findings, one line per code."""
    for line in answer_lines(result):
        stdout.print(printable(line), highlight=False, soft_wrap=True)
    stdout.print(summary_table(result, title))
    rates = rates_text([str(r) for r in result.summary.get("error_rate", []) if r])
    if rates:
        stdout.print("speedup verdicts: " + printable(rates), highlight=False, soft_wrap=True)
        stdout.print(PAIRED_NOTE, highlight=False, soft_wrap=True)
    groups = group_findings(result.findings)
    if not groups:
        stdout.print("findings: none")
    for g in groups:  # one line per code, with every arm it names (issue 28.1)
        colour = {"error": "red", "warning": "yellow"}.get(g.severity, "cyan")
        rest = g.line.removeprefix(g.code)
        stdout.print(f"[{colour}]{g.code}[/{colour}]{printable(rest)}", highlight=False, soft_wrap=True)
