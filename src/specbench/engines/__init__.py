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
