"""Progress reporting for long work, including plain lines where no terminal is attached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specbench.cli import installbar
from specbench.engines.install import BuildOptions
from specbench.run import progress


def test_build_reports_plain_progress_lines_off_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fake_install(options: BuildOptions, jobs: int | None, report: Any) -> Path:
        for step in range(1, 41):
            report(step, 40, f"[{step}/40] cc")
        return Path("/cache/llama-server")

    monkeypatch.setattr(installbar, "install_llamacpp", fake_install)
    assert installbar.build_llama_server(BuildOptions()) == Path("/cache/llama-server")
    err = capsys.readouterr().err
    assert "building llama-server: 20/40" in err and "building llama-server: 40/40" in err


def test_run_progress_prints_one_line_per_cell_off_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with progress.RunProgress(total=4, label="m") as bar:
        bar("cell", {"arm": "draft4", "repeat": 1, "requests": 4})
        bar("request", {"arm": "draft4", "warmup": False, "error": None})
        bar("failed", {"arm": "bad", "reason": "engine did not start", "log_tail": "unknown flag"})
    err = capsys.readouterr().err
    assert "m draft4 · repeat 2: 4 requests; run 0/4 requests (0 %), elapsed 0:00" in err
    assert "arm bad failed: engine did not start" in err and "unknown flag" in err


class FakeClock:
    """Seconds advanced by hand: intervals without waiting (no timing in the assertions)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_ticker_counts_rate_and_eta() -> None:
    clock = FakeClock()
    ticker = progress.Ticker(total=60, every_s=30, clock=clock)
    clock.now += 120
    for _ in range(12):
        ticker.advance()
    # 12 requests in 2 min: 6/min, 48 left → 8 min
    assert ticker.text() == "12/60 requests (20 %), elapsed 2:00, 6.0 requests/min, ETA 8:00"


def test_ticker_is_due_each_interval_or_tenth_not_each_request() -> None:
    clock = FakeClock()
    ticker = progress.Ticker(total=1000, every_s=30, clock=clock)
    due = []
    for i in range(1, 1001):
        clock.now += 0.1  # 100 s in all: three 30 s intervals, ten tenths
        if ticker.advance():
            due.append(i)
    assert 10 <= len(due) <= 14 and due[-1] == 1000
    slow = progress.Ticker(total=10**6, every_s=30, clock=clock)
    clock.now += 31
    assert slow.advance() and not slow.advance()  # the interval elapsed once, then not again


def test_run_progress_prints_counts_rate_and_eta_off_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    clock = FakeClock()
    with progress.RunProgress(total=10, label="m", ticker=progress.Ticker(10, 30, clock)) as bar:
        bar("cell", {"arm": "baseline", "repeat": 0, "requests": 10})
        for _ in range(10):
            clock.now += 6
            bar("request", {"arm": "baseline", "warmup": False, "error": None})
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "m progress:" in ln]
    assert len(lines) == 10  # each tenth of 10 requests
    assert lines[4] == "m progress: 5/10 requests (50 %), elapsed 0:30, 10.0 requests/min, ETA 0:30"


def test_a_restarted_engine_s_failed_requests_count_once(capsys: pytest.CaptureFixture[str]) -> None:
    """The engine died at 8 in flight after 5 of 8 requests: the 3 that failed with it are sent
    again after the restart and must not count twice (issue 40: "53/48 requests (110 %)")."""
    clock = FakeClock()
    ticker = progress.Ticker(8, 30, clock)
    with progress.RunProgress(total=8, label="m", ticker=ticker) as bar:
        bar("cell", {"arm": "draft4", "repeat": 0, "requests": 8})
        for i in range(8):
            bar("request", {"arm": "draft4", "warmup": False, "error": "reset" if i >= 5 else None})
        bar("restart", {"arm": "draft4", "repeat": 0, "exit_code": -9, "hung": ""})
        for _ in range(3):
            bar("request", {"arm": "draft4", "warmup": False, "error": None})
    assert ticker.done == 8
    assert "11/8" not in capsys.readouterr().err
