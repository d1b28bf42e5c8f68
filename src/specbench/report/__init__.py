"""Reports from a run directory: Markdown, self-contained HTML, JSON, CSV/Parquet, plots and
BENCHMARK_ENV.md, each rendered from one :class:`specbench.analysis.result.Analysis`; merging runs
from several machines; the text form of a run-vs-run comparison.

Step 9, the last of the flow matrix → workloads → run → executors → engines → transport → client →
store → analysis (theory) → report: takes in an ``Analysis`` and hands on files.

Public API::

    render_report(run_dir, formats=("md", "html", "json", "csv"), analysis=None) -> list[Path]
    merge_runs(runs, out, force=False) -> Path
    format_comparison(specbench.analysis.compare.compare_runs(a, b)) -> str

See docs/report.md for what each file holds and the decision rule.
"""

from __future__ import annotations

from specbench.report.compare import format_comparison
from specbench.report.merge import merge_runs
from specbench.report.render import FORMATS, render_report

__all__ = ["FORMATS", "format_comparison", "merge_runs", "render_report"]
