"""Installing an engine on the console: a bar for a counted build (plain lines every 20 steps in
logs and pipes), a line prefixed with the engine's kind for the rest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from specbench.engines.install import BuildOptions, install_llamacpp
from specbench.run.console import console
from specbench.run.progress import make_progress


def build_llama_server(options: BuildOptions, jobs: int | None = None) -> Path:
    """Build llama-server with a progress bar (plain lines every 20 steps in logs and pipes)."""
    return with_bar("llama-server", lambda report: install_llamacpp(options, jobs, report))


def with_bar(name: str, work: Callable[[Callable[[int, int, str], None]], Path]) -> Path:
    """``work`` fed a ``(done, total, line)`` report that moves a bar named "building ``name``"."""
    with make_progress() as bar:
        task = bar.add_task(f"building {name}", total=None)

        def report(done: int, total: int, _line: str) -> None:
            bar.update(task, completed=done, total=total)
            if not console.is_terminal and (done % 20 == 0 or done == total):
                console.print(f"building {name}: {done}/{total}", soft_wrap=True)

        return work(report)


class ConsoleInstall:
    """``specbench engine install``'s progress on the console (engines/origin.py ``InstallUi``):
    a bar for a counted build, a line prefixed with the engine's kind for the rest."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def build(self, name: str, work: Callable[[Callable[[int, int, str], None]], Path]) -> Path:
        return with_bar(name, work)

    def say(self, line: str) -> None:
        console.print(f"{self.kind}: {line}", highlight=False)
