"""The per-arm summary printed at the end of ``specbench run`` and ``specbench demo``, from the
same :class:`~specbench.analysis.result.Analysis` the report renders."""

from __future__ import annotations

import math
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from specbench.analysis.result import Analysis
from specbench.report.tables import acceptance_text

# Wide enough for the table when piped to a file or CI log (rich assumes 80 columns there).
stdout = Console(highlight=False, width=None if sys.stdout.isatty() else 150)


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def summary_table(result: Analysis, title: str = "") -> Table:
    """The per-arm rows of ``result.summary`` (:func:`specbench.analysis.arm_summary`), the same
    numbers findings.json holds under "summary"."""
    run = result.run
    table = Table(title=title or None, title_justify="left")
    headers = (
        "arm",
        "status",
        "requests",
        "TTFT ms",
        "decode tok/s",
        "e2e ms",
        "acceptance",
        "speedup",
        f"{run.confidence * 100:.3g} % CI",  # 95 %, or the sequential rule's level (repeats: auto)
        "verdict",
    )
    for col in headers:
        table.add_column(col, justify="left" if col in ("arm", "status") else "right")
    for row in result.summary.to_dict("records"):
        errors = f" ({row['errors']} err)" if row["errors"] else ""
        speedup = _fmt(row["speedup"], ".2f")
        table.add_row(
            str(row["arm"]),
            str(row["status"]),
            f"{row['requests']}{errors}",
            _fmt(row["ttft_ms"], ".1f"),
            _fmt(row["decode_tok_s"], ".1f"),
            _fmt(row["e2e_ms"], ".0f"),
            acceptance_text(row["acceptance"], row["acceptance_source"]),
            speedup + ("×" if speedup != "—" else ""),
            "" if math.isnan(row["ci_low"]) else f"{row['ci_low']:.2f}–{row['ci_high']:.2f}",
            str(row["verdict"]),
        )
    return table


def print_summary(result: Analysis, title: str = "") -> None:
    """The per-arm table, then every finding, most serious first."""
    stdout.print(summary_table(result, title))
    found = result.findings
    if not found:
        stdout.print("findings: none")
    for f in found:
        colour = {"error": "red", "warning": "yellow"}.get(f.severity, "cyan")
        stdout.print(f"[{colour}]{f.code}[/{colour}] {f.evidence}", highlight=False)
