"""Command line: parse, build config, call the library, map errors to exit codes. Nothing else.

``app`` lives in :mod:`specbench.cli._app` (with the one error boundary); each module below adds
its commands to it when imported, in the order ``--help`` lists them: measuring first
(:mod:`measure`: run, tune, demo, summary), then :mod:`results` (report, import, merge,
compare), :mod:`workloads` (workloads, predict) and :mod:`assets` (engine, lab, models). Above the
flow: ``specbench run`` enters it through :func:`specbench.api.run_matrix` (the matrix file read
by ``matrix``, step 1; ``run.prepare`` and the runner, step 3), then asks
:func:`specbench.api.finish_lines` for the summary and the report (``analysis`` → ``report``).
"""

# ruff: noqa: I001  (import order is the order of the commands in --help)
from __future__ import annotations

from specbench.cli import measure, results, workloads, assets
from specbench.cli._app import app, main

__all__ = ["app", "assets", "main", "measure", "results", "workloads"]
