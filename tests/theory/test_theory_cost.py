"""The per-forward cost model: bytes, FLOPs, roofline, fixed latencies, drafter shapes."""

from __future__ import annotations

import pytest

from specbench.errors import ConfigError
from specbench.theory.arch import active_params, always_read_params, expert_params
from specbench.theory.cost import Efficiency, forward_cost, forward_time, kernel_count, roofline
from specbench.theory.formulas import experts_touched
from specbench.theory.methods import dflash_drafter, eagle3_head, mtp_module
from specbench.theory.presets import get_gpu, get_model

BPW = 0.5  # bytes per weight: 4-bit
NO_LATENCY = Efficiency(kernel_s=0.0, forward_s=0.0, round_s=0.0)


def _expert_bytes(model: str, tokens: int) -> float:
    a = get_model(model)
    cost = forward_cost(a, BPW, 1, tokens, 4096)
    return cost.weight_bytes - always_read_params(a) * BPW


@pytest.mark.parametrize(("k", "ratio"), [(4, 4.70), (8, 7.95)])
def test_verify_reads_n_of_k_plus_1_over_k_expert_bytes(k: int, ratio: float) -> None:
    # K = 4..8: verifying K+1 tokens reads ~5-8x the expert bytes of one decode step
    assert _expert_bytes("Qwen3.6-35B-A3B", k + 1) / _expert_bytes("Qwen3.6-35B-A3B", 1) == pytest.approx(
        ratio, abs=0.02
    )


def test_step_weight_bytes_formula() -> None:
    a = get_model("Qwen3.6-35B-A3B")
    cost = forward_cost(a, BPW, 3, 2, 100)  # 3 sequences x 2 tokens: union over 6 tokens
    expected = (always_read_params(a) + a.moe_layers * experts_touched(256, 8, 6) * expert_params(a)) * BPW
    assert cost.weight_bytes == pytest.approx(expected)
    assert cost.experts_touched == pytest.approx(experts_touched(256, 8, 6))
    assert cost.tokens == 6


def test_dense_verify_costs_about_one_step() -> None:
    a = get_model("Qwen3.6-27B")
    step, verify = forward_cost(a, BPW, 1, 1, 4096), forward_cost(a, BPW, 1, 4, 4096)
    assert verify.weight_bytes == step.weight_bytes
    assert verify.bytes / step.bytes == pytest.approx(1.0, abs=0.01)
    assert verify.flops == pytest.approx(4 * step.flops)


def test_cache_bytes_grow_with_context_and_sequences() -> None:
    a = get_model("Llama-3.1-8B")
    short, long = forward_cost(a, BPW, 1, 1, 1024), forward_cost(a, BPW, 1, 1, 8192)
    assert long.cache_bytes > 7 * short.cache_bytes
    assert forward_cost(a, BPW, 4, 1, 1024).cache_bytes == pytest.approx(4 * short.cache_bytes)
    hybrid = get_model("Qwen3.6-35B-A3B")
    state = forward_cost(hybrid, BPW, 1, 1, 1).cache_bytes
    assert state > 2 * 62 * 2**20  # the recurrent state is read and written every step


def test_flops_per_token_are_two_per_active_weight_plus_attention() -> None:
    a = get_model("Llama-3.1-8B")
    at_zero_ctx = forward_cost(a, BPW, 1, 1, 0)
    assert at_zero_ctx.flops == pytest.approx(2 * active_params(a))
    assert forward_cost(a, BPW, 1, 1, 1000).flops == pytest.approx(
        2 * active_params(a) + 4 * 32 * 128 * 32 * 1000
    )


def test_roofline_bound_switches_from_bandwidth_to_compute() -> None:
    a, h100 = get_model("Llama-3.1-8B"), get_gpu("H100 SXM")
    _, small = roofline(forward_cost(a, 2.0, 1, 1, 4096), h100, Efficiency())
    _, large = roofline(forward_cost(a, 2.0, 1, 4096, 4096), h100, Efficiency())
    assert (small, large) == ("bandwidth", "compute")


def test_forward_time_is_roofline_over_efficiency_plus_latencies() -> None:
    a, gpu = get_model("Llama-3.1-8B"), get_gpu("RTX 3090")
    cost = forward_cost(a, BPW, 1, 1, 4096)
    assert forward_time(cost, gpu, NO_LATENCY) == pytest.approx(cost.bytes / (936e9 * 0.6))
    eff = Efficiency(kernel_s=1e-6, forward_s=5e-4)
    extra = forward_time(cost, gpu, eff) - forward_time(cost, gpu, Efficiency(kernel_s=0.0, forward_s=0.0))
    assert extra == pytest.approx(kernel_count(a) * 1e-6 + 5e-4)
    assert kernel_count(get_model("Qwen3.6-35B-A3B")) > kernel_count(a)


def test_efficiency_is_validated() -> None:
    with pytest.raises(ConfigError):
        Efficiency(bandwidth=0.0)
    with pytest.raises(ConfigError):
        Efficiency(compute=1.5)
    with pytest.raises(ConfigError):
        Efficiency(kernel_s=-1.0)


def test_drafter_shapes() -> None:
    moe = get_model("Qwen3.6-35B-A3B")
    mtp = mtp_module(moe)
    assert (mtp.layers, mtp.linear_layers, mtp.experts, mtp.vocab) == (1, 0, 256, moe.vocab)
    eagle = eagle3_head(get_model("Llama-3.1-8B"))
    assert (eagle.layers, eagle.ffn, eagle.vocab, eagle.is_moe) == (1, 14336, 32000, False)
    assert eagle3_head(moe).ffn == 8 * 512 + 512
    assert dflash_drafter(moe).layers == 5
    with pytest.raises(ConfigError, match="no MTP"):
        mtp_module(get_model("Llama-3.1-8B"))
