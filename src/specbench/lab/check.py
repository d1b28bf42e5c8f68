"""``specbench lab check``: designed vs measured acceptance on a real llama-server."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.process import ServerProcess, free_port
from specbench.errors import LabError
from specbench.lab.acceptance import designed_acceptance
from specbench.lab.gguf_model import Arch
from specbench.lab.make import LabSpec, cached_pair
from specbench.store.paths import cache_dir
from specbench.store.record import NO_COUNTS
from specbench.transport import fetch_blocking

CHECK_PROMPTS = ("Count with me.", "Tell me a story.", "What comes next?", "Continue the sequence.")


@dataclass(frozen=True)
class CheckResult:
    designed: float
    measured: float
    drafted: int
    accepted: int
    greedy_matches: bool

    def line(self) -> str:
        return f"designed acceptance {self.designed:.3f} measured acceptance {self.measured:.3f}"


def lab_dir() -> Path:
    return cache_dir() / "lab"


def spec_args(draft: Path, k: int) -> list[str]:
    return [
        "-md",
        str(draft),
        "--spec-type",
        "draft-simple",
        "--spec-draft-n-max",
        str(k),
        "-c",
        "4096",
        "-np",
        "1",
    ]


def run_check(
    binary: Path,
    alpha: float,
    k: int,
    max_tokens: int = 400,
    seed: int = 0,
    arch: Arch = "dense",
    log: Path | None = None,
    size: str = "tiny",
) -> CheckResult:
    """Serve a ``size`` ``arch`` target with the dense draft (draft-simple); compare acceptance with
    its design. ``log`` keeps the server log (otherwise it goes to a temporary directory)."""
    pair = cached_pair(LabSpec(arch=arch, alpha=alpha, size=size, seed=seed), lab_dir())
    truth = json.loads((pair / "truth.json").read_text())
    port = free_port()
    argv = LlamaCppEngine(binary).command(
        str(pair / "target.gguf"), spec_args(pair / "draft.gguf", k), "127.0.0.1", port
    )
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(argv, log or Path(tmp) / "server.log")
        try:
            server.start(f"http://127.0.0.1:{port}/health", timeout=120)
            replies = [_complete(port, p, max_tokens) for p in CHECK_PROMPTS]
        finally:
            server.stop()
    counts = [LlamaCppEngine.request_counts(r) or NO_COUNTS for r in replies]  # the server's own, per reply
    drafted = int(sum(c.drafted or 0 for c in counts))
    accepted = int(sum(c.accepted or 0 for c in counts))
    if drafted == 0:
        raise LabError("lab check: the server drafted nothing; speculation did not run")
    answer = truth["answer_text"] * (1 + max_tokens // len(truth["answer_text"]))
    texts = [r["choices"][0]["message"]["content"] for r in replies]
    matches = all(text == answer[: len(text)] and len(text) >= max_tokens for text in texts)
    return CheckResult(designed_acceptance(alpha, k), accepted / drafted, drafted, accepted, matches)


def _complete(port: int, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0.0}
    resp = fetch_blocking("POST", f"http://127.0.0.1:{port}/v1/chat/completions", body, timeout=300)
    if resp.status_code != 200:
        raise LabError(f"lab check: the server answered HTTP {resp.status_code}: {resp.text[:200]}")
    data: dict[str, Any] = resp.json()
    return data
