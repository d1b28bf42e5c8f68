"""Each engine asks its own endpoint for the rendered prompt and for its token count (issue 18:
engine knowledge behind ``Engine``). Driven against one real llama-server: llama.cpp's way reads
the rendered prompt (``/apply-template``) and counts the templated prompt (``/apply-template``
then ``/tokenize``); vLLM's way (``/tokenize`` of the messages, then ``/detokenize``) finds nothing
there; SGLang has no way to ask; an attached server uses the detected engine's way or, while
unknown, tries both. vLLM's own way against vLLM is in tests/engines/test_vllm.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from specbench.engines import engine_for
from specbench.engines.base import Engine
from specbench.engines.openai import AttachedEngine
from specbench.transport import Http, fetch_blocking, open_http
from tests.support.lab import Pair
from tests.support.serve import serve

MESSAGES = [{"role": "user", "content": "Name three rivers in Europe."}]


def _engines() -> list[tuple[str, Engine]]:
    """Fresh engines for each question: an attached one may learn what it is attached to."""
    return [
        ("llamacpp", engine_for("llamacpp")),
        ("vllm", engine_for("vllm")),
        ("sglang", engine_for("sglang")),
        ("attached, unknown", AttachedEngine()),
        ("attached, llamacpp", AttachedEngine("llamacpp")),
        ("attached, vllm", AttachedEngine("vllm")),
    ]


Ask = Callable[[Engine, Http, str], Awaitable[Any]]


@pytest.fixture(scope="module")
def url(llama_server: Path, dense_pair: Pair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for both questions: an engine start is the slow part."""
    with serve(llama_server, dense_pair.target, [], tmp_path_factory.mktemp("srv") / "server.log") as server:
        yield server.url


def _each(url: str, ask: Ask) -> dict[str, Any]:
    """Every engine's answer to ``ask`` against the server at ``url``."""

    async def go() -> dict[str, Any]:
        async with open_http(60) as client:
            return {name: await ask(engine, client, url) for name, engine in _engines()}

    return asyncio.run(go())


def _tokens(url: str, text: str) -> int:
    body = {"content": text, "add_special": True, "parse_special": True}
    return len(fetch_blocking("POST", f"{url}/tokenize", body, timeout=60).json()["tokens"])


def test_each_engine_asks_its_own_endpoint_for_the_rendered_prompt(url: str) -> None:
    found = _each(url, lambda engine, client, u: engine.render_prompt(client, u, MESSAGES, None))
    ours = found["llamacpp"]
    assert ours is not None and ours["via"] == "/apply-template"
    text = MESSAGES[0]["content"]
    assert text in ours["text"] and len(ours["text"]) > len(text)  # the template's own text around it
    assert found["attached, unknown"] == ours and found["attached, llamacpp"] == ours
    assert found["vllm"] is None and found["attached, vllm"] is None
    assert found["sglang"] is None


def test_each_engine_asks_its_own_endpoint_for_the_prompt_token_count(url: str) -> None:
    found = _each(url, lambda engine, client, u: engine.count_prompt_tokens(client, u, MESSAGES))
    bare = _tokens(url, MESSAGES[0]["content"])
    templated = fetch_blocking("POST", f"{url}/apply-template", {"messages": MESSAGES}, timeout=60)
    whole = _tokens(url, templated.json()["prompt"])
    ours = found["llamacpp"]
    assert ours == whole and ours > bare  # the template's own tokens are counted too
    assert found["attached, unknown"] == ours and found["attached, llamacpp"] == ours
    assert found["vllm"] is None and found["attached, vllm"] is None
    assert found["sglang"] is None
