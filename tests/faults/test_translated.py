"""Third-party errors are translated where they enter: a broken binary is a SpecbenchError with
its exit code, a broken nvidia-smi leaves the GPUs "unknown" instead of stopping the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specbench.engines.llamacpp import LlamaCppEngine
from specbench.errors import EngineStartError
from specbench.store import rundir as store


def _broken_executable(folder: Path, name: str) -> Path:
    """An executable whose interpreter does not exist: exec fails with OSError."""
    path = folder / name
    path.write_text("#!/nonexistent/interpreter\n")
    path.chmod(0o755)
    return path


def test_a_llama_server_that_cannot_run_is_an_engine_start_error(tmp_path: Path) -> None:
    binary = _broken_executable(tmp_path, "llama-server")
    with pytest.raises(EngineStartError, match="llama-server --version"):
        LlamaCppEngine(binary).version()
    assert EngineStartError("x").exit_code == 4


def test_a_broken_nvidia_smi_leaves_the_gpus_unrecorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_executable(tmp_path, "nvidia-smi")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    env = store.environment()
    assert "gpus" not in env  # the report says "unknown", never "none detected"
    assert env["cpu_count_logical"] >= 1
