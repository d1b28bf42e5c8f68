"""VllmEngine against a FAKE vLLM server (tests/fakes/fake_vllm.py); no vLLM is installed here."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from specbench.client.stream import chat_body, open_streamer, stream_chat
from specbench.engines.base import parse_metrics, split_flags
from specbench.engines.vllm import VllmEngine, parse_log_acceptance, request_spec_metrics
from specbench.matrix.load import load_matrix
from tests.fakes import fake_vllm as fv
from tests.fakes.common import Request, Response, fake_url, mock_client
from tests.support.paths import EXAMPLES

SPEC = '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2,"prompt_lookup_max":5}'


def scrape(fake: fv.FakeVllm) -> dict[str, float]:
    return parse_metrics(fake.metrics_text())


def describe(fake: fv.FakeVllm) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with mock_client(fake.handler) as client:
            return await VllmEngine().describe(client, "http://fake")

    return asyncio.run(go())


def stream(fake: fv.FakeVllm, n: int = 1) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with fake_url(fake.handler) as base, open_streamer(10, 1) as session:
            body = chat_body(
                [{"role": "user", "content": "hi"}], 16, 0.0, 0, VllmEngine().request_extras(True)
            )
            return [await stream_chat(session, f"{base}/v1/chat/completions", body, 10) for _ in range(n)]

    return asyncio.run(go())


# -- argv and flags ---------------------------------------------------------------------------
def test_command_is_an_exact_argv_list() -> None:
    argv = VllmEngine("/opt/venv/bin/vllm").command(
        "Qwen/Qwen3-8B", ["--max-num-seqs", "8", "--speculative-config", SPEC], "127.0.0.1", 8123
    )
    assert argv == [
        "/opt/venv/bin/vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--max-num-seqs",
        "8",
        "--speculative-config",
        SPEC,
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
    ]


@pytest.mark.parametrize(
    "flag",
    ["--speculative-config", "--speculative_config", "-sc", "--speculative-config.method", f"-sc={SPEC}"],
)
def test_speculative_flags(flag: str) -> None:
    assert VllmEngine.is_spec_flag(flag)


@pytest.mark.parametrize(
    "flag", ["--gpu-memory-utilization", "--max-num-seqs", "--no-enable-prefix-caching", "--seed"]
)
def test_other_flags_are_not_speculative(flag: str) -> None:
    assert not VllmEngine.is_spec_flag(flag)


def test_request_extras() -> None:
    assert VllmEngine().request_extras(True)["ignore_eos"] is True
    assert "ignore_eos" not in VllmEngine().request_extras(False)
    assert VllmEngine().request_extras(False)["repetition_penalty"] == 1.0


# -- /metrics ---------------------------------------------------------------------------------
def test_spec_counters_sum_both_engines_and_ignore_created() -> None:
    fake = fv.FakeVllm(engines=2)
    stream(fake, n=3)  # engine 0 serves two requests, engine 1 one
    samples = scrape(fake)
    created = [k for k in samples if k.startswith("vllm:spec_decode_num_drafts_created")]
    assert len(created) == 2 and all(samples[k] > 1e9 for k in created)  # the trap is really there
    engines = {k for k in samples if k.startswith("vllm:spec_decode_num_drafts_total")}
    assert len(engines) == 2
    counters = VllmEngine().spec_counters(samples)
    assert counters["drafts"] == 3 * fv.DRAFTS
    assert counters["draft_tokens"] == 3 * fv.DRAFT_TOKENS
    assert counters["accepted"] == 3 * fv.ACCEPTED


def test_per_position_counters() -> None:
    fake = fv.FakeVllm(engines=2)
    stream(fake, n=2)
    counters = VllmEngine().spec_counters(scrape(fake))
    assert [counters[f"accepted_pos_{p}"] for p in range(fv.K)] == [2 * v for v in fv.PER_POS]
    # per-position counts add up to the accepted total: nothing double-counted
    assert sum(counters[f"accepted_pos_{p}"] for p in range(fv.K)) == counters["accepted"]


def test_no_spec_counters_without_speculation() -> None:
    assert VllmEngine().spec_counters(scrape(fv.FakeVllm(speculative=False))) == {}


# -- logs -------------------------------------------------------------------------------------
def test_parse_current_log_line() -> None:
    got = parse_log_acceptance(fv.LOG_LINES["new"])
    assert got is not None
    assert (got["accepted"], got["drafted"]) == (125, 225)
    assert got["rate"] == pytest.approx(125 / 225)
    assert got["logged_rate"] == pytest.approx(0.556)
    assert got["mean_acceptance_length"] == 2.67
    assert got["per_position"] == [0.8, 0.6, 0.267]


def test_parse_older_log_line() -> None:
    got = parse_log_acceptance(fv.LOG_LINES["old"])
    assert got is not None
    assert (got["accepted"], got["drafted"]) == (125, 225)
    assert "mean_acceptance_length" not in got


def test_other_lines_do_not_parse() -> None:
    assert parse_log_acceptance(fv.LOG_LINES["unrelated"]) is None
    assert parse_log_acceptance(fv.LOG_LINES["cuda_graph"]) is None


def test_fallback_patterns_catch_the_cuda_graph_downgrade_only() -> None:
    patterns = VllmEngine().fallback_patterns()
    assert any(p in fv.LOG_LINES["cuda_graph"] for p in patterns)
    assert not any(p in fv.LOG_LINES["new"] for p in patterns)  # acceptance lines are not failures
    assert any(p in fv.LOG_LINES["new"] for p in VllmEngine().acceptance_log_patterns())


# -- describe ---------------------------------------------------------------------------------
def test_describe_reads_version_models_and_spec_metrics() -> None:
    info = describe(fv.FakeVllm(version="0.29.1"))
    assert info["version"] == "0.29.1"
    assert info["ready"] is True
    assert info["models"][0]["id"] == fv.MODEL and info["models"][0]["max_model_len"] == 8192
    assert info["spec_metrics_present"] is True


def test_describe_flags_missing_spec_metrics() -> None:
    assert describe(fv.FakeVllm(speculative=False))["spec_metrics_present"] is False


# -- prompt tokens ----------------------------------------------------------------------------
def test_prompt_tokens_are_counted_by_tokenize_of_the_messages() -> None:
    """vLLM's /tokenize takes the chat ``messages`` and answers a ``count`` (TokenizeChatRequest,
    vllm/entrypoints/serve/tokenize/protocol.py); here a FAKE answers it, keeping the body."""
    fake, asked = fv.FakeVllm(), []
    messages = [{"role": "user", "content": "Name three rivers in Europe."}]

    def handler(request: Request) -> Response:
        if (request.method, request.url.path) != ("POST", "/tokenize"):
            return fake.handler(request)
        asked.append(json.loads(request.content))
        return Response(200, json={"count": 17, "max_model_len": 8192, "tokens": list(range(17))})

    async def go() -> int | None:
        async with mock_client(handler) as client:
            return await VllmEngine().count_prompt_tokens(client, "http://fake", messages)

    assert asyncio.run(go()) == 17
    assert asked == [{"messages": messages}]  # vLLM's defaults: generation prompt on, no extra BOS
    # a vLLM that does not answer: no count (prompts are then fitted to the estimate)
    assert asyncio.run(_count_on(fake.handler, VllmEngine(), messages)) is None


async def _count_on(handler: Any, engine: VllmEngine, messages: list[dict[str, Any]]) -> int | None:
    async with mock_client(handler) as client:
        return await engine.count_prompt_tokens(client, "http://fake", messages)


# -- the real client on the fake stream -------------------------------------------------------
def test_client_keeps_multi_token_chunks_and_per_request_metrics() -> None:
    fake = fv.FakeVllm()
    record = stream(fake)[0]
    assert record["error"] is None
    assert fake.bodies[0]["ignore_eos"] is True
    contents = [row[1] for row in record["chunks"] if row[1]]
    assert contents == [text for text, _ in fv.CONTENT]
    assert record["usage"]["completion_tokens"] == fv.COMPLETION_TOKENS > len(contents)
    assert "".join(row[2] or "" for row in record["chunks"]) == "".join(fv.REASONING)  # delta.reasoning
    assert request_spec_metrics(record) == {
        "draft_n": fv.DRAFT_TOKENS,
        "draft_accepted": fv.ACCEPTED,
        "draft_steps": fv.DRAFTS,
        "mean_acceptance_length": pytest.approx(1 + fv.ACCEPTED / fv.DRAFTS),
    }


def test_request_spec_metrics_absent() -> None:
    record = stream(fv.FakeVllm(per_request_metrics=False))[0]
    assert "metrics" not in record
    assert request_spec_metrics(record) is None
    assert request_spec_metrics({"metrics": {"speculative_decoding": None}}) is None  # n > 1


# -- examples/ --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["vllm-mtp.yaml", "vllm-eagle3.yaml", "vllm-ngram.yaml"])
def test_example_arms_differ_only_in_speculative_flags(name: str) -> None:
    matrix = load_matrix(EXAMPLES / name)
    assert matrix.engine == "vllm"
    flags = {arm: split_flags(matrix.arm_args(arm)) for arm in matrix.arms}
    assert not any(VllmEngine.is_spec_flag(f) for f, _ in flags[matrix.baseline])
    base_rest = {(f, v) for f, v in flags[matrix.baseline]}
    for arm in set(matrix.arms) - {matrix.baseline}:
        spec = [(f, v) for f, v in flags[arm] if VllmEngine.is_spec_flag(f)]
        assert spec and all(json.loads(v or "")["num_speculative_tokens"] > 0 for _, v in spec)
        assert {(f, v) for f, v in flags[arm] if not VllmEngine.is_spec_flag(f)} == base_rest
