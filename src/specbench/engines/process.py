"""A server process in its own process group: start, wait for health, stop without orphans."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections import deque
from pathlib import Path

import httpx

from specbench.errors import EngineStartError

_LIVE: set[int] = set()  # process-group ids still running, killed at interpreter exit


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now (another process may still take it: callers retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = 15) -> str:
    if not path.is_file():
        return ""
    with path.open(errors="replace") as fh:
        return "".join(deque(fh, maxlen=lines)).rstrip()


class ServerProcess:
    """One engine server. ``start`` returns once ``health_url`` answers 200."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, health_url: str, timeout: float) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n===== specbench: {' '.join(self.argv)}\n".encode())
            log.flush()
            # Own session = own process group, so teardown reaches every child and a Ctrl-C
            # in the terminal is handled by specbench, not delivered to the server directly.
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **(self.env or {})},
            )
        _LIVE.add(self.proc.pid)
        self._wait_healthy(health_url, timeout)

    def _wait_healthy(self, url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode if self.proc else None
                raise EngineStartError(
                    f"exited with code {code} before becoming healthy", log_tail(self.log_path)
                )
            if _healthy(url):
                return
            time.sleep(0.2)
        self.stop()
        raise EngineStartError(f"not healthy after {timeout:.0f} s ({url})", log_tail(self.log_path))

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL after ``grace`` seconds; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        _signal_group(self.proc.pid, signal.SIGKILL)  # stragglers left in the group
        _LIVE.discard(self.proc.pid)
        return self.proc.returncode


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@atexit.register
def _kill_leftovers() -> None:
    for pgid in list(_LIVE):
        _signal_group(pgid, signal.SIGKILL)
