"""Which fixtures need an engine: a test that asks for one (directly or through another fixture)
is marked ``engine`` (and ``vllm`` for vLLM), so ``pytest -m "not engine"`` (``make unit``) never
starts a llama-server build (~15 minutes on 2 cores) or a vLLM install."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

#: Fixtures that build or find a real engine; their names are unique across tests/.
#: ``llama_server``: the cached llama-server build (tests/conftest.py); ``vllm_bin``: vLLM's CPU
#: build (tests/engines/test_vllm_real.py). Lab pairs and the real model are files, no engine.
ENGINE_FIXTURES = frozenset({"llama_server", "vllm_bin"})
VLLM_FIXTURES = frozenset({"vllm_bin"})


def mark_engine_tests(items: Iterable[pytest.Item]) -> None:
    """Add the ``engine`` mark to every item whose fixture closure holds an engine fixture."""
    for item in items:
        needs = ENGINE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if needs and item.get_closest_marker("engine") is None:
            item.add_marker(pytest.mark.engine)
        if needs & VLLM_FIXTURES and item.get_closest_marker("vllm") is None:
            item.add_marker(pytest.mark.vllm)
