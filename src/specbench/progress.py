"""Rich progress for long work: the current cell, requests done/total, ETA."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from specbench.engines.install import BuildOptions, install_llamacpp

console = Console(stderr=True)


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
    )


class RunProgress:
    """Observer for :class:`specbench.runner.Runner`: one bar over all measured requests."""

    def __init__(self, total: int, label: str = "") -> None:
        self.progress = make_progress()
        self.label = label
        self.task = self.progress.add_task(f"{label} starting", total=total)

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(
        self, exc: type[BaseException] | None, val: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.progress.stop()

    def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "cell":
            node = f" @ {info['node']}" if info.get("node") else ""
            where = f"{self.label} {info['arm']} · repeat {info['repeat'] + 1}{node}"
            self.progress.update(self.task, description=where)
            if not console.is_terminal:  # logs and pipes get no live bar: one line per cell instead
                task = self.progress.tasks[0]
                console.print(
                    f"{where}: {info['requests']} requests ({int(task.completed)}/{task.total} done)"
                )
        elif event == "request" and not info["warmup"]:
            self.progress.advance(self.task)
        elif event == "decided":
            done = (
                "decided" if info["why"] in ("faster", "slower", "equivalent") else f"stopped ({info['why']})"
            )
            console.print(f"arm {info['arm']} {done} after {info['launches']} launches: {info['evidence']}")
        elif event in ("retry", "confound"):
            console.print(f"[yellow]{event}: {info}", highlight=False)
        elif event == "restart":
            console.print(f"[yellow]{info['arm']}: engine exited (code {info['exit_code']}); restarting once")
        elif event == "failed":
            console.print(f"[red]arm {info['arm']} failed: {info['reason']}")
            if info.get("log_tail"):
                console.print(info["log_tail"], markup=False, highlight=False)


def build_llama_server(options: BuildOptions, jobs: int | None = None) -> Path:
    """Build llama-server with a progress bar (plain lines every 20 steps in logs and pipes)."""
    with make_progress() as bar:
        task = bar.add_task("building llama-server", total=None)

        def report(done: int, total: int, _line: str) -> None:
            bar.update(task, completed=done, total=total)
            if not console.is_terminal and (done % 20 == 0 or done == total):
                console.print(f"building llama-server: {done}/{total}")

        return install_llamacpp(options, jobs, report)
