"""``specbench compare A B`` as text: the comparison computed by
:func:`specbench.analysis.compare.compare_runs`, one table row per arm, and the verdict rule."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

NOISE_NOTE = (
    "verdict: faster/slower when the 95 % CI clears ±1 % around ×1.00, equivalent when it lies inside "
    "that band, undetermined otherwise (~N: launches per run that would settle it at the observed noise)"
)


def _x(value: Any, spec: str = ".3f") -> str:
    return f"×{value:{spec}}" if pd.notna(value) else "—"


def format_comparison(df: pd.DataFrame, width: int = 150) -> str:
    """The comparison as a plain-text table for the terminal (no colour codes), with the rule."""
    metric = df.attrs.get("metric", "decode_tok_s")
    table = Table(title=f"{metric}: b vs a ({df.attrs.get('b', 'b')} vs {df.attrs.get('a', 'a')})",
                  title_justify="left")  # fmt: skip
    points = bool(df["point"].fillna("").astype(str).str.len().gt(0).any()) if "point" in df else False
    cols = (*(("at",) if points else ()), "arm", "median a", "median b", "b vs a", "95 % CI", "verdict",
            "speedup a → b", "change (95 % CI)", "speedup verdict", "args changed")  # fmt: skip
    for col in cols:
        left = col in ("at", "arm", "verdict", "speedup verdict")
        table.add_column(col, justify="left" if left else "right")
    for r in df.to_dict("records"):
        at = (str(r["point"]) if pd.notna(r["point"]) else "",) if points else ()
        ci = f"{r['ci_low']:.3f}–{r['ci_high']:.3f}" if pd.notna(r["ci_low"]) else "—"
        medians = tuple(f"{r[k]:.2f}" if pd.notna(r[k]) else "—" for k in ("median_a", "median_b"))
        speedups = (
            f"{_x(r['speedup_a'], '.2f')} → {_x(r['speedup_b'], '.2f')}" if pd.notna(r["speedup_a"]) else "—"
        )
        change = (
            f"{_x(r['speedup_change'])} ({r['speedup_ci_low']:.3f}–{r['speedup_ci_high']:.3f})"
            if pd.notna(r["speedup_change"])
            else "—"
        )
        table.add_row(
            *at, str(r["arm"]), *medians, _x(r["ratio"]), ci, str(r["verdict"]), speedups, change,
            str(r["speedup_verdict"]) if pd.notna(r["speedup_verdict"]) else "—",
            "yes" if r["args_changed"] else "no",
        )  # fmt: skip
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False)
    for line in df.attrs.get("warnings", []):
        console.print(line)
    console.print(table)
    console.print(NOISE_NOTE)
    return buffer.getvalue()
