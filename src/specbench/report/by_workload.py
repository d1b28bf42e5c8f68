"""Several workloads in one run: each is judged on its own, and one table sets them side by side.

Speculation's value flips with the workload (entropy, lengths, concurrency), so a run that names
``natural`` and ``single`` answers two questions: each gets its own decision, crossover and
per-arm table, computed on its requests only, and the workload-by-arm table shows where an arm
helps and where it hurts.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from specbench.analysis import RunData
from specbench.report import tables


def workload_names(run: RunData) -> list[str]:
    """The run's workloads in the matrix's order (then any others the records name)."""
    matrix = run.manifest.get("matrix") or {}
    listed = [str(w.get("name") or w.get("suite")) for w in matrix.get("workloads") or []]
    seen = [str(w) for w in run.df["workload"].unique()] if "workload" in run.df else []
    return [w for w in listed if w in seen] + [w for w in seen if w not in listed]


def only(run: RunData, workload: str) -> RunData:
    """``run`` restricted to one workload's measured requests and records."""
    return replace(
        run,
        df=run.df[run.df["workload"] == workload],
        records=[r for r in run.records if str(r.get("workload")) == workload],
    )


def speedup_table(
    summary: pd.DataFrame, workloads: list[str], arms: list[str], baseline: str
) -> pd.DataFrame:
    """Rows: workloads; columns: non-baseline arms; cells: decode speedup vs the baseline with
    its 95 % CI and verdict, from :func:`specbench.report.tables.summary_frame`."""
    shown = [a for a in arms if a != baseline and a in set(summary["arm"])]
    rows = []
    for workload in workloads:
        sub = summary[summary["workload"] == workload]
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
