"""The round's cost terms added for issue #33: LM-head rows on a measured pass curve, the engine's
host work per drafted token, MLA attention, hardware files and FP8/FP4 rates, calibrating on a
published baseline, tensor parallelism. Each test fails without its term."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specbench.engines import theory_priors
from specbench.engines.measured.llamacpp import CPU_DRAFTED_S as LLAMACPP_CPU_DRAFTED_S
from specbench.errors import ConfigError
from specbench.theory import predict
from specbench.theory.arch import Architecture, kv_cache_bytes, lm_head_params
from specbench.theory.cost import Efficiency, head_share
from specbench.theory.formulas import tree_tokens_per_round
from specbench.theory.hardware import Gpu
from specbench.theory.hf_config import architecture_from_hf
from specbench.theory.inputs import Weights
from specbench.theory.measured.engines import engine_efficiency
from specbench.theory.passcurve import PassCurve
from specbench.theory.presets import get_gpu, gpus
from specbench.theory.speedup import Tree, predict_architecture

CPU = Gpu("cpu", bandwidth_gbs=20.0, tflops=0.2, memory_gb=8.0, unified=True, host_link_gbs=20.0)
# Gemma 3 270M's shape: a 262,144 x 640 head (168M) over a 100M-parameter body
GEMMA = Architecture("gemma-like", layers=18, hidden=640, heads=4, kv_heads=1, head_dim=256, vocab=262144,
                     ffn=2048, tied_embeddings=True)  # fmt: skip
SMALL_VOCAB = replace(GEMMA, name="small-vocab", vocab=1024)
CURVE = PassCurve.from_probe({1: 40.0, 5: 60.0, 9: 80.0, 17: 100.0}, step_s=0.040)

PRIORS = theory_priors()


def _verify(arch: Architecture, eff: Efficiency | None = None) -> float:
    p = predict_architecture(
        Weights(arch, 0.6, "Q4_K_M"),
        CPU,
        "ngram",
        8,
        alpha=0.9,
        target_pass=CURVE,
        efficiency=eff,
        context=100,
    )
    return p.breakdown.verify_s


def test_a_probed_verify_pays_the_lm_head_rows_the_prefill_probe_skipped() -> None:
    # the probe's prefill of 9 tokens computed one head row; the verify computes nine
    share = head_share(GEMMA, 100)
    assert share == pytest.approx(lm_head_params(GEMMA) / 1e8, rel=0.25)  # ~1.7 for Gemma 3 270M
    body_only = CURVE(9) - CURVE.step_s  # 40 ms: the measured increase from 1 to 9 tokens
    gemma, small = _verify(GEMMA), _verify(SMALL_VOCAB)
    assert gemma - small == pytest.approx(body_only * (share - head_share(SMALL_VOCAB, 100)), rel=0.05)
    assert gemma > CURVE(9) + body_only  # more than a whole extra body increase


def test_llamacpp_on_a_cpu_pays_host_work_per_drafted_token() -> None:
    eff = engine_efficiency(PRIORS.named("llamacpp"), CPU)
    assert eff.drafted_s == LLAMACPP_CPU_DRAFTED_S > 0
    assert engine_efficiency(PRIORS.named("llamacpp"), get_gpu("RTX 3090")).drafted_s == 0.0
    assert engine_efficiency(PRIORS.named("vllm"), CPU).drafted_s == 0.0
    args = (Weights(SMALL_VOCAB, 0.6, "Q4_K_M"), CPU, "ngram", 8)
    plain = predict_architecture(*args, alpha=0.9, target_pass=CURVE).breakdown
    costed = predict_architecture(*args, alpha=0.9, target_pass=CURVE, efficiency=eff).breakdown
    assert costed.round_s - plain.round_s == pytest.approx(8 * LLAMACPP_CPU_DRAFTED_S)
    assert costed.drafted_s == pytest.approx(8 * LLAMACPP_CPU_DRAFTED_S)
    assert costed.target_step_s == plain.target_step_s  # a plain step drafts nothing


DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3 config.json, the fields the theory reads
    "model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
    "num_key_value_heads": 128, "vocab_size": 129280, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
    "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128, "v_head_dim": 128, "num_nextn_predict_layers": 1,
}  # fmt: skip


def test_mla_caches_the_latent_not_per_head_keys_and_values() -> None:
    a = architecture_from_hf("DeepSeek-V3", DEEPSEEK_V3)
    assert a.is_mla and a.head_dim == 192 and a.kv_lora_rank == 512
    # 61 layers x (512 + 64) f16 values per position: 70 KB, where 128 full heads would cache 5.6 MB
    assert kv_cache_bytes(a, 1) == 61 * (512 + 64) * 2
    mha = {**{k: v for k, v in DEEPSEEK_V3.items() if k != "kv_lora_rank"}, "head_dim": 192}
    no_mla = architecture_from_hf("V3 as MHA", mha)
    assert kv_cache_bytes(no_mla, 1) > 50 * kv_cache_bytes(a, 1)


def test_a_hardware_file_describes_a_device(tmp_path: Path) -> None:
    f = tmp_path / "box.yaml"
    f.write_text("name: my box\nbandwidth_gbs: 360\ntflops: 25.6\nmemory_gb: 12\ntflops_fp8: 51\n")
    g = get_gpu(str(f))
    assert (g.name, g.bandwidth_gbs, g.tflops_fp8) == ("my box", 360.0, 51.0)
    (tmp_path / "bad.yaml").write_text("bandwidth_gbs: fast\n")
    with pytest.raises(ConfigError, match="bad or missing"):
        get_gpu(str(tmp_path / "bad.yaml"))


def test_every_preset_device_names_its_source_and_fp8_weights_use_the_fp8_rate() -> None:
    assert all(gpus().get(n).source.startswith("https://") for n in gpus().names())
    for name in (
        "V100",
        "RTX 3060",
        "RTX 5090",
        "Apple M1 Ultra",
        "B200",
        "MI300X",
        "L4",
        "A10",
        "EPYC 9654",
    ):
        assert gpus().get(name).bandwidth_gbs > 0
    h100 = get_gpu("H100")
    assert h100.for_weights("FP8").tflops == h100.tflops_fp8 == 1979
    assert get_gpu("B200").for_weights("NVFP4").tflops == 9000
    assert h100.for_weights("Q4_K_M").tflops == h100.tflops  # integer formats dequantise to 16 bits


def test_predict_calibrates_on_a_published_baseline() -> None:
    args = ("Llama-3.1-8B", "RTX 3090", "Q4_K_M", "draft", 4)
    kw = {"alpha": 0.8, "draft_model": "Llama-3.2-1B"}
    p = predict(*args, baseline_tok_s=95.0, **kw)
    assert p.baseline_tok_s == pytest.approx(95.0, rel=1e-6)
    assert p.efficiency.bandwidth != Efficiency().bandwidth
    with pytest.raises(ConfigError, match="faster than"):
        predict(*args, baseline_tok_s=5000.0, **kw)


def test_tensor_parallel_splits_the_pass_and_pays_all_reduces() -> None:
    one = predict("Llama-3.1-8B", "H100", "BF16", "ngram", 4, alpha=0.7)
    two = predict("Llama-3.1-8B", "H100", "BF16", "ngram", 4, alpha=0.7, tensor_parallel=2)
    assert one.baseline_tok_s < two.baseline_tok_s < 2 * one.baseline_tok_s
    with pytest.raises(ConfigError, match="KV heads"):
        predict("Llama-3.1-8B", "H100", "BF16", "ngram", 4, alpha=0.7, tensor_parallel=3)


def test_the_json_of_a_prediction_carries_the_new_terms() -> None:
    p = predict("Llama-3.1-8B", "H100", "FP8", "ngram", 4, alpha=0.7)
    assert "drafted_s" in json.loads(json.dumps(p.to_dict(), default=str))["breakdown"]


def test_a_tree_verifies_its_draft_tokens_and_drafts_top_k_per_pass() -> None:
    chain = predict("Llama-3.1-8B", "H100", "BF16", "eagle3", 4, alpha=0.7).breakdown
    tree = predict("Llama-3.1-8B", "H100", "BF16", "eagle3", 4, alpha=0.7, tree=Tree(4, 32)).breakdown
    assert tree.verify_flops == pytest.approx(chain.verify_flops * 33 / 5, rel=0.01)  # 33 tokens, not 5
    assert tree.draft_s > chain.draft_s  # each pass expands 4 candidates
    # a level is accepted when any of its 4 candidates is: q = 1 − 0.3^4
    q = 1 - 0.3**4
    assert tree.tokens_per_round == pytest.approx(sum(q**i for i in range(5)))
    assert tree_tokens_per_round(0.7, 4, 1) == pytest.approx(chain.tokens_per_round)
    with pytest.raises(ConfigError, match="chain"):
        predict("Llama-3.1-8B", "H100", "BF16", "ngram", 4, alpha=0.7, tree=Tree(4, 32))


def test_a_published_accepted_length_sets_the_tokens_per_round() -> None:
    p = predict("Llama-3.1-8B", "H100", "BF16", "eagle", 4, accepted_length=2.39)
    assert p.breakdown.tokens_per_round == pytest.approx(2.39)
    with pytest.raises(ConfigError, match="exactly one"):
        predict("Llama-3.1-8B", "H100", "BF16", "eagle", 4, accepted_length=2.39, alpha=0.5)
    with pytest.raises(ConfigError, match=r"within 1\.\.K"):
        predict("Llama-3.1-8B", "H100", "BF16", "eagle", 4, accepted_length=6.0)


def test_eagle1_reads_the_target_lm_head_where_eagle3_reads_a_32k_one() -> None:
    e1 = predict("Llama-3.1-8B", "H100", "BF16", "eagle", 4, alpha=0.7).breakdown
    e3 = predict("Llama-3.1-8B", "H100", "BF16", "eagle3", 4, alpha=0.7).breakdown
    head_gap = (128256 - 32000) * 4096 * 2  # BF16 bytes of the larger head
    # EAGLE-1's fc (2h → h) every pass against EAGLE-3's q/k/v over 2h (h·(H + 2·Hkv)·d more)
    inputs = (2 * 4096 * 4096 - 4096 * (32 + 2 * 8) * 128) * 2
    assert e1.draft_bytes - e3.draft_bytes == pytest.approx(head_gap + inputs, rel=1e-6)
