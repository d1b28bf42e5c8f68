"""The LM head in its own format (llama.cpp K-quant mixes: Q6_K) and the drafting heads' weights
outside the layer shapes (MTP eh_proj, EAGLE fc, EAGLE-3's wider q/k/v and its replicated fc)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specbench.theory.arch import lm_head_params
from specbench.theory.calibrate import fit_bandwidth
from specbench.theory.cost import Efficiency, forward_cost, forward_time
from specbench.theory.inputs import Weights
from specbench.theory.methods import DraftSetup, catchup_time, eagle3_head, eagle_head, mtp_module
from specbench.theory.parallel import tensor_parallel_device
from specbench.theory.presets import get_gpu, get_model, get_quant
from specbench.theory.speedup import predict_architecture


def test_kquant_mixes_keep_the_head_at_q6k_and_q8_0_keeps_its_own() -> None:
    assert get_quant("Q4_K_M").head_bits == 6.5625
    assert get_quant("UD-Q4_K_XL").head_bits == 6.5625
    assert get_quant("Q8_0").head_bits is None and get_quant("BF16").head_bits is None


def test_a_head_in_its_own_format_adds_its_bytes_to_every_pass() -> None:
    a = get_model("Qwen3.6-35B-A3B")
    q = get_quant("Q4_K_M")
    plain = forward_cost(a, q.bytes_per_weight, 1, 1, 4096)
    mixed = forward_cost(a, q.bytes_per_weight, 1, 1, 4096, q.head_bytes_per_weight)
    extra = lm_head_params(a) * (6.5625 - 4.85) / 8
    assert mixed.weight_bytes - plain.weight_bytes == pytest.approx(extra)


def test_the_head_format_costs_an_mtp_pass_more_than_the_target_step() -> None:
    # an MTP pass is mostly the shared head, so a Q6_K head slows it more than the whole step
    a, q = get_model("Qwen3.6-35B-A3B"), get_quant("Q4_K_M")
    m = mtp_module(a)

    def ratio(cost_a: float, cost_b: float) -> float:
        return cost_a / cost_b

    body = q.bytes_per_weight
    mtp = ratio(
        forward_cost(m, body, 1, 1, 4096, q.head_bytes_per_weight).bytes,
        forward_cost(m, body, 1, 1, 4096).bytes,
    )
    step = ratio(
        forward_cost(a, body, 1, 1, 4096, q.head_bytes_per_weight).bytes,
        forward_cost(a, body, 1, 1, 4096).bytes,
    )
    assert mtp > step > 1.0


def test_the_q6k_head_lowers_a_kquant_mtp_speedup() -> None:
    # η_bw fitted to the same baseline both ways: the head's bytes weigh more in the MTP pass
    a, q, gpu = get_model("Qwen3.6-35B-A3B"), get_quant("Q4_K_M"), get_gpu("A100 80GB")

    def speedup(head: float | None) -> float:
        target = Weights(a, q.bytes_per_weight, q.name, head)
        eff = fit_bandwidth(133.61, target, gpu)
        return predict_architecture(target, gpu, "mtp", 4, acceptance=0.76, efficiency=eff).speedup

    assert speedup(q.head_bytes_per_weight) < speedup(None) * 0.995


def test_drafting_heads_read_their_fusing_weights() -> None:
    a = get_model("Llama-3.1-8B")
    h = a.hidden
    assert eagle_head(a).input_params == 2 * h * h
    e3 = eagle3_head(a)
    assert e3.input_params == h * (a.heads + 2 * a.kv_heads) * a.head_dim
    assert e3.fuse_params == 3 * h * h
    q = get_model("Qwen3.6-35B-A3B")
    assert mtp_module(q).input_params == q.mtp_layers * 2 * q.hidden * q.hidden


def test_eagle3_fc_is_whole_on_every_tensor_parallel_rank() -> None:
    # the catch-up pays 3h²·2 bytes at one rank's bandwidth, not 1/8 of them at eight ranks'
    a = get_model("Llama-3.3-70B")
    eff = Efficiency()
    gpu = tensor_parallel_device(get_gpu("H100"), 8, a)
    s = DraftSetup("eagle3", a, 2.0, None, 2.0, 4, 1, 4096)
    full = catchup_time(s, gpu, eff, 5)
    rank_s = 3 * a.hidden * a.hidden * 2 / (get_gpu("H100").bandwidth * eff.bandwidth)
    assert rank_s > 0.1e-3  # 403 MB at one H100's 0.6 · 3.35 TB/s
    no_fc = replace(eagle3_head(a), fuse_params=0)
    step = forward_time(forward_cost(no_fc, 2.0, 1, 5, 4096), gpu, eff)
    assert full - step == pytest.approx(rank_s, rel=0.02)
