"""Cache, client-vs-server and machine-load evidence (issue 15 items 5, 9, 10).

The records here are built by hand (FAKE): a stalled stream and a loaded box are what a real
engine on a quiet machine cannot be made to produce on demand."""

from __future__ import annotations

from typing import Any

import pandas as pd

from specbench.analysis import metrics
from specbench.analysis.findings import busy, measurement
from specbench.engines import read_record
from specbench.run import machineload


def stalled_record() -> dict[str, Any]:
    """FAKE: the issue's stalled stream — first token at 481 ms, then 95 chunks within 28 ms —
    while the server timed its decode at 20 tok/s."""
    chunks = [[481_000_000, "a", None, None, None]]
    chunks += [[481_000_000 + i * 300_000, "b", None, None, None] for i in range(1, 96)]
    return {
        "arm": "draft",
        "prompt_id": "p1",
        "repeat": 0,
        "error": None,
        "warmup": False,
        "chunks": chunks,
        "t_end_ns": 510_000_000,
        "usage": {"completion_tokens": 96, "prompt_tokens": 40},
        "timings": {"predicted_per_second": 20.0, "predicted_n": 96, "cache_n": 0},
    }


def test_a_stalled_stream_uses_the_servers_decode_rate_and_is_flagged() -> None:
    rec = stalled_record()
    assert 1000 / metrics.tpot_ms(read_record(rec)) > 3000  # what the old summary reported
    assert metrics.bunched(read_record(rec)) == 1.0 and metrics.client_decode_tok_s(read_record(rec)) == 20.0
    assert (
        metrics.decode_disagrees(read_record(rec)) == 1.0 and metrics.decode_tok_s(read_record(rec)) == 20.0
    )
    df = metrics.frame([rec])
    (found,) = measurement.client_server_disagreement(df, ["draft"])
    assert found.code == "CLIENT_SERVER_DISAGREE" and "1 of 1 requests" in found.evidence


def test_agreeing_rates_keep_the_clients_number() -> None:
    rec = stalled_record()
    # on time: the first token at 10 ms, not 481 (a late first token is a bunched stream)
    rec["chunks"] = [[t - 471_000_000, *rest] for t, *rest in rec["chunks"]]
    assert metrics.bunched(read_record(rec)) == 0.0
    rec["timings"]["predicted_per_second"] = metrics.client_decode_tok_s(read_record(rec)) * 1.1
    assert metrics.decode_disagrees(read_record(rec)) == 0.0
    assert metrics.decode_tok_s(read_record(rec)) == metrics.client_decode_tok_s(read_record(rec))
    assert measurement.client_server_disagreement(metrics.frame([rec]), ["draft"]) == []


def test_a_cached_prefill_on_a_cold_request_is_a_finding() -> None:
    df = pd.DataFrame(
        {
            "arm": ["a", "a", "a"],
            "prompt_id": ["x@len8", "x@len32", "prefix-01"],
            "category": ["chat", "chat", "cache-prefix"],
            "prompt_tokens": [214.0, 214.0, 300.0],
            "cached_tokens": [3.0, 209.0, 290.0],  # the cache_n 209 of 214
        }
    )
    (found,) = measurement.cached_prefill(df, ["a"])
    assert found.code == "CACHED_PREFILL" and "1 of 2 requests" in found.evidence
    assert "x@len32: 209 of 214" in found.evidence


def test_a_busy_box_is_named_and_a_quiet_one_is_not() -> None:
    cells = [
        {"arm": "baseline", "machine_load": {"cpus": 2, "load_start": 8.2, "load_end": 13.0}},
        {"arm": "baseline", "machine_load": {"cpus": 2, "load_start": 1.0, "load_end": 2.0}},
        {"arm": "draft", "machine_load": {"cpus": 2, "load_start": 1.0, "load_end": 2.5}},
    ]
    (found,) = busy.busy_findings(cells, ["baseline", "draft"])
    assert found.arms == ("baseline",) and "load average 13.0 on 2 CPUs" in found.evidence
    assert "1 of 2 cells" in found.evidence
    assert busy.busy_reason({"cpus": 2, "load_end": 1.0, "steal_share": 0.2}) is not None


def test_a_cells_machine_load_records_load_cpus_and_threads() -> None:
    import os

    got = machineload.MachineLoad().finish(os.getpid(), machineload.threads_arg(["-c", "2048", "-t", "1"]))
    assert got["cpus"] == os.cpu_count() and got["engine_threads"] == "1"
    assert got["load_end"] >= 0 and got["engine_os_threads"] >= 1


def burst_record(server_itl_ms: float | None) -> dict[str, Any]:
    """FAKE, in the shape of a real CPU vLLM record (tests/engines/test_vllm_real.py reproduces it on
    a busy box, not on demand): 48 tokens in 14 chunks, every chunk in one socket read."""
    chunks = [[900_000_000, "abcd", None, None, None] for _ in range(12)] + [
        [900_000_000, "", None, None, None]
    ]
    metrics_field = {} if server_itl_ms is None else {"metrics": {"mean_itl_ms": server_itl_ms}}
    return {
        "arm": "draft",
        "prompt_id": "c1",
        "repeat": 0,
        "error": None,
        "warmup": False,
        "chunks": chunks,
        "t_end_ns": 900_000_000,
        "usage": {"completion_tokens": 48, "prompt_tokens": 70},
        **metrics_field,
    }


def test_a_burst_without_server_timing_is_untimed_not_silently_nan() -> None:
    rec = burst_record(None)
    assert metrics.tpot_ms(read_record(rec)) == 0.0 and pd.isna(metrics.decode_tok_s(read_record(rec)))
    (found,) = measurement.untimed_decode(metrics.frame([rec]), ["draft"])
    assert found.code == "UNTIMED_DECODE" and "1 of 1 requests" in found.evidence
    assert "--enable-per-request-metrics" in found.evidence


def test_a_near_burst_is_untimed_too() -> None:
    # The real baseline record: two socket reads 2 µs apart read 495 247 tok/s.
    rec = burst_record(None)
    rec["chunks"][-2][0] += 95_000  # 95 µs over 47 tokens: 2 µs per token
    assert 0 < metrics.tpot_ms(read_record(rec)) < metrics.BURST_TPOT_MS and pd.isna(
        metrics.decode_tok_s(read_record(rec))
    )
    (found,) = measurement.untimed_decode(metrics.frame([rec]), ["draft"])
    assert found.code == "UNTIMED_DECODE"


def test_a_burst_takes_vllms_own_decode_timing_when_the_server_gives_it() -> None:
    rec = burst_record(25.0)  # vLLM --enable-per-request-metrics: mean inter-token latency in the engine
    assert (
        metrics.server_decode_tok_s(read_record(rec)) == 40.0
        and metrics.decode_tok_s(read_record(rec)) == 40.0
    )
    assert measurement.untimed_decode(metrics.frame([rec]), ["draft"]) == []


def test_a_chat_template_s_fixed_prefix_is_named_not_read_as_a_broken_cold_design() -> None:
    """Issue 44: SmolLM2's template prepends a fixed 24-token system prompt, which the server
    caches; on short prompts that was > 50 % of every prompt and fired CACHED_PREFILL on every
    run. Now the shared prefix is named (info) and the check reads past it."""
    df = pd.DataFrame(
        {
            "arm": ["a"] * 4,
            "prompt_id": ["p1", "p2", "p3", "p4"],
            "category": ["chat"] * 4,
            "prompt_tokens": [40.0, 44.0, 38.0, 60.0],
            "cached_tokens": [24.0, 24.0, 24.0, 55.0],  # p4 re-sent: a real cache hit past the prefix
        }
    )
    system = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM<|im_end|>\n<|im_start|>user\n"
    cells = [{"rendered_prompts": [{"text": system + "Hello"}, {"text": system + "Write a poem"}]}]
    found = measurement.cached_prefill(df, ["a"], cells)
    hot = [f for f in found if f.severity != "info"]
    (info,) = [f for f in found if f.severity == "info"]
    assert len(hot) == 1 and "1 of 4 requests" in hot[0].evidence and "p4: 55 of 60" in hot[0].evidence
    assert "first 24 prompt tokens" in info.evidence and "chat template" in info.evidence
    # without the rendered prompts (no evidence of a template) the old reading stands
    (old,) = measurement.cached_prefill(df, ["a"])
    assert "4 of 4 requests" in old.evidence
