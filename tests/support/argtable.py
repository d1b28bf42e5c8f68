"""A fake ``llama-server`` that prints the stored ``--help`` of the pinned build and counts its calls."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import LLAMA_HELP


def fake_llama_server(folder: Path, text: str | None = None) -> Path:
    """An executable that prints ``text`` (the stored help) for ``--help`` and counts its calls."""
    (folder / "help.txt").write_text(LLAMA_HELP.read_text() if text is None else text)
    binary = folder / "llama-server"
    binary.write_text(f'#!/bin/sh\necho x >> "{folder}/calls"\ncat "{folder}/help.txt"\n')
    binary.chmod(0o755)
    return binary


def calls(folder: Path) -> int:
    path = folder / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0
