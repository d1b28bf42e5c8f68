"""Preset data, name normalisation, unknown names, Hugging Face config.json loading, CPU probe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specbench.errors import ConfigError
from specbench.theory import list_presets, predict, presets
from specbench.theory.arch import (
    active_params,
    architecture_from_mapping,
    kv_cache_bytes,
    recurrent_state_bytes,
    total_params,
)
from specbench.theory.hardware import gpu_from_mapping, probe_cpu
from specbench.theory.hf_config import load_hf_config
from specbench.theory.presets import get_gpu, get_model, get_quant, preset_key

MiB = 2**20


def test_key_ignores_case_spaces_dashes_dots_underscores() -> None:
    assert (
        preset_key("RTX 3090")
        == preset_key("rtx-3090")
        == preset_key("rtx3090")
        == preset_key("Rtx_3090")
        == "rtx3090"
    )
    assert preset_key("Qwen3.6-35B-A3B") == "qwen3635ba3b"
    assert preset_key("q4_k_m") == preset_key("Q4-K-M") == "q4km"


def test_gpu_spellings_resolve_to_one_preset() -> None:
    names = {get_gpu(n).name for n in ("rtx3090", "RTX 3090", "rtx-3090", "3090")}
    assert names == {"RTX 3090"}
    assert get_gpu("m3-max").name == "Apple M3 Max"
    assert get_gpu("RTX 3090 Ti").name == "RTX 3090 Ti"


def test_quant_and_model_spellings() -> None:
    assert get_quant("q4_k_m") == get_quant("Q4_K_M")
    assert get_quant("ud-q4-k-xl").name == "UD-Q4_K_XL"
    assert get_quant("awq").name == "AWQ-4bit"
    assert get_model("qwen3.6-35b-a3b").name == "Qwen3.6-35B-A3B"
    assert get_model("Qwen/Qwen3.6-27B").name == "Qwen3.6-27B"


@pytest.mark.parametrize(
    ("lookup", "name", "listed"),
    [
        (get_gpu, "rtx 9090", ["RTX 3090", "H100 SXM", "Apple M3 Max", "cpu"]),
        (get_model, "Qwen9-1T", ["Qwen3.6-35B-A3B", "Llama-3.1-8B", "gpt-oss-120b"]),
        (get_quant, "Q1_K_Z", ["Q4_K_M", "UD-Q4_K_XL", "FP8"]),
    ],
)
def test_unknown_name_lists_known_names(lookup: Any, name: str, listed: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        lookup(name)
    message = str(info.value)
    assert name in message and "\n" not in message
    for known in listed:
        assert known in message


def test_list_presets_has_every_requested_entry() -> None:
    p = list_presets()
    for model in ("Qwen3.6-35B-A3B", "Qwen3.6-27B", "Qwen3.5-122B-A10B", "Qwen3-30B-A3B", "Llama-3.1-8B"):
        assert model in p["models"]
    assert "gpt-oss-120b" in p["models"]
    gpus = ["RTX 3090", "RTX 3090 Ti", "RTX 4090", "A100 40GB", "A100 80GB", "H100 SXM", "H100 PCIe"]
    for gpu in [*gpus, "H200", "L40S", "DGX Spark GB10", "Apple M3 Max", "cpu"]:
        assert gpu in p["gpus"]
    quants = ["F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_K_S", "Q4_0", "IQ4_XS", "Q3_K_M"]
    for quant in [*quants, "Q2_K", "UD-Q4_K_XL", "AWQ-4bit", "GPTQ-4bit", "FP8"]:
        assert quant in p["quants"]


def test_architecture_table_from_findings() -> None:
    moe = get_model("Qwen3.6-35B-A3B")
    assert (moe.layers, moe.linear_layers, moe.attention_layers, moe.hidden) == (40, 30, 10, 2048)
    assert (moe.experts, moe.top_k, moe.shared_experts, moe.expert_ffn) == (256, 8, 1, 512)
    assert (moe.heads, moe.kv_heads, moe.head_dim, moe.vocab, moe.mtp_layers) == (16, 2, 256, 248320, 1)
    dense = get_model("Qwen3.6-27B")
    assert (dense.layers, dense.linear_layers, dense.hidden, dense.ffn) == (64, 48, 5120, 17408)
    assert (dense.heads, dense.kv_heads, dense.head_dim, dense.is_moe) == (24, 4, 256, False)
    big = get_model("Qwen3.5-122B-A10B")
    assert (big.layers, big.hidden, big.experts, big.top_k, big.shared_experts, big.heads) == (
        48,
        3072,
        256,
        8,
        1,
        32,
    )


@pytest.mark.parametrize(
    ("model", "total_b", "active_b"),
    [
        ("Qwen3.6-35B-A3B", 35.0, 3.0),
        ("Qwen3.6-27B", 27.0, 27.0),
        ("Qwen3.5-122B-A10B", 122.0, 10.0),
        ("Qwen3-30B-A3B", 30.5, 3.3),
        ("Llama-3.1-8B", 8.0, 7.5),
        ("gpt-oss-120b", 116.8, 5.1),
    ],
)
def test_parameter_counts_match_model_names(model: str, total_b: float, active_b: float) -> None:
    a = get_model(model)
    assert total_params(a) / 1e9 == pytest.approx(total_b, rel=0.1)
    assert active_params(a) / 1e9 == pytest.approx(active_b, rel=0.12)


def test_recurrent_state_matches_cited_checkpoint_sizes() -> None:
    # field reports: 62.8-82 MiB per checkpoint (target alone; target + Qwen3.5-0.8B draft)
    target = recurrent_state_bytes(get_model("Qwen3.6-35B-A3B"))
    draft = recurrent_state_bytes(get_model("Qwen3.5-0.8B"))
    assert target / MiB == pytest.approx(62.8, abs=0.1)
    assert (target + draft) / MiB == pytest.approx(82.0, abs=0.2)
    assert recurrent_state_bytes(get_model("Llama-3.1-8B")) == 0


def test_gpu_table_from_findings() -> None:
    expected = {"RTX 3090": (936, 71), "A100 80GB": (2039, 312), "H100 SXM": (3350, 989)}
    for name, (bw, tflops) in expected.items():
        gpu = get_gpu(name)
        assert (gpu.bandwidth_gbs, gpu.tflops) == (bw, tflops)
    assert get_gpu("RTX 3090 Ti").bandwidth_gbs == 1008
    assert get_gpu("DGX Spark GB10").bandwidth_gbs == 273 and get_gpu("GB10").unified


def test_quant_bits() -> None:
    assert get_quant("BF16").bits == 16.0
    assert get_quant("Q8_0").bits == 8.5
    assert 4.5 <= get_quant("UD-Q4_K_XL").bits <= 4.9
    assert get_quant("Q2_K").bits < get_quant("Q3_K_M").bits < get_quant("Q4_K_M").bits
    assert get_quant("GPTQ").bytes_per_weight == pytest.approx(4.25 / 8)


def _qwen35_moe_config() -> dict[str, Any]:
    types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 10
    return {
        "model_type": "qwen3_5_moe",
        "tie_word_embeddings": False,
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            "num_hidden_layers": 40,
            "hidden_size": 2048,
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "vocab_size": 248320,
            "num_experts": 256,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 512,
            "shared_expert_intermediate_size": 512,
            "layer_types": types,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_conv_kernel_dim": 4,
            "attn_output_gate": True,
            "mtp_num_hidden_layers": 1,
        },
    }


def test_hf_config_nested_hybrid_moe_matches_preset(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_qwen35_moe_config()))
    loaded = load_hf_config(path)
    preset = get_model("Qwen3.6-35B-A3B")
    shape = ("layers", "linear_layers", "experts", "top_k", "shared_experts", "expert_ffn", "mtp_layers")
    for field in shape:
        assert getattr(loaded, field) == getattr(preset, field), field
    assert active_params(loaded) == active_params(preset)
    assert recurrent_state_bytes(loaded) == recurrent_state_bytes(preset)


def test_hf_config_interval_gpt_oss_and_llama(tmp_path: Path) -> None:
    qwen_next = {
        "num_hidden_layers": 48,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "vocab_size": 151936,
        "full_attention_interval": 4,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "num_experts": 512,
        "num_experts_per_tok": 10,
        "moe_intermediate_size": 512,
    }
    (tmp_path / "next.json").write_text(json.dumps(qwen_next))
    assert load_hf_config(tmp_path / "next.json").linear_layers == 36
    gpt_oss = {
        "num_hidden_layers": 4,
        "hidden_size": 2880,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 201088,
        "num_local_experts": 128,
        "num_experts_per_tok": 4,
        "intermediate_size": 2880,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
        "sliding_window": 128,
    }
    (tmp_path / "oss").mkdir()
    (tmp_path / "oss" / "config.json").write_text(json.dumps(gpt_oss))
    oss = get_model(str(tmp_path / "oss"))
    assert (oss.experts, oss.expert_ffn, oss.ffn) == (128, 2880, 0)
    assert (oss.sliding_layers, oss.sliding_window) == (2, 128)
    llama = {"num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336}
    llama |= {"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}
    (tmp_path / "llama.json").write_text(json.dumps(llama))
    loaded = get_model(str(tmp_path / "llama.json"))
    assert (loaded.head_dim, loaded.is_moe) == (128, False)
    assert total_params(loaded) == total_params(get_model("Llama-3.1-8B"))


def test_predict_accepts_a_config_path(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_qwen35_moe_config()))
    by_path = predict(str(path), "rtx3090", "UD-Q4_K_XL", "mtp", 3, alpha=0.7)
    by_name = predict("Qwen3.6-35B-A3B", "rtx3090", "UD-Q4_K_XL", "mtp", 3, alpha=0.7)
    assert by_path.speedup == pytest.approx(by_name.speedup)


def test_hf_config_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_hf_config(bad)
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"hidden_size": 8, "num_attention_heads": 1}))
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        load_hf_config(missing)


def test_bad_preset_entries_are_config_errors() -> None:
    base = {"layers": 2, "hidden": 8, "heads": 1, "kv_heads": 1, "head_dim": 8, "vocab": 10, "ffn": 16}
    assert architecture_from_mapping("ok", base).layers == 2
    with pytest.raises(ConfigError, match="unknown field"):
        architecture_from_mapping("x", {**base, "layerz": 3})
    with pytest.raises(ConfigError, match="non-negative integer"):
        architecture_from_mapping("x", {**base, "hidden": -8})
    with pytest.raises(ConfigError, match="top_k"):
        architecture_from_mapping("x", {**base, "experts": 4, "top_k": 5, "expert_ffn": 8})
    with pytest.raises(ConfigError, match="missing number"):
        gpu_from_mapping("g", {"bandwidth_gbs": 100})


def test_kv_cache_counts_only_attention_layers() -> None:
    hybrid = get_model("Qwen3.6-35B-A3B")
    # 10 full-attention layers x K and V x 2 kv heads x 256 dims x 4096 positions x 2 bytes
    assert kv_cache_bytes(hybrid, 4096) == 10 * 2 * 2 * 256 * 4096 * 2
    oss = get_model("gpt-oss-120b")
    grow = kv_cache_bytes(oss, 8192) - kv_cache_bytes(oss, 4096)
    # only the 18 full layers grow past the 128-token window
    assert grow == 18 * 2 * 8 * 64 * 4096 * 2


def test_cpu_probe_measures_this_machine() -> None:
    gpu = probe_cpu(size_bytes=16 * 2**20, reps=2)
    assert gpu.name == "cpu" and gpu.unified
    assert 0.1 < gpu.bandwidth_gbs < 10_000
    assert 1e-4 < gpu.tflops < 1_000


def test_cpu_is_probed_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def fake_probe() -> Any:
        calls.append(1)
        return probe_cpu(size_bytes=2**20, reps=1)

    presets.cpu.cache_clear()
    monkeypatch.setattr(presets, "probe_cpu", fake_probe)
    get_gpu("RTX 3090")
    list_presets()
    assert calls == []
    assert get_gpu("CPU").name == "cpu"
    get_gpu("cpu")
    assert calls == [1]
    presets.cpu.cache_clear()


def test_predict_lists_its_presets_without_an_error() -> None:
    """``predict --presets`` lists every model and GPU preset (before, only an error named them)."""
    import subprocess
    import sys

    from specbench.theory.presets import gpus, models

    done = subprocess.run(
        [sys.executable, "-m", "specbench.cli", "predict", "--presets"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    listed = {line.strip() for line in done.stdout.splitlines()}
    assert set(models().names()) <= listed and set(gpus().names()) <= listed
