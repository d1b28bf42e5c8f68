"""Serving a lab pair with the real llama-server, for tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.process import ServerProcess, free_port
from specbench.transport import fetch_blocking


class Served:
    def __init__(self, port: int, log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = log

    def complete(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        body = {
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        resp = fetch_blocking("POST", f"{self.url}/v1/chat/completions", body, timeout=300)
        assert resp.status_code == 200, resp.text
        data: dict[str, Any] = resp.json()
        return data

    def get(self, path: str) -> Any:
        return fetch_blocking("GET", self.url + path, timeout=30).json()


@contextmanager
def serve(binary: Path, model: Path, args: list[str], log: Path) -> Iterator[Served]:
    port = free_port()
    argv = LlamaCppEngine(binary).command(str(model), ["-c", "4096", "-np", "1", *args], "127.0.0.1", port)
    server = ServerProcess(argv, log)
    try:
        server.start(f"http://127.0.0.1:{port}/health", timeout=120)
        yield Served(port, log)
    finally:
        server.stop()


def content(reply: dict[str, Any]) -> str:
    return str(reply["choices"][0]["message"]["content"])


def draft_args(draft: Path, k: int) -> list[str]:
    return ["-md", str(draft), "--spec-type", "draft-simple", "--spec-draft-n-max", str(k)]
