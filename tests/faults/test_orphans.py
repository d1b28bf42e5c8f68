"""No engine outlives specbench: real signals at launch, SIGKILL of specbench, the Popen window."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from specbench.cli._app import interrupt_on_signals
from specbench.engines import process
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.process import ServerProcess, free_port
from tests.support.lab import Pair
from tests.support.procs import engines_tagged, kill_all, specbench, tag, tagged_matrix, wait_for

pytestmark = pytest.mark.engine
GUARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _server(llama_server: Path, pair: Pair, name: str, log: Path) -> tuple[ServerProcess, str]:
    port = free_port()
    argv = LlamaCppEngine(llama_server).command(str(pair.target), ["--alias", name], "127.0.0.1", port)
    return ServerProcess(argv, log), f"http://127.0.0.1:{port}/health"


@pytest.mark.parametrize("sig", GUARDED, ids=lambda s: s.name)
def test_a_signal_inside_popen_is_held_until_the_engine_is_registered(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    """The signal lands right after fork, before registration: the worst moment of the old code."""
    name = tag()
    server, health = _server(llama_server, dense_pair, name, tmp_path / "engine.log")
    real_popen = subprocess.Popen
    spawned: list[int] = []

    def popen_then_signal(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        spawned.append(proc.pid)
        signal.raise_signal(sig)  # a real signal to this process, inside the window
        return proc

    previous = {s: signal.getsignal(s) for s in GUARDED}
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where pytest started with it ignored
    interrupt_on_signals()  # what `specbench run` installs: SIGTERM/SIGHUP act like Ctrl-C
    monkeypatch.setattr(process.subprocess, "Popen", popen_then_signal)
    try:
        with pytest.raises(KeyboardInterrupt):
            server.start(health, timeout=60)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        orphans = kill_all(name)
    assert spawned and orphans == 0
    assert not psutil.pid_exists(spawned[0]) or psutil.Process(spawned[0]).status() == "zombie"


def test_the_engine_is_not_deaf_to_signals_blocked_around_its_launch(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    """A blocked mask survives exec: the child must get the parent's mask back, or SIGTERM is lost."""
    name = tag()
    server, health = _server(llama_server, dense_pair, name, tmp_path / "engine.log")
    try:
        server.start(health, timeout=120)
        assert server.pid is not None
        status = Path(f"/proc/{server.pid}/status").read_text()
        blocked = int(next(ln for ln in status.splitlines() if ln.startswith("SigBlk:")).split()[1], 16)
        assert all(not blocked & (1 << (int(s) - 1)) for s in GUARDED), hex(blocked)
        assert server.stop(grace=30) is not None
    finally:
        kill_all(name)


@pytest.mark.parametrize("sig", GUARDED, ids=lambda s: s.name)
@pytest.mark.parametrize("moment", ["at-spawn", "spawn+0.3s"])
def test_a_signal_at_launch_leaves_no_engine(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, sig: signal.Signals, moment: str
) -> None:
    name = tag()
    # Long enough answers that the signal always lands inside the run, never after it.
    workload = {"suite": "natural", "max_tokens": 400, "prompts": 3, "prompt_file": "prompts.jsonl"}
    matrix = tagged_matrix(tmp_path, dense_pair, llama_server, name, repeats=2, workload=workload)
    run = specbench("run", str(matrix), "--out", str(tmp_path / "run"))
    try:
        assert wait_for(lambda: engines_tagged(name) or run.poll() is not None, 120)
        if moment == "spawn+0.3s":
            wait_for(lambda: False, 0.3)
        run.send_signal(sig)
        output = run.communicate(timeout=120)[0]
        orphans = len(engines_tagged(name))
    finally:
        run.kill()
        kill_all(name)
    # A shell reports both "exit 130" and "killed by SIGINT" as $? = 130. Python ends with the
    # latter when a KeyboardInterrupt is still pending as it shuts down (1 in 5 at-spawn SIGINT
    # trials here), after the run has been stopped and its records kept. SIGTERM and SIGHUP turn
    # into a KeyboardInterrupt too, and on a slow machine an at-spawn SIGHUP ended the same way
    # (1 of 6 at-spawn trials in a fresh-clone CI on 2026-11-27): what a shell sees is still 130.
    accepted = {130, -signal.SIGINT}
    assert run.returncode in accepted, output
    assert "continue with --resume" in output
    assert orphans == 0


def test_sigkill_of_specbench_takes_its_engine_down(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    """No handler can run on SIGKILL (or the OOM killer): the kernel's parent-death signal does it."""
    name = tag()
    matrix = tagged_matrix(tmp_path, dense_pair, llama_server, name, repeats=1)
    run = specbench("run", str(matrix), "--out", str(tmp_path / "run"))
    try:
        assert wait_for(lambda: engines_tagged(name), 120)
        run.send_signal(signal.SIGKILL)
        run.wait(30)
        gone = wait_for(lambda: not engines_tagged(name), 15)
    finally:
        run.kill()
        orphans = kill_all(name)
    assert gone and orphans == 0
