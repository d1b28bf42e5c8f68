"""Named per-engine costs (engines/measured/, as theory/measured/engines.py reads them), each fitted
once: vLLM's EAGLE-3 proposer pays host work per drafting pass (fitted on a public source); on
llama-server on a CPU a probed verify's further tokens pay a share of the step's cost per context
position (fitted on the lab demo). Each test fails without the term."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specbench.engines import theory_priors
from specbench.engines.measured.llamacpp import CPU_QUERY_CONTEXT_SHARE as LLAMACPP_CPU_QUERY_CONTEXT_SHARE
from specbench.engines.measured.llamacpp import GPU_SPEC_PASS_S as LLAMACPP_GPU_SPEC_PASS_S
from specbench.engines.measured.vllm import EAGLE3_DRAFT_PASS_S as VLLM_EAGLE3_DRAFT_PASS_S
from specbench.engines.measured.vllm import EAGLE3_SOURCE
from specbench.theory import predict
from specbench.theory.arch import Architecture
from specbench.theory.cost import Efficiency
from specbench.theory.hardware import Gpu
from specbench.theory.inputs import Weights
from specbench.theory.measured.engines import engine_efficiency, method_efficiency
from specbench.theory.passcurve import PassCurve
from specbench.theory.presets import get_gpu
from specbench.theory.speedup import Breakdown, predict_architecture

PRIORS = theory_priors()
E = PRIORS.named  # an engine's terms, as it declares them
H100 = get_gpu("H100 SXM")
CPU = Gpu("cpu", bandwidth_gbs=20.0, tflops=0.2, memory_gb=8.0, unified=True, host_link_gbs=20.0)
# vllm#20780: Llama-3.1-8B BF16 on an H100, batch 1; TPOT 7.07 ms without speculation, and with
# EAGLE-3 at K = 2 TPOT 4.32 ms at a mean accepted length of 2.36 (the row the constant is fitted on)
BASE_TPOT_MS, K2_TPOT_MS, K2_AL = 7.07, 4.32, 2.36


def _eagle3(k: int, eff: Efficiency | None, al: float = K2_AL) -> float:
    # vLLM's proposer (its catch-up pass drafts the first token, theory/methods.py) without its
    # named host costs: the constant is what the model leaves out of the measured round
    p = predict("Llama-3.1-8B", H100, "BF16", "eagle3", k, accepted_length=al, context=512,
                baseline_tok_s=1000 / BASE_TPOT_MS, efficiency=eff, engine="vllm",
                priors=PRIORS.without(EAGLE3_SOURCE))  # fmt: skip
    return p.breakdown.round_s


def test_vllm_eagle3_on_a_gpu_pays_host_work_per_drafting_pass() -> None:
    eff = engine_efficiency(E("vllm"), H100, method="eagle3")
    assert eff.draft_pass_s == VLLM_EAGLE3_DRAFT_PASS_S > 0
    # EAGLE-1 in the same source needs none; other engines and vLLM on a CPU: unknown, 0
    assert engine_efficiency(E("vllm"), H100, method="eagle").draft_pass_s == 0.0
    assert engine_efficiency(E("llamacpp"), H100, method="eagle3").draft_pass_s == 0.0
    assert engine_efficiency(E("sglang"), H100, method="eagle3").draft_pass_s == 0.0
    assert engine_efficiency(E("vllm"), CPU, method="eagle3").draft_pass_s == 0.0
    for k in (2, 5):
        plain = predict("Llama-3.1-8B", H100, "BF16", "eagle3", k, alpha=0.7, context=512).breakdown
        costed = predict("Llama-3.1-8B", H100, "BF16", "eagle3", k, alpha=0.7, context=512, efficiency=eff)
        assert costed.breakdown.round_s - plain.round_s == pytest.approx(k * VLLM_EAGLE3_DRAFT_PASS_S)
        assert costed.breakdown.draft_host_s == pytest.approx(k * VLLM_EAGLE3_DRAFT_PASS_S)
        assert costed.breakdown.target_step_s == plain.target_step_s  # a plain step drafts nothing


def test_the_vllm_eagle3_constant_is_the_closed_form_fit_on_its_one_source_row() -> None:
    measured_round = K2_AL * K2_TPOT_MS * 1e-3  # TPOT × accepted length
    fitted = (measured_round - _eagle3(2, None)) / 2
    assert fitted == pytest.approx(VLLM_EAGLE3_DRAFT_PASS_S, abs=0.01e-3)
    assert _eagle3(2, replace(Efficiency(), draft_pass_s=fitted)) == pytest.approx(measured_round)


def test_a_method_cost_keeps_a_fitted_round_overhead() -> None:
    fitted = replace(Efficiency(), round_s=3.7e-3, drafted_s=1e-4)
    eff = method_efficiency(E("vllm"), H100, fitted, "eagle3")
    assert (eff.round_s, eff.drafted_s, eff.draft_pass_s) == (3.7e-3, 1e-4, VLLM_EAGLE3_DRAFT_PASS_S)
    assert method_efficiency(E("vllm"), H100, fitted, "mtp") == fitted


# --- the verify's further tokens over the context (forward probe at an empty cache) ---

SMALL = Architecture("small", layers=4, hidden=256, heads=4, kv_heads=2, head_dim=64, vocab=1024, ffn=512)
CURVE = PassCurve.from_probe({1: 40.0, 5: 60.0, 9: 80.0}, step_s=0.040)


def _probed(k: int, eff: Efficiency, slope: float) -> Breakdown:
    return predict_architecture(
        Weights(SMALL, 2.0, "F16"), CPU, "ngram", k, alpha=0.9, target_pass=CURVE, context=300,
        efficiency=eff, step_context_slope_s=slope,
    ).breakdown  # fmt: skip


def test_a_probed_verify_pays_each_further_token_s_share_of_the_step_s_context_cost() -> None:
    eff = engine_efficiency(E("llamacpp"), CPU)
    assert eff.query_context_share == LLAMACPP_CPU_QUERY_CONTEXT_SHARE == 0.5
    slope = 20e-6  # the measured step grows 20 µs per context position
    plain, costed = _probed(4, eff, 0.0), _probed(4, eff, slope)
    assert costed.verify_s - plain.verify_s == pytest.approx(4 * 300 * slope * 0.5)
    assert costed.verify_context_s == pytest.approx(4 * 300 * slope * 0.5)
    assert costed.target_step_s == plain.target_step_s  # the step's context is in the measured step
    # an engine whose attention behaviour is unknown pays nothing (share 0)
    assert _probed(4, Efficiency(), slope).verify_s == plain.verify_s
    assert engine_efficiency(E("llamacpp"), H100).query_context_share == 0.0


def test_llamacpp_on_a_gpu_pays_host_work_per_speculating_pass() -> None:
    # The H200 GPU-kit run: the n-gram arms' plain passes ran 0.24 / 0.13 ms slower than the
    # baseline's steps, and the dense draft4 rounds 0.19 ms longer than modelled (the fitted row).
    eff = engine_efficiency(E("llamacpp"), H100)
    assert eff.spec_pass_s == LLAMACPP_GPU_SPEC_PASS_S > 0
    assert engine_efficiency(E("llamacpp"), CPU).spec_pass_s == 0.0  # inside drafted_s there
    assert (
        engine_efficiency(E("vllm"), H100).spec_pass_s
        == engine_efficiency(E("sglang"), H100).spec_pass_s
        == 0.0
    )
    for method, k in (("ngram", 16), ("eagle3", 3)):
        # the same engine without the pass cost (its recurrent-state traffic kept: the model is hybrid)
        unpaid = replace(eff, spec_pass_s=0.0)
        plain = predict(
            "Qwen3.5-0.8B", H100, "BF16", method, k, alpha=0.8, context=512, efficiency=unpaid
        ).breakdown
        costed = predict("Qwen3.5-0.8B", H100, "BF16", method, k, alpha=0.8, context=512, efficiency=eff)
        b = costed.breakdown
        assert b.round_s - plain.round_s == pytest.approx(LLAMACPP_GPU_SPEC_PASS_S)  # once a round
        assert b.spec_pass_s == LLAMACPP_GPU_SPEC_PASS_S and b.target_step_s == plain.target_step_s


def test_a_speculating_arms_plain_passes_pay_the_pass_cost_in_the_replay() -> None:
    from specbench.analysis.predicted.counts import DraftCounts, measured_round_s, replayed_speedup

    # 2 rounds and 102 plain passes in a 128-token answer (the H200 n-gram arm's json request)
    c = DraftCounts(
        tokens=128, drafted=23, accepted=23, rounds=2, rounds_counted=True, requests=1, window_s=0.11
    )
    h = LLAMACPP_GPU_SPEC_PASS_S
    assert replayed_speedup(c, 0.8e-3, 3e-3, pass_s=h) == pytest.approx(
        127 * 0.8e-3 / (2 * 3e-3 + 102 * (0.8e-3 + h))
    )
    assert measured_round_s(c, 0.8e-3, pass_s=h) == pytest.approx((0.11 - 102 * (0.8e-3 + h)) / 2)
