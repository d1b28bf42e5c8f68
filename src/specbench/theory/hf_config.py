"""Read a Hugging Face ``config.json`` into an :class:`Architecture`.

Key map (first key present wins; multimodal configs are read from ``text_config``)::

    layers        num_hidden_layers / n_layer / num_layers
    hidden        hidden_size / n_embd / d_model
    heads         num_attention_heads          kv_heads   num_key_value_heads (default: heads)
    head_dim      head_dim (default hidden / heads)         vocab      vocab_size
    experts       num_experts / num_local_experts / n_routed_experts
    top_k         num_experts_per_tok / moe_topk
    expert_ffn    moe_intermediate_size (else intermediate_size when the model has experts)
    shared        shared_expert_intermediate_size (one shared expert) or n_shared_experts × expert_ffn
    dense_layers  first_k_dense_replace / len(mlp_only_layers)
    linear_layers layer_types == "linear_attention", else layers − layers // full_attention_interval
    sliding       layer_types == "sliding_attention", window sliding_window
    mtp_layers    mtp_num_hidden_layers / num_nextn_predict_layers
    MLA           kv_lora_rank, q_lora_rank, qk_rope_head_dim, v_head_dim; head_dim becomes
                  qk_nope_head_dim + qk_rope_head_dim (DeepSeek-V2/V3, Kimi K2)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specbench.errors import ConfigError
from specbench.theory.arch import Architecture, architecture_from_mapping


def load_hf_config(path: str | Path) -> Architecture:
    """Architecture from a config.json file (or a directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"cannot read Hugging Face config {str(p)!r}: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{str(p)!r}: a config.json must hold a JSON object")
    name = str(raw.get("_name_or_path") or p.parent.name or p.stem)
    return architecture_from_hf(name, raw)


def architecture_from_hf(name: str, raw: Mapping[str, Any]) -> Architecture:
    """Map a parsed config.json (see the module docstring) to an Architecture."""
    cfg = raw.get("text_config") or raw
    fields = {**_core(name, cfg), **_moe(cfg), **_mixers(cfg), **_mla(cfg)}
    fields["mtp_layers"] = _first(cfg, "mtp_num_hidden_layers", "num_nextn_predict_layers", default=0)
    fields["tied_embeddings"] = bool(raw.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False)))
    fields["attn_output_gate"] = bool(cfg.get("attn_output_gate", False))
    fields["source"] = f"Hugging Face config.json ({cfg.get('model_type', 'unknown type')})"
    return architecture_from_mapping(name, fields)


def _first(cfg: Mapping[str, Any], *keys: str, default: int | None = None) -> int:
    for k in keys:
        if cfg.get(k) is not None:
            return int(cfg[k])
    if default is None:
        raise ConfigError(f"config.json lacks {keys[0]}")
    return default


def _core(name: str, cfg: Mapping[str, Any]) -> dict[str, Any]:
    layers = _first(cfg, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _first(cfg, "hidden_size", "n_embd", "d_model")
    heads = _first(cfg, "num_attention_heads", "n_head")
    return {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "kv_heads": _first(cfg, "num_key_value_heads", default=heads),
        "head_dim": _first(cfg, "head_dim", default=hidden // max(heads, 1)),
        "vocab": _first(cfg, "vocab_size"),
    }


def _moe(cfg: Mapping[str, Any]) -> dict[str, Any]:
    experts = _first(cfg, "num_experts", "num_local_experts", "n_routed_experts", default=0)
    dense_ffn = _first(cfg, "intermediate_size", default=0)
    if experts == 0:
        return {"ffn": dense_ffn}
    expert_ffn = _first(cfg, "moe_intermediate_size", default=dense_ffn)
    dense_layers = _first(cfg, "first_k_dense_replace", default=len(cfg.get("mlp_only_layers") or []))
    shared_ffn = _first(cfg, "shared_expert_intermediate_size", default=0)
    n_shared = 1 if shared_ffn else _first(cfg, "n_shared_experts", default=0)
    return {
        "experts": experts,
        "top_k": _first(cfg, "num_experts_per_tok", "moe_topk"),
        "expert_ffn": expert_ffn,
        "shared_experts": n_shared,
        "shared_expert_ffn": shared_ffn or (expert_ffn if n_shared else 0),
        "dense_layers": dense_layers,
        "ffn": dense_ffn if dense_layers else 0,
    }


def _mla(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Multi-head latent attention, when config.json has a kv_lora_rank (else nothing)."""
    if not cfg.get("kv_lora_rank"):
        return {}
    rope = _first(cfg, "qk_rope_head_dim")
    return {
        "kv_lora_rank": _first(cfg, "kv_lora_rank"),
        "q_lora_rank": _first(cfg, "q_lora_rank", default=0),
        "qk_rope_dim": rope,
        "v_head_dim": _first(cfg, "v_head_dim"),
        "head_dim": _first(cfg, "qk_nope_head_dim") + rope,
    }


def _mixers(cfg: Mapping[str, Any]) -> dict[str, Any]:
    layers = int(cfg["num_hidden_layers"]) if "num_hidden_layers" in cfg else 0
    types = [str(t) for t in cfg.get("layer_types") or []]
    out: dict[str, Any] = {}
    if "linear_num_value_heads" in cfg:
        interval = _first(cfg, "full_attention_interval", default=0)
        linear = types.count("linear_attention") if types else layers - layers // interval if interval else 0
        out.update(
            linear_layers=linear,
            linear_key_heads=_first(cfg, "linear_num_key_heads"),
            linear_value_heads=_first(cfg, "linear_num_value_heads"),
            linear_key_dim=_first(cfg, "linear_key_head_dim", default=128),
            linear_value_dim=_first(cfg, "linear_value_head_dim", default=128),
            conv_kernel=_first(cfg, "linear_conv_kernel_dim", default=4),
        )
    if "sliding_attention" in types:
        out.update(
            sliding_layers=types.count("sliding_attention"), sliding_window=_first(cfg, "sliding_window")
        )
    return out
