"""``python -m specbench.cli``."""

from __future__ import annotations

from specbench.cli import app

app()
