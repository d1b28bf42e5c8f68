"""``render_report``: every report file, recomputed from the run directory alone.

Nothing is re-run or re-measured: the raw records, cells, manifest and env written during the
run are the only input, so a report can be rebuilt (or audited) on any machine, any time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from specbench.analysis import load_run
from specbench.analysis.result import Analysis, analyse
from specbench.errors import ConfigError
from specbench.report.answer import answer_dict, sweep_dict
from specbench.report.envfile import env_blocks
from specbench.report.findinggroups import group_findings
from specbench.report.page import html, markdown
from specbench.report.plots import write_plots
from specbench.report.sections import report_blocks

FORMATS = ("md", "html", "json", "csv")


def jsonable(obj: Any) -> Any:
    """Strict JSON values: NaN / inf → null, numpy scalars → Python, tuples → lists."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def findings_json(c: Analysis) -> dict[str, Any]:
    """findings.json: findings, per-arm summary, comparisons, and what the report derived."""
    out: dict[str, Any] = jsonable(
        {
            "answer": [answer_dict(a, c.run.baseline) for a in c.answers],
            "findings_grouped": [g.to_dict() for g in group_findings(c.findings)],
            "findings": [f.to_dict() for f in c.findings],
            "summary": c.summary.to_dict("records"),
            "comparisons": {arm: asdict(cmp) for arm, cmp in c.comparisons.items()},
            # Every (arm, operating point, measure) comparison (issue 40): a sweep's answer is
            # these, level by level; "comparisons" (per arm) is empty where the run sweeps.
            "operating_points": c.operating_points.to_dict("records"),
            "sweeps": [sweep_dict(s) for s in c.sweeps],
            "by_workload": c.by_workload.to_dict("records"),
            "decisions": [d.to_dict() for d in c.decisions],
            "crossovers": c.crossovers.to_dict("records"),
            "wall_clock_winners": c.winners.to_dict("records"),
            "goodput": {
                "slo": c.goodput.slo.model_dump() if c.goodput.slo is not None else None,
                "per_arm": c.goodput.per_arm.to_dict("records"),
                "rate_sweep": c.goodput.table.to_dict("records"),
                "rate_sweep_summary": c.goodput.summary.to_dict("records"),
            },
        }
    )
    return out


def _write_csv(c: Analysis, out: Path) -> list[Path]:
    summary, requests = out / "summary.csv", out / "requests.parquet"
    c.by_workload.to_csv(summary, index=False)
    frame = c.detail.copy()
    frame["machine"] = frame["machine"].astype("string")
    frame.to_parquet(requests, index=False)
    return [summary, requests]


def _check_formats(formats: Sequence[str]) -> None:
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ConfigError(f"report format {', '.join(unknown)} is not one of {', '.join(FORMATS)}")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _documents(c: Analysis, run_dir: Path, formats: Sequence[str]) -> list[Path]:
    """report.md / report.html / findings.json, with the plots the first two show."""
    out = run_dir / "report"
    plots = write_plots(c, out / "plots") if {"md", "html"} & set(formats) else []
    blocks = report_blocks(c, run_dir, plots)
    title = f"specbench report: {run_dir.name}"
    written = [path for _, path in plots]
    if "md" in formats:
        written.append(_write(out / "report.md", markdown.render(blocks, out)))
    if "html" in formats:
        page = html.render([*blocks, *env_blocks(run_dir, c.run.manifest)], title)
        written.append(_write(out / "report.html", page))
    if "json" in formats:
        text = json.dumps(findings_json(c), indent=1, allow_nan=False)
        written.append(_write(out / "findings.json", text))
    return written


def render_report(
    run_dir: Path, formats: Sequence[str] = FORMATS, analysis: Analysis | None = None
) -> list[Path]:
    """Write ``run_dir/report/``: report.md, report.html, findings.json, summary.csv +
    requests.parquet (per ``formats``), plots/*.png for md/html, and BENCHMARK_ENV.md always.
    ``analysis``: the run's already computed :class:`Analysis` (``analyse`` runs otherwise).
    Returns the paths written. Raises StoreError if ``run_dir`` is not a run directory and
    ConfigError for an unknown format. ``run``: the directory already loaded by the caller (the
    end of ``specbench run`` has it from the summary), so records are not parsed again."""
    _check_formats(formats)
    run = load_run(run_dir) if analysis is None else analysis.run
    out = run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    written = [_write(out / "BENCHMARK_ENV.md", markdown.render(env_blocks(run_dir, run.manifest), out))]
    c = analysis if analysis is not None else analyse(run, run_dir)
    written += _documents(c, run_dir, formats)
    return written + (_write_csv(c, out) if "csv" in formats else [])
