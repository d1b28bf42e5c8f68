"""Shared fixtures. Engine tests drive a real llama-server, built once into the cache."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specbench.engines.install import BuildOptions, find_llama_server, install_llamacpp
from specbench.lab.check import lab_dir
from specbench.lab.make import LabSpec, cached_pair


@pytest.fixture(scope="session")
def llama_server() -> Path:
    """The cached llama-server (built from the pinned sdist on first use: several minutes)."""
    found = find_llama_server(None, BuildOptions())
    if found is not None:
        return found

    def report(done: int, total: int, _line: str) -> None:
        if done % 20 == 0 or done == total:
            print(f"building llama-server: {done}/{total}", flush=True)

    return install_llamacpp(BuildOptions(), progress=report)


class Pair:
    """A lab target/draft pair and its ground truth."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.target = folder / "target.gguf"
        self.draft = folder / "draft.gguf"
        self.truth: dict[str, Any] = json.loads((folder / "truth.json").read_text())

    def answer(self, n_chars: int) -> str:
        text = self.truth["answer_text"]
        return (text * (1 + n_chars // len(text)))[:n_chars]


def lab_pair(**kwargs: Any) -> Pair:
    return Pair(cached_pair(LabSpec(**kwargs), lab_dir()))


@pytest.fixture(scope="session")
def dense_pair() -> Pair:
    return lab_pair(arch="dense", alpha=0.8)


@pytest.fixture(scope="session")
def moe_pair() -> Pair:
    return lab_pair(arch="moe", alpha=0.9)


def sigint_as_usual() -> None:
    """A ``preexec_fn`` for a child the test will Ctrl-C: SIGINT back to its default. A shell
    starts a background job (``make test &``) with SIGINT ignored, the child inherits that, and
    Python then installs no KeyboardInterrupt handler, so the signal the test sends does nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def stream_server() -> Iterator[str]:
    """bench/stream_server.py (the client bench's yardstick: a chunk every 2 ms to every open
    stream, each carrying its send time on the shared monotonic clock), its own process; the URL
    of its chat endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = Path(__file__).resolve().parents[1] / "bench" / "stream_server.py"
    argv = [sys.executable, str(script), "--port", str(port), "--interval-ms", "2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        proc.terminate()
        proc.wait()
