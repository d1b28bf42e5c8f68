"""A run no engine of specbench served: per-request results imported from another harness
(``specbench import``). Nothing is launched and no file is read; its arms' flags are read with
llama.cpp's spelling, and an arm that speculates by declaration or by its draft columns carries the
importer's ``--spec-imported`` flag, so every check that asks "does this arm speculate?" runs on it."""

from __future__ import annotations

from typing import Any, ClassVar

from specbench.engines.llamacpp import LlamaCppEngine


class ImportedEngine(LlamaCppEngine):
    """llama.cpp's flag rules and per-request ``timings`` without its binary."""

    kind = "imported"
    launches = False
    file_flags: ClassVar[frozenset[str]] = frozenset()

    def command(self, model: str, args: list[str], host: str, port: int) -> list[str]:
        return []

    def version(self) -> dict[str, Any]:
        return {}
