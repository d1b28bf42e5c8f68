"""Progress reporting for long work, including plain lines where no terminal is attached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specbench import progress
from specbench.engines.install import BuildOptions


def test_build_reports_plain_progress_lines_off_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fake_install(options: BuildOptions, jobs: int | None, report: Any) -> Path:
        for step in range(1, 41):
            report(step, 40, f"[{step}/40] cc")
        return Path("/cache/llama-server")

    monkeypatch.setattr(progress, "install_llamacpp", fake_install)
    assert progress.build_llama_server(BuildOptions()) == Path("/cache/llama-server")
    err = capsys.readouterr().err
    assert "building llama-server: 20/40" in err and "building llama-server: 40/40" in err


def test_run_progress_prints_one_line_per_cell_off_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with progress.RunProgress(total=4, label="m") as bar:
        bar("cell", {"arm": "draft4", "repeat": 1, "requests": 4})
        bar("request", {"arm": "draft4", "warmup": False, "error": None})
        bar("failed", {"arm": "bad", "reason": "engine did not start", "log_tail": "unknown flag"})
    err = capsys.readouterr().err
    assert "m draft4 · repeat 2: 4 requests (0/4 done)" in err
    assert "arm bad failed: engine did not start" in err and "unknown flag" in err
