"""Inference engines behind one small seam (:class:`specbench.engines.base.Engine`)."""

from __future__ import annotations

from pathlib import Path

from specbench.engines.base import Engine


def engine_for_analysis(kind: str) -> Engine:
    """An engine instance for reading a run's flags and logs (nothing is launched).
    Imported and attached runs read like llama.cpp: their speculative flags carry ``--spec-``."""
    from specbench.engines.llamacpp import LlamaCppEngine
    from specbench.engines.sglang import SglangEngine
    from specbench.engines.vllm import VllmEngine

    if kind == "vllm":
        return VllmEngine()
    if kind == "sglang":
        return SglangEngine()
    return LlamaCppEngine(Path("llama-server"))


def engine_class(kind: str) -> type[Engine]:
    """The engine class of a matrix's ``engine`` field, for what it knows without a binary
    (which flags take files); an attached server is launched by no one and takes none."""
    from specbench.engines.llamacpp import LlamaCppEngine
    from specbench.engines.openai import AttachedEngine
    from specbench.engines.sglang import SglangEngine
    from specbench.engines.vllm import VllmEngine

    classes: dict[str, type[Engine]] = {
        "llamacpp": LlamaCppEngine,
        "vllm": VllmEngine,
        "sglang": SglangEngine,
    }
    return classes.get(kind, AttachedEngine)
