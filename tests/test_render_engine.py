"""Each engine asks its own endpoint for the rendered prompt (issue 18: engine knowledge behind
``Engine``). Driven against a real llama-server: llama.cpp's way (``/apply-template``) reads it,
vLLM's way (``/tokenize`` of the messages, then ``/detokenize``) finds nothing there, SGLang has no
way to ask, and an attached server uses the detected engine's way or, while unknown, tries both."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from specbench.engines import engine_for
from specbench.engines.base import Engine
from specbench.engines.openai import AttachedEngine
from tests.conftest import Pair
from tests.engine_helpers import serve

MESSAGES = [{"role": "user", "content": "Name three rivers in Europe."}]


def _render(engine: Engine, url: str) -> dict[str, str] | None:
    async def ask() -> dict[str, str] | None:
        async with httpx.AsyncClient(timeout=60) as client:
            return await engine.render_prompt(client, url, MESSAGES, None)

    return asyncio.run(ask())


def test_each_engine_asks_its_own_endpoint_for_the_rendered_prompt(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    with serve(llama_server, dense_pair.target, [], tmp_path / "server.log") as server:
        found = {
            name: _render(engine, server.url)
            for name, engine in [
                ("llamacpp", engine_for("llamacpp")),
                ("vllm", engine_for("vllm")),
                ("sglang", engine_for("sglang")),
                ("attached, unknown", AttachedEngine()),
                ("attached, llamacpp", AttachedEngine("llamacpp")),
                ("attached, vllm", AttachedEngine("vllm")),
            ]
        }
    ours = found["llamacpp"]
    assert ours is not None and ours["via"] == "/apply-template"
    text = MESSAGES[0]["content"]
    assert text in ours["text"] and len(ours["text"]) > len(text)  # the template's own text around it
    assert found["attached, unknown"] == ours and found["attached, llamacpp"] == ours
    assert found["vllm"] is None and found["attached, vllm"] is None
    assert found["sglang"] is None
