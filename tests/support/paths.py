"""Paths the tests read, from the repository's root (not from each test file's depth)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
EXAMPLES = ROOT / "examples"
FAKE_BIN = ROOT / "tests" / "fakes" / "bin"
ENGINE_DATA = ROOT / "tests" / "engines" / "data"
LLAMA_HELP = ENGINE_DATA / "llama-server-help.txt"
