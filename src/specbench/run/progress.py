"""Progress for long work: the current cell, requests done/total, rate and ETA — as a live
rich bar on a terminal, as plain lines at an interval in logs and pipes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from specbench.run.console import console, printable


def make_progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,  # logs get the plain lines below, not a bar's last frame
    )


def clock_text(seconds: float) -> str:
    """0:34, 12:05, 1:02:03."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Ticker:
    """Counts, rate and ETA as plain text, due every ``every_s`` seconds or each tenth of the
    total, whichever comes first: a log gets a line often enough to follow, never one per request.
    The rate is over the whole run so far, engine launches included, so the ETA is wall clock."""

    def __init__(
        self, total: int, every_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.total, self.every_s, self.clock = total, every_s, clock
        self.done = 0
        self.start = self.last = clock()
        self.last_tenth = 0

    def advance(self) -> bool:
        """Count one request; True when a line is due."""
        self.done += 1
        now, tenth = self.clock(), 10 * self.done // max(self.total, 1)
        due = now - self.last >= self.every_s or tenth > self.last_tenth or self.done == self.total
        if due:
            self.last, self.last_tenth = now, tenth
        return due

    def text(self) -> str:
        elapsed = self.clock() - self.start
        share = f" ({100 * self.done / self.total:.0f} %)" if self.total else ""
        line = f"{self.done}/{self.total} requests{share}, elapsed {clock_text(elapsed)}"
        if self.done and elapsed > 0:
            rate = self.done / elapsed
            left = clock_text(max(self.total - self.done, 0) / rate)
            line += f", {rate * 60:.1f} requests/min, ETA {left}"
        return line


class RunProgress:
    """Observer for :class:`specbench.run.runner.Runner`: one bar over all measured requests."""

    def __init__(self, total: int, label: str = "", ticker: Ticker | None = None) -> None:
        self.progress = make_progress()
        self.label = label
        self.task = self.progress.add_task(f"{label} starting", total=total)
        self.ticker = ticker or Ticker(total)
        # Requests of the current attempt that failed: a crashed engine's are sent again after
        # its restart, and must not count twice (issue 40: "53/48 requests (110 %)").
        self.failed_here = 0

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(
        self, exc: type[BaseException] | None, val: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.progress.stop()

    def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event in ("cell", "restart"):
            self._rewind(self.failed_here if event == "restart" else 0)
        if event == "cell":
            node = f" @ {info['node']}" if info.get("node") else ""
            where = printable(f"{self.label} {info['arm']} · repeat {info['repeat'] + 1}{node}", markup=False)
            self.progress.update(self.task, description=escape(where))  # the bar reads markup
            if not console.is_terminal:  # logs and pipes get no live bar: plain lines instead
                line = f"{where}: {info['requests']} requests; run {self.ticker.text()}"
                console.print(line, markup=False, highlight=False, soft_wrap=True)
        elif event == "request" and not info["warmup"]:
            self.failed_here += 1 if info.get("error") else 0
            self.progress.advance(self.task)
            if self.ticker.advance() and not console.is_terminal:
                line = f"{self.label} progress: {self.ticker.text()}".strip()
                console.print(line, markup=False, highlight=False, soft_wrap=True)
        elif event == "decided":
            done = (
                "decided" if info["why"] in ("faster", "slower", "equivalent") else f"stopped ({info['why']})"
            )
            line = f"arm {info['arm']} {done} after {info['launches']} launches: {info['evidence']}"
            console.print(printable(line, markup=False), markup=False)
        elif event in ("pace", "model_changed"):  # one line each: run/pace.py, run/servedfiles.py
            console.print(f"[yellow]{printable(info['text'])}", highlight=False, soft_wrap=True)
        elif event in ("retry", "confound"):
            console.print(f"[yellow]{event}: {printable(info)}", highlight=False)
        elif event == "restart":
            console.print(f"[yellow]{printable(restart_text(info))}")
        elif event == "failed":
            console.print(f"[red]arm {printable(info['arm'])} failed: {printable(info['reason'])}")
            if info.get("log_tail"):
                console.print(printable(info["log_tail"], markup=False), markup=False, highlight=False)

    def _rewind(self, n: int) -> None:
        """Take back ``n`` counted requests (they will be sent again) and start a new attempt."""
        if n:
            self.progress.advance(self.task, -n)
            self.ticker.done = max(0, self.ticker.done - n)
        self.failed_here = 0


def restart_text(info: dict[str, Any]) -> str:
    """Why a cell's engine is launched again: it exited by itself, or it stopped answering and
    specbench stopped it (its exit code, -9 or -15, is then specbench's signal, not a crash)."""
    code = info.get("exit_code")
    if info.get("hung"):
        why = f"engine stopped answering ({info['hung']}); specbench stopped it (exit code {code})"
        return f"{info['arm']}: {why}; restarting once"
    return f"{info['arm']}: engine exited (code {code}); restarting once"
