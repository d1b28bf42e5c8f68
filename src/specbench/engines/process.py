"""A server process in its own process group: start, wait for health, stop without orphans.

Three guards keep an engine from outliving specbench:

* the engine runs in its own session (process group), so teardown reaches every child it forks,
  and a Ctrl-C in the terminal reaches specbench, which stops the engine, not the engine alone;
* SIGINT, SIGTERM and SIGHUP are blocked from just before ``fork`` until the pid is registered
  for clean-up: a signal in that window used to leave a running engine nobody knew about. It is
  delivered (and handled) right after registration;
* on Linux the child asks the kernel for ``PR_SET_PDEATHSIG`` (SIGKILL) before ``exec``, so even
  a SIGKILL'd or OOM-killed specbench takes its engine down. The guard covers the process
  specbench starts; engines that fork workers (vLLM, SGLang) stop those themselves when their
  parent dies.

An engine may print its own arguments, an API key among them (vLLM logs its non-default
arguments at start-up): when a launch ends, failed or stopped, its part of the log is scrubbed
(:meth:`Redactor.scrub_file`) before specbench reads it back for an error message or a log tail.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import psutil

from specbench.errors import ClientError, EngineStartError, PortTakenError, StoreError
from specbench.store.redact import Redactor, mask_args
from specbench.store.safeio import guarded
from specbench.transport import fetch_blocking

_LIVE: set[int] = set()  # process-group ids still running, killed at interpreter exit
_GUARDED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Resolved here, not in the forked child: loading a library after fork can deadlock.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


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


_ERROR_LINE = re.compile(r"\b(error|invalid|failed|unknown|cannot|not found|exception)\b", re.IGNORECASE)


def error_line(path: Path, offset: int = 0) -> str:
    """The engine's own first error line since ``offset`` (its usage text is no explanation)."""
    if not path.is_file():
        return ""
    with path.open(errors="replace") as fh:
        fh.seek(offset)
        for line in fh:
            if not line.startswith("===== specbench") and _ERROR_LINE.search(line):
                return line.strip()[:300]
    return ""


class ServerProcess:
    """One engine server. ``start`` returns once ``health_url`` answers 200."""

    def __init__(
        self,
        argv: list[str],
        log_path: Path,
        env: dict[str, str] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.argv = argv
        self.log_path = log_path
        self.env = env
        # Knows the secrets of argv and env at least, so the log is scrubbed wherever this runs.
        self.redactor = Redactor(set(redactor.secrets) if redactor else set())
        self.redactor.add_args(argv)
        self.redactor.add_env(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self._offset = 0  # where this launch's part of the log starts

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, health_url: str, timeout: float) -> None:
        try:
            with guarded(self.log_path):  # a full disk is exit 5, as for every run-directory file
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                log = self.log_path.open("ab")
            with log:
                self._offset = log.tell()
                header = f"\n===== specbench: {' '.join(mask_args(self.argv))}\n".encode()
                with guarded(self.log_path):
                    log.write(header)
                    log.flush()
                self._spawn(log)
            self._wait_healthy(health_url, timeout)
        except BaseException:
            self.stop()  # Ctrl-C / SIGTERM / SIGHUP during start-up: the engine goes with us
            raise

    def _spawn(self, log: BinaryIO) -> None:
        """Popen with the guarded signals held back until the pid is registered."""
        parent = os.getpid()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _GUARDED)
        try:
            # Own session = own process group, so teardown reaches every child and a Ctrl-C
            # in the terminal is handled by specbench, not delivered to the server directly.
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **(self.env or {})},
                preexec_fn=lambda: _child_setup(parent, old),
            )
            _LIVE.add(self.proc.pid)
        except OSError as exc:  # the binary is missing or not executable: name it
            raise EngineStartError(f"cannot run {self.argv[0]}: {exc.strerror or exc}") from exc
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # pending signals are delivered here

    def _wait_healthy(self, url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode if self.proc else None
                self.stop()  # its children too, before the log is scrubbed and read
                said = error_line(self.log_path, self._offset)
                raise EngineStartError(
                    f"exited with code {code} before becoming healthy" + (f": {said}" if said else ""),
                    log_tail(self.log_path),
                )
            if _healthy(url):
                self._check_port_owner(url)
                return
            time.sleep(0.2)
        self.stop()
        raise EngineStartError(f"not healthy after {timeout:.0f} s ({url})", log_tail(self.log_path))

    def _check_port_owner(self, url: str) -> None:
        """The answer must come from our engine: another server on the port (a port race: it took
        the port between our pick and the engine's bind) would be measured as the arm's data."""
        port = urlsplit(url).port
        if self.proc is None or port is None or owns_port(self.proc.pid, port) is not False:
            return
        self.stop()
        raise PortTakenError(
            f"port {port} is answered by another process, not the engine specbench launched "
            f"(pid {self.proc.pid})",
            log_tail(self.log_path),
        )

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL after ``grace`` seconds; returns the exit code.
        The log is scrubbed once the group is gone (nothing writes to it any more)."""
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
        # Never raises: stop() runs while a Ctrl-C or a full disk is being handled, and must not
        # replace it. A scrub needs no free space unless a short URL password grew into "***".
        with contextlib.suppress(StoreError):
            self.redactor.scrub_file(self.log_path, self._offset)
        return self.proc.returncode


def owns_port(pid: int, port: int) -> bool | None:
    """Whether ``pid`` or one of its descendants listens on ``port``; None when the OS will not
    say (no permission), so the check never fails a healthy run for lack of rights."""
    try:
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                    return True
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return None
    return False


def _child_setup(parent: int, mask: set[int | signal.Signals]) -> None:
    """In the forked child before exec: restore the signal mask (a blocked mask survives exec,
    and an engine deaf to SIGTERM could not be stopped) and die with the parent."""
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: nobody would reap us
            os._exit(1)


def _healthy(url: str) -> bool:
    try:
        return fetch_blocking("GET", url, timeout=2.0).status_code == 200
    except ClientError:
        return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@atexit.register
def _kill_leftovers() -> None:
    for pgid in list(_LIVE):
        _signal_group(pgid, signal.SIGKILL)
