"""Command line: parse, build config, call the library, map errors to exit codes. Nothing else.

``app`` lives in :mod:`specbench.cli._app` (with the one error boundary); each module below adds
its commands to it when imported, in the order ``--help`` lists them: measuring first.
"""

# ruff: noqa: I001  (import order is the order of the commands in --help)
from __future__ import annotations

from specbench.cli import run, results, workloads, assets
from specbench.cli._app import app, main

__all__ = ["app", "assets", "main", "results", "run", "workloads"]
