"""Helpers for fault tests on the real llama-server: a tagged matrix, finding its processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

from tests.conftest import Pair, sigint_as_usual
from tests.test_runner_engine import write_matrix


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
