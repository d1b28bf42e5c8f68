"""Reports from a run directory: Markdown, self-contained HTML, JSON, CSV/Parquet, plots and
BENCHMARK_ENV.md; merging runs from several machines; comparing two runs.

Public API::

    render_report(run_dir, formats=("md", "html", "json", "csv")) -> list[Path]
    merge_runs(runs, out, force=False) -> Path
    compare_runs(a, b, metric="decode_tok_s") -> pandas.DataFrame
    format_comparison(df) -> str

See docs/report.md for what each file holds and the decision rule.
"""

from __future__ import annotations

from specbench.report.compare import compare_runs, format_comparison
from specbench.report.merge import merge_runs
from specbench.report.render import FORMATS, render_report

__all__ = ["FORMATS", "compare_runs", "format_comparison", "merge_runs", "render_report"]
