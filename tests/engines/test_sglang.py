"""SglangEngine against a FAKE SGLang server (tests/fakes/fake_sglang.py); no SGLang here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from specbench.client.stream import chat_body, open_streamer, stream_chat
from specbench.engines.base import parse_metrics, split_flags
from specbench.engines.sglang import SglangEngine, parse_log_acceptance
from specbench.matrix.load import load_matrix
from tests.fakes import fake_sglang as fs
from tests.fakes.common import Request, Response, fake_url, mock_client
from tests.support.paths import EXAMPLES

ARM = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", fs.DRAFT]


def describe(fake: fs.FakeSglang) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with mock_client(fake.handler) as client:
            return await SglangEngine().describe(client, "http://fake")

    return asyncio.run(go())


def stream(fake: fs.FakeSglang, n: int = 1) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with fake_url(fake.handler) as base, open_streamer(10, 1) as session:
            body = chat_body(
                [{"role": "user", "content": "hi"}], 16, 0.0, 0, SglangEngine().request_extras(True)
            )
            return [await stream_chat(session, f"{base}/v1/chat/completions", body, 10) for _ in range(n)]

    return asyncio.run(go())


# -- argv and flags ---------------------------------------------------------------------------
def test_command_is_an_exact_argv_list() -> None:
    argv = SglangEngine("/opt/sgl/bin/python").command(fs.MODEL, ARM, "127.0.0.1", 30000)
    assert argv == [
        "/opt/sgl/bin/python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        fs.MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--enable-metrics",
        *ARM,
    ]


@pytest.mark.parametrize(
    "flag",
    [
        "--speculative-algorithm",
        "--speculative-draft-model-path",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
        "--speculative-some-future-knob",
        "--speculative-algorithm=NGRAM",
    ],
)
def test_every_speculative_flag_counts(flag: str) -> None:
    assert SglangEngine.is_spec_flag(flag)


@pytest.mark.parametrize("flag", ["--mem-fraction-static", "--disable-radix-cache", "--enable-metrics"])
def test_other_flags_are_not_speculative(flag: str) -> None:
    assert not SglangEngine.is_spec_flag(flag)


# -- /metrics: gauges, not counters -----------------------------------------------------------
def test_gauges_are_not_returned_as_counters() -> None:
    fake = fs.FakeSglang(tp_size=2)
    stream(fake, n=2)  # the second request's window: accept length 2.0
    counters = SglangEngine().spec_counters(parse_metrics(fake.metrics_text()))
    assert not {"drafts", "draft_tokens", "accepted"} & counters.keys()  # nothing to difference
    # mean over the two tp ranks of the *last window*, not a sum and not an accumulation
    assert counters["accept_length_gauge"] == fs.ACCEPT_LENGTHS[1]
    assert counters["accept_rate_gauge"] == pytest.approx(1 / 3)


def test_gauge_goes_down_between_scrapes() -> None:
    """Why they cannot be differenced: a later scrape can be lower than an earlier one."""
    fake = fs.FakeSglang()
    stream(fake)
    before = SglangEngine().spec_counters(parse_metrics(fake.metrics_text()))["accept_length_gauge"]
    stream(fake)
    after = SglangEngine().spec_counters(parse_metrics(fake.metrics_text()))["accept_length_gauge"]
    assert after < before


# -- logs -------------------------------------------------------------------------------------
def test_parse_current_decode_line() -> None:
    got = parse_log_acceptance(fs.LOG_LINES["new"])
    assert got == {
        "source": "sglang_log",
        "mean_acceptance_length": 3.21,
        "rate": 0.55,
        "gen_throughput": 182.35,
        "running_req": 1,
        "cuda_graph": True,
    }


def test_parse_older_decode_line_without_rate() -> None:
    got = parse_log_acceptance(fs.LOG_LINES["old"])
    assert got is not None
    assert got["mean_acceptance_length"] == 2.5
    assert "rate" not in got and "cuda_graph" not in got


def test_decode_line_without_cuda_graph() -> None:
    got = parse_log_acceptance(fs.LOG_LINES["no_graph"])
    assert got is not None and got["cuda_graph"] is False


def test_other_lines_do_not_parse() -> None:
    assert parse_log_acceptance(fs.LOG_LINES["prefill"]) is None
    assert any(p in fs.LOG_LINES["new"] for p in SglangEngine().acceptance_log_patterns())
    assert not any(p in fs.LOG_LINES["new"] for p in SglangEngine().fallback_patterns())


# -- describe ---------------------------------------------------------------------------------
def test_describe_uses_server_info() -> None:
    fake = fs.FakeSglang(version="0.5.9")
    stream(fake, n=2)
    info = describe(fake)
    assert info["server_info_path"] == "/server_info"
    assert info["version"] == "0.5.9"
    assert info["speculative"]["speculative_algorithm"] == "EAGLE3"
    assert info["speculative"]["speculative_num_draft_tokens"] == fs.NUM_DRAFT_TOKENS
    # cumulative since boot: the mean of both requests' windows
    assert info["avg_spec_accept_length_since_boot"] == [sum(fs.ACCEPT_LENGTHS) / 2]
    assert info["models"][0]["id"] == fs.MODEL


def test_describe_falls_back_to_get_server_info() -> None:
    info = describe(fs.FakeSglang(legacy=True))
    assert info["server_info_path"] == "/get_server_info"
    assert info["ready"] is True
    assert info["avg_spec_accept_length_since_boot"] == [None]  # speculation has not run yet


def test_describe_reports_speculation_off() -> None:
    assert describe(fs.FakeSglang(algorithm=None))["speculative"]["speculative_algorithm"] is None


# -- prompt tokens ----------------------------------------------------------------------------
def test_prompt_tokens_are_not_counted_and_nothing_is_asked() -> None:
    """SGLang's /tokenize takes text only (no chat template) and a chat request would leave the
    prompt in the radix cache: no count, and no request to the server at all."""
    fake, asked = fs.FakeSglang(), []

    def handler(request: Request) -> Response:
        asked.append(request.url.path)
        return fake.handler(request)

    async def go() -> int | None:
        async with mock_client(handler) as client:
            return await SglangEngine().count_prompt_tokens(
                client, "http://fake", [{"role": "user", "content": "hi"}]
            )

    assert asyncio.run(go()) is None
    assert asked == []


# -- the real client on the fake stream -------------------------------------------------------
def test_client_reads_reasoning_content_and_multi_token_chunks() -> None:
    fake = fs.FakeSglang()
    record = stream(fake)[0]
    assert record["error"] is None
    assert fake.bodies[0]["ignore_eos"] is True
    assert "".join(row[2] or "" for row in record["chunks"]) == "".join(fs.REASONING)
    contents = [row[1] for row in record["chunks"] if row[1]]
    assert contents == [text for text, _ in fs.CONTENT]
    assert record["usage"]["completion_tokens"] > len(contents)


# -- examples/ --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sglang-eagle3.yaml", "sglang-nextn.yaml"])
def test_example_arms_differ_only_in_speculative_flags(name: str) -> None:
    matrix = load_matrix(EXAMPLES / name)
    assert matrix.engine == "sglang"
    flags = {arm: split_flags(matrix.arm_args(arm)) for arm in matrix.arms}
    assert not any(SglangEngine.is_spec_flag(f) for f, _ in flags[matrix.baseline])
    base_rest = set(flags[matrix.baseline])
    for arm in set(matrix.arms) - {matrix.baseline}:
        spec = dict((f, v) for f, v in flags[arm] if SglangEngine.is_spec_flag(f))
        assert spec["--speculative-algorithm"] in {"EAGLE3", "NEXTN"}
        # SGLang speculative decoding docs: with topk 1, num-draft-tokens = num-steps + 1
        assert (
            int(spec["--speculative-num-draft-tokens"] or 0) == int(spec["--speculative-num-steps"] or 0) + 1
        )
        assert {(f, v) for f, v in flags[arm] if not SglangEngine.is_spec_flag(f)} == base_rest
