"""Several workloads in one run: one table sets them side by side.

Speculation's value flips with the workload (entropy, lengths, concurrency), so a run that names
``natural`` and ``single`` answers two questions: each gets its own decision, crossover and
per-arm table (computed on its requests only,
:func:`specbench.analysis.rundata.for_workload`), and the workload-by-arm table shows where an
arm helps and where it hurts.
"""

from __future__ import annotations

import pandas as pd

from specbench.report import tables


def speedup_table(
    summary: pd.DataFrame, workloads: list[str], arms: list[str], baseline: str
) -> pd.DataFrame:
    """Rows: operating points (``workloads``: their names; a workload without a sweep is one);
    columns: non-baseline arms; cells: decode speedup vs the baseline with the CI its verdict
    used and the verdict, from :func:`specbench.analysis.tables.frames.summary_frame`."""
    shown = [a for a in arms if a != baseline and a in set(summary["arm"])]
    rows = []
    for workload in workloads:
        sub = summary[summary["point"] == workload]
        by_arm = {str(r["arm"]): r for r in sub.to_dict("records")}
        row = {"workload": workload}
        for arm in shown:
            r = by_arm.get(arm)
            row[arm] = "—" if r is None else _speedup(r)
        rows.append(row)
    return pd.DataFrame(rows, columns=["workload", *shown])


def _speedup(row: dict[object, object]) -> str:
    ratio = tables.fmt_ci(row["speedup"], row["speedup_ci_low"], row["speedup_ci_high"], ".2f")  # type: ignore[arg-type]
    verdict = str(row.get("verdict") or "")
    return f"×{ratio} {verdict}".strip() if ratio != "—" else "—"
