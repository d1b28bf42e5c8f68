"""Processes a test starts or must find: children it will Ctrl-C, the CLI as a child, engines
tagged per test (a tagged matrix, finding and killing its servers), and a tiny disk."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.lab import Pair
from tests.support.matrices import write_matrix


def sigint_as_usual() -> None:
    """A ``preexec_fn`` for a child the test will Ctrl-C: SIGINT back to its default. A shell
    starts a background job (``make test &``) with SIGINT ignored, the child inherits that, and
    Python then installs no KeyboardInterrupt handler, so the signal the test sends does nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def tag() -> str:
    """A per-test --alias: finds exactly this test's engines among other sessions' servers."""
    return f"faults-{uuid.uuid4().hex[:10]}"


def tagged_matrix(folder: Path, pair: Pair, llama_server: Path, name: str, **extra: Any) -> Path:
    return write_matrix(folder, pair, llama_server, {"baseline": ["--alias", name]}, **extra)


def engines_tagged(name: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if name in cmd and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def wait_for(predicate: Any, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def specbench(*args: str) -> subprocess.Popen[str]:
    """The CLI in a child process, as a user runs it."""
    return subprocess.Popen(
        [sys.executable, "-m", "specbench.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        preexec_fn=sigint_as_usual,
    )


def kill_all(name: str) -> int:
    """SIGKILL what a failed test left behind (by pid); returns how many there were."""
    left = engines_tagged(name)
    for proc in left:
        proc.kill()
    return len(left)


@contextlib.contextmanager
def tiny_disk(tmp_path: Path, size_kb: int) -> Iterator[Path]:
    """A real small filesystem (tmpfs) where the test may mount one; else skip."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); the patched-writer test covers ENOSPC")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
