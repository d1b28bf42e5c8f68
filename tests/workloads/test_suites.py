"""Every suite builds its requests; length fitting converges; sweeps make phases."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from specbench.matrix.config import Matrix
from specbench.workloads.length import FILL, fit_messages
from specbench.workloads.suites import SUITES, build_requests


def matrix(suite: str, **workload: Any) -> Matrix:
    return Matrix(model="m.gguf", arms={"baseline": ()}, workload={"suite": suite, **workload})


@pytest.mark.parametrize("name", sorted(SUITES))
def test_every_suite_builds_unique_requests(name: str) -> None:
    requests, warmup, concurrency = build_requests(matrix(name, scale=0.1), Path("."))
    assert requests and concurrency >= 1
    assert len({r.prompt_id for r in requests}) == len(requests)
    assert all(r.max_tokens >= 8 for r in requests)
    assert warmup[0].prompt_id == "warmup-0"


def test_scale_shrinks_lengths_and_overrides_win() -> None:
    (req, *_), _, _ = build_requests(matrix("prefill", scale=0.01), Path("."))
    assert req.target_tokens == 82 and req.max_tokens == 8  # 8192·0.01 and max(8, 256·0.01)
    (req, *_), _, conc = build_requests(matrix("prefill", input_tokens=300, max_tokens=50), Path("."))
    assert (req.target_tokens, req.max_tokens, conc) == (300, 50, 4)


def test_length_sweep_forces_lengths_in_phases() -> None:
    requests, _, _ = build_requests(matrix("length-sweep"), Path("."))
    assert sorted({r.max_tokens for r in requests}) == [100, 500, 1000, 2000]
    assert all(r.ignore_eos and r.phase == f"len{r.max_tokens}" for r in requests)


def test_length_sweep_never_resends_a_prompt_at_another_length() -> None:
    # Issue 15: one prompt at every length in one launch read its prefill from the cache.
    requests, _, _ = build_requests(matrix("length-sweep", prompts=3), Path("."))
    bases = [r.prompt_id.split("@")[0] for r in requests]
    assert len(bases) == len(set(bases)) == 3 * 4
    assert all(len([r for r in requests if r.max_tokens == n]) == 3 for n in (100, 500, 1000, 2000))


def test_a_prompt_that_misses_its_target_is_an_error() -> None:
    from specbench.errors import ConfigError
    from specbench.workloads.length import check_fit

    check_fit("p", 100, 108)
    with pytest.raises(ConfigError, match=r"prompt 'chat-1' fitted to 494 tokens, target 51"):
        check_fit("chat-1", 51, 494)
    with pytest.raises(ConfigError, match=r"fitted to 3 tokens, target 26.*template"):
        check_fit("chat-2", 26, 3)


def test_concurrency_sweep_has_enough_requests_per_level() -> None:
    requests, _, _ = build_requests(matrix("concurrency-sweep", levels=[1, 4, 16]), Path("."))
    per_level = {c: sum(r.concurrency == c for r in requests) for c in (1, 4, 16)}
    assert per_level[1] >= 1 and per_level[4] >= 4 and per_level[16] >= 16


def test_scenarios_run_the_four_field_operating_points_one_phase_each() -> None:
    """Issue 40: single (batch 1, 512 / 512), prefill (8k / 256, 4 in flight), concurrent (2k /
    512, 16), chat (2k / 256, 2), scaled, in that order; each phase has at least as many requests
    as it keeps in flight and its own prompt ids (no prefix cached from another scenario)."""
    requests, _, _ = build_requests(matrix("scenarios", scale=0.1), Path("."))
    phases = list(dict.fromkeys(r.phase for r in requests))
    assert phases == ["single", "prefill", "concurrent", "chat"]
    shape = {r.phase: (r.target_tokens, r.max_tokens, r.concurrency) for r in requests}
    assert shape == {
        "single": (51, 51, 1),
        "prefill": (819, 26, 4),
        "concurrent": (205, 51, 16),
        "chat": (205, 26, 2),
    }
    assert all(sum(r.phase == p for r in requests) >= shape[p][2] for p in phases)
    assert all(r.ignore_eos and r.prompt_id.split("#")[0].endswith(f"@{r.phase}") for r in requests)


def test_agent_requests_carry_tools_and_a_fill_point() -> None:
    requests, _, _ = build_requests(matrix("agent"), Path("."))
    assert all(r.tools and len(r.tools) == 8 for r in requests)
    assert {r.category for r in requests} == {"agent-tool", "agent-prose"}
    assert all(any(FILL in str(m["content"]) for m in r.messages) for r in requests)


def test_cache_reuse_has_identical_bodies_and_a_shared_prefix() -> None:
    requests, _, _ = build_requests(matrix("cache-reuse"), Path("."))
    same = [r for r in requests if r.phase == "identical"]
    prefix = [r for r in requests if r.phase == "prefix"]
    assert len({str(r.messages) for r in same}) == 1 and len(same) > 1
    assert len({r.messages[0]["content"] for r in prefix}) == 1
    assert len({r.messages[-1]["content"] for r in prefix}) == len(prefix)


@pytest.mark.parametrize("target", [50, 512, 4000])
def test_fit_messages_lands_within_one_percent(target: int) -> None:
    async def count(messages: list[dict[str, Any]]) -> int:  # ~3.3 characters per token + template
        return round(sum(len(m["content"]) for m in messages) / 3.3) + 7

    messages = [{"role": "user", "content": "Summarise the context."}]
    fitted, tokens, _ = asyncio.run(fit_messages(messages, target, count))
    assert abs(tokens - target) <= 0.01 * target + 1
    assert fitted[-1]["content"].endswith("Summarise the context.")
    assert fitted[-1]["content"].startswith("Context:")


def test_fill_placeholder_is_replaced_where_it_stands() -> None:
    async def count(messages: list[dict[str, Any]]) -> int:
        return sum(len(m["content"]) for m in messages) // 4

    messages = [{"role": "system", "content": f"Doc:\n{FILL}"}, {"role": "user", "content": "Q?"}]
    fitted, _, _ = asyncio.run(fit_messages(messages, 200, count))
    assert FILL not in fitted[0]["content"] and len(fitted[0]["content"]) > 600
    assert fitted[1]["content"] == "Q?"


def test_different_prompts_get_different_filler() -> None:
    async def count(messages: list[dict[str, Any]]) -> int:
        return sum(len(m["content"]) for m in messages) // 4

    messages = [{"role": "user", "content": "Q?"}]
    a, _, _ = asyncio.run(fit_messages(messages, 300, count, offset=0))
    b, _, _ = asyncio.run(fit_messages(messages, 300, count, offset=5000))
    assert a[0]["content"][:200] != b[0]["content"][:200]


def test_a_given_filler_length_is_reused_exactly() -> None:
    async def count(messages: list[dict[str, Any]]) -> int:
        return sum(len(m["content"]) for m in messages) // 4

    first, _, chars = asyncio.run(fit_messages([{"role": "user", "content": "Q1?"}], 300, count, offset=7))
    again, _, same = asyncio.run(fit_messages([{"role": "user", "content": "Q1?"}], 300, count, 7, chars))
    assert same == chars and again == first
