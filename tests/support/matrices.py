"""Small matrix files for the real llama-server: short prompts, a lab pair, draft arms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil
import yaml

from tests.support.lab import Pair

SHORT_PROMPTS = [
    {"id": f"short-{i}", "category": cat, "prompt": text}
    for i, (cat, text) in enumerate(
        [
            ("chat", "Tell me about the sea."),
            ("coding", "Write a sort function."),
            ("reasoning", "Is 91 prime?"),
            ("chat", "Suggest a name for a cat."),
            ("json", "Give a JSON object with a name field."),
        ]
    )
]


def write_matrix(
    folder: Path, pair: Pair, llama_server: Path, arms: dict[str, list[str]], **extra: Any
) -> Path:
    """A small matrix over short prompts (a prompt file next to it) on the real engine."""
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in SHORT_PROMPTS))
    matrix = {
        "model": str(pair.target),
        "common_args": ["-c", "2048", "-np", "1"],
        "arms": arms,
        "workload": {"suite": "natural", "max_tokens": 24, "prompts": 3, "prompt_file": "prompts.jsonl"},
        "repeats": 2,
        "warmup": 1,
        "engine_binary": str(llama_server),
        **extra,
    }
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix))
    return path


def draft4(pair: Pair) -> list[str]:
    return draft(pair.draft, 4)


def draft(pair_draft: Path, k: int) -> list[str]:
    return ["-md", str(pair_draft), "--spec-type", "draft-simple", "--spec-draft-n-max", str(k)]


def planned(arms: list[str], prompts: list[str], repeats: int = 2) -> set[tuple[str, str, int]]:
    return {(a, p, r) for a in arms for p in prompts for r in range(repeats)}


def llama_servers_for(model: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if any("llama-server" in c for c in cmd[:1]) and str(model) in cmd:
            found.append(proc)
    return found
