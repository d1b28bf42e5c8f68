"""Model architecture and the per-layer quantities the cost model needs.

All counts are parameters (weights), not bytes; a quantisation turns them into bytes.
SwiGLU FFNs have three matrices, so a width-``f`` FFN holds ``3·hidden·f`` weights.

Per layer kind::

    full attention   q: h·H·d·(2 if output gate else 1)   k, v: h·Hkv·d each   o: H·d·h
    Gated DeltaNet   in: h·(2·Hk·dk + 2·Hv·dv) + h·2·Hv    conv: (2·Hk·dk + Hv·dv)·w   out: Hv·dv·h
    dense FFN        3·h·f
    routed expert    3·h·f_e  (each of E; a token uses k of them)
    shared experts   S·3·h·f_s  + router h·E
    LM head          V·h  (read every step even when tied to the embedding)

Per sequence, the KV cache of a full-attention layer at context ``n`` is ``2·Hkv·d·n`` values;
a sliding-window layer keeps ``min(n, window)``. A Gated DeltaNet layer instead keeps a fixed
f32 recurrent state ``Hv·dk·dv`` plus an f32 convolution window ``(w − 1)·(2·Hk·dk + Hv·dv)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from specbench.errors import ConfigError

STATE_BYTES = 4  # recurrent and convolution state are kept in f32
KV_BYTES = 2  # KV cache in f16


@dataclass(frozen=True)
class Architecture:
    """Shape of a decoder-only model; see ``presets/models.yaml`` for field meanings."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    ffn: int = 0
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    expert_ffn: int = 0
    shared_expert_ffn: int = 0
    dense_layers: int = 0
    linear_layers: int = 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_dim: int = 128
    linear_value_dim: int = 128
    conv_kernel: int = 4
    attn_output_gate: bool = False
    sliding_layers: int = 0
    sliding_window: int = 0
    mtp_layers: int = 0
    tied_embeddings: bool = False
    source: str = ""
    kv_lora_rank: int = 0  # MLA (DeepSeek-V2/V3, Kimi K2): the cached latent's width; 0 = not MLA
    q_lora_rank: int = 0  # MLA: the query's low-rank width (0: a full-rank q projection)
    qk_rope_dim: int = 0  # MLA: the decoupled RoPE key width, cached beside the latent
    v_head_dim: int = 0  # MLA: value head size (head_dim is the query/key head size)
    # drafting heads (theory/methods.py): weights every pass reads beyond the layer shapes above
    # (an MTP module's eh_proj, EAGLE's fusing fc, EAGLE-3's q/k/v over [embedding; hidden])
    input_params: int = 0
    # weights only the catch-up pass reads, whole on every tensor-parallel rank (EAGLE-3's fc)
    fuse_params: int = 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_hybrid(self) -> bool:
        return self.linear_layers > 0

    @property
    def attention_layers(self) -> int:
        return self.layers - self.linear_layers

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def dense_ffn_layers(self) -> int:
        return self.layers - self.moe_layers


def mla_params(a: Architecture) -> int:
    """One MLA layer: q (low-rank when q_lora_rank), kv_a down to latent + RoPE key, kv_b up to
    H·(d_nope + d_v), and o (DeepSeek-V2, arXiv:2405.04434, section 2.1)."""
    q_out = a.heads * a.head_dim
    q = a.hidden * a.q_lora_rank + a.q_lora_rank * q_out if a.q_lora_rank else a.hidden * q_out
    kv_a = a.hidden * (a.kv_lora_rank + a.qk_rope_dim)
    kv_b = a.kv_lora_rank * a.heads * (a.head_dim - a.qk_rope_dim + a.v_head_dim)
    return q + kv_a + kv_b + a.heads * a.v_head_dim * a.hidden


def attention_params(a: Architecture) -> int:
    """q (+ output gate), k, v and o projections of one full-attention layer."""
    if a.is_mla:
        return mla_params(a)
    q = a.hidden * a.heads * a.head_dim * (2 if a.attn_output_gate else 1)
    kv = 2 * a.hidden * a.kv_heads * a.head_dim
    return q + kv + a.heads * a.head_dim * a.hidden


def linear_conv_channels(a: Architecture) -> int:
    """Channels of the Gated DeltaNet short convolution: 2·Hk·dk + Hv·dv."""
    return 2 * a.linear_key_heads * a.linear_key_dim + a.linear_value_heads * a.linear_value_dim


def linear_attention_params(a: Architecture) -> int:
    """Projections of one Gated DeltaNet layer (qkvz, ba, conv, out)."""
    value_dim = a.linear_value_heads * a.linear_value_dim
    qkvz = a.hidden * (linear_conv_channels(a) + value_dim)
    ba = a.hidden * 2 * a.linear_value_heads
    return qkvz + ba + linear_conv_channels(a) * a.conv_kernel + value_dim * a.hidden


def dense_ffn_params(a: Architecture) -> int:
    return 3 * a.hidden * a.ffn


def expert_params(a: Architecture) -> int:
    """One routed expert: 3·h·f_e."""
    return 3 * a.hidden * a.expert_ffn


def shared_ffn_params(a: Architecture) -> int:
    """Always-read part of an MoE layer: shared experts, their gate and the router."""
    shared = a.shared_experts * (3 * a.hidden * a.shared_expert_ffn + a.hidden)
    return shared + a.hidden * a.experts


def lm_head_params(a: Architecture) -> int:
    return a.vocab * a.hidden


def mixer_params(a: Architecture) -> int:
    """Attention-side weights over all layers (full and linear attention)."""
    return a.attention_layers * attention_params(a) + a.linear_layers * linear_attention_params(a)


def always_read_params(a: Architecture) -> int:
    """Weights every forward pass reads regardless of routing (all but the routed experts)."""
    ffn = a.dense_ffn_layers * dense_ffn_params(a) + a.moe_layers * shared_ffn_params(a)
    return mixer_params(a) + ffn + lm_head_params(a) + a.input_params


def active_params(a: Architecture) -> int:
    """Weights one token uses: always-read + k routed experts per MoE layer."""
    return always_read_params(a) + a.moe_layers * a.top_k * expert_params(a)


def total_params(a: Architecture) -> int:
    """Stored weights: always-read + all E experts + the embedding when untied."""
    embedding = 0 if a.tied_embeddings else a.vocab * a.hidden
    return always_read_params(a) + a.moe_layers * a.experts * expert_params(a) + embedding


def kv_values_per_position(a: Architecture) -> int:
    """Cached values per position and layer: 2·Hkv·d (MHA/GQA), or the MLA latent plus its RoPE
    key, kv_lora_rank + qk_rope_dim, shared by all heads (what vLLM and llama.cpp cache)."""
    return a.kv_lora_rank + a.qk_rope_dim if a.is_mla else 2 * a.kv_heads * a.head_dim


def kv_cache_bytes(a: Architecture, context: int) -> int:
    """KV cache of one sequence at ``context`` tokens: Σ_layers values/position · n_eff · 2 bytes."""
    full = a.attention_layers - a.sliding_layers
    sliding = a.sliding_layers * min(context, a.sliding_window)
    return kv_values_per_position(a) * KV_BYTES * (full * context + sliding)


def recurrent_state_bytes(a: Architecture) -> int:
    """Recurrent + convolution state of one sequence, f32: L_lin·(Hv·dk·dv + (w−1)·channels)·4."""
    state = a.linear_value_heads * a.linear_key_dim * a.linear_value_dim
    conv = (a.conv_kernel - 1) * linear_conv_channels(a)
    return a.linear_layers * (state + conv) * STATE_BYTES


def architecture_from_mapping(name: str, data: Mapping[str, Any]) -> Architecture:
    """Build and check an Architecture from a preset mapping; unknown or bad fields -> ConfigError."""
    known = {f.name: f.type for f in fields(Architecture)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"model {name!r}: unknown field(s) {', '.join(unknown)}")
    values: dict[str, Any] = {k: _coerce(name, k, v) for k, v in data.items() if k != "name"}
    try:
        arch = Architecture(name=name, **values)
    except TypeError as err:
        raise ConfigError(f"model {name!r}: {err}") from None
    check_architecture(arch)
    return arch


def _coerce(name: str, field: str, value: Any) -> Any:
    if field == "source":
        return str(value)
    if field in ("attn_output_gate", "tied_embeddings"):
        return bool(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"model {name!r}: {field} must be a non-negative integer, got {value!r}")
    return value


def check_architecture(a: Architecture) -> None:
    """Reject shapes the cost model cannot use (one-line ConfigError)."""
    for field in ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab"):
        if getattr(a, field) <= 0:
            raise ConfigError(f"model {a.name!r}: {field} must be positive")
    if a.linear_layers > a.layers or a.sliding_layers > a.attention_layers:
        raise ConfigError(f"model {a.name!r}: more linear/sliding layers than layers")
    if a.is_moe and not 0 < a.top_k <= a.experts:
        raise ConfigError(f"model {a.name!r}: top_k must be in 1..experts")
    if a.is_moe and a.expert_ffn <= 0:
        raise ConfigError(f"model {a.name!r}: an MoE model needs expert_ffn")
    if a.dense_ffn_layers and a.ffn <= 0:
        raise ConfigError(f"model {a.name!r}: dense layers need ffn")
    if a.is_mla and (not 0 < a.qk_rope_dim < a.head_dim or a.v_head_dim <= 0):
        raise ConfigError(f"model {a.name!r}: MLA needs 0 < qk_rope_dim < head_dim and v_head_dim")
    if a.is_hybrid and a.linear_value_heads <= 0:
        raise ConfigError(f"model {a.name!r}: linear layers need linear_value_heads")
