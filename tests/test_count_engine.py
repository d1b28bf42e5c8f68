"""Each engine asks its own endpoint how many tokens a prompt is (issue 18: engine knowledge
behind ``Engine``). Driven against a real llama-server: llama.cpp's way (``/apply-template`` then
``/tokenize``) counts the templated prompt, vLLM's way (``/tokenize`` of the messages) finds nothing
there, SGLang has no way to ask, and an attached server uses the detected engine's way or, while
unknown, tries both. vLLM's own way against vLLM is in tests/engines/test_vllm.py."""

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


def _count(engine: Engine, url: str) -> int | None:
    async def ask() -> int | None:
        async with httpx.AsyncClient(timeout=60) as client:
            return await engine.count_prompt_tokens(client, url, MESSAGES)

    return asyncio.run(ask())


def _tokens(url: str, text: str) -> int:
    body = {"content": text, "add_special": True, "parse_special": True}
    return len(httpx.post(f"{url}/tokenize", json=body, timeout=60).json()["tokens"])


def test_each_engine_asks_its_own_endpoint_for_the_prompt_token_count(
    llama_server: Path, dense_pair: Pair, tmp_path: Path
) -> None:
    with serve(llama_server, dense_pair.target, [], tmp_path / "server.log") as server:
        found = {
            name: _count(engine, server.url)
            for name, engine in [
                ("llamacpp", engine_for("llamacpp")),
                ("vllm", engine_for("vllm")),
                ("sglang", engine_for("sglang")),
                ("attached, unknown", AttachedEngine()),
                ("attached, llamacpp", AttachedEngine("llamacpp")),
                ("attached, vllm", AttachedEngine("vllm")),
            ]
        }
        bare = _tokens(server.url, MESSAGES[0]["content"])
        templated = httpx.post(f"{server.url}/apply-template", json={"messages": MESSAGES}, timeout=60)
        whole = _tokens(server.url, templated.json()["prompt"])
    ours = found["llamacpp"]
    assert ours == whole and ours > bare  # the template's own tokens are counted too
    assert found["attached, unknown"] == ours and found["attached, llamacpp"] == ours
    assert found["vllm"] is None and found["attached, vllm"] is None
    assert found["sglang"] is None
