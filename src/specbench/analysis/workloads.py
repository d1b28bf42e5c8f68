"""Several workloads in one run: each is judged on its own requests only.

Speculation's value flips with the workload (entropy, lengths, concurrency), so a run that names
``natural`` and ``single`` answers two questions; these helpers give each its own slice of the run.
"""

from __future__ import annotations

from dataclasses import replace

from specbench.analysis.run import RunData


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
