"""Where specbench keeps things that outlive a run: engine builds and lab models."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$SPECBENCH_CACHE``, else ``$XDG_CACHE_HOME/specbench``, else ``~/.cache/specbench``.

    Kept outside the repository so CI builds llama-server once per machine.
    """
    explicit = os.environ.get("SPECBENCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "specbench"
