"""The metamorphic tests' one measured run of the designed experiment (design.py), shared by every
test that transforms its data or compares a re-measured run with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import design


@pytest.fixture(scope="session")
def reference(llama_server: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The designed experiment as written, 4 repeats: its run directory."""
    pair = design.pair()
    folder = tmp_path_factory.mktemp("reference") / "matrix"
    return design.run(folder, llama_server, pair.target, design.arms(pair.draft, pair.target))
