"""Write a lab model (llama dense, qwen3moe or qwen35 hybrid) as GGUF with the ``gguf`` package."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import gguf
import gguf.quants
import numpy as np

from specbench.lab import weights as W
from specbench.lab.vocab import UNK, Vocab

Arch = Literal["dense", "moe", "hybrid"]
ARCHS: tuple[Arch, ...] = ("dense", "moe", "hybrid")
GGUF_ARCH: dict[str, str] = {"dense": "llama", "moe": "qwen3moe", "hybrid": "qwen35"}
HYBRID_FIELDS = ("ssm_d_state", "ssm_n_group", "ssm_n_v_head", "ssm_d_conv", "full_attn_interval")

# Deliberately simple: role, colon, content, newline. Its last token (":") leads into the cycle.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}assistant:{%- endif -%}"
)


@dataclass(frozen=True)
class ModelShape:
    """Sizes of one lab model. ``n_expert == 0`` means dense.

    Hybrid (llama.cpp ``qwen35``, Qwen3.5/3.6): every ``full_attn_interval``-th layer is gated
    full attention, the others Gated DeltaNet with ``ssm_n_group`` key heads and ``ssm_n_v_head``
    value heads of width ``ssm_d_state`` (k and v head widths are equal in llama.cpp) and a causal
    conv of ``ssm_d_conv`` taps; every layer has a dense SwiGLU FFN of ``n_ff``.
    """

    arch: Arch
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ctx: int = 8192
    dtype: Literal["f16", "f32", "q8_0"] = "f16"  # q8_0: layer matrices only; embeddings stay f16
    ssm_d_state: int = 0
    ssm_n_group: int = 0
    ssm_n_v_head: int = 0
    ssm_d_conv: int = 0
    full_attn_interval: int = 0

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def ssm_d_inner(self) -> int:
        """Value width of a DeltaNet layer (``ssm.inner_size``): value heads x head width."""
        return self.ssm_d_state * self.ssm_n_v_head

    @property
    def ssm_conv_dim(self) -> int:
        """Channels of the causal conv: q and k (one per key head) plus v."""
        return 2 * self.ssm_d_state * self.ssm_n_group + self.ssm_d_inner

    @property
    def n_rot(self) -> int:
        """Qwen3.5 rotates a quarter of each head (``partial_rotary_factor`` 0.25)."""
        return self.head_dim // 4

    def is_recurrent(self, layer: int) -> bool:
        """llama.cpp's default layer pattern: layer i is full attention iff (i+1) % interval == 0."""
        return self.arch == "hybrid" and (layer + 1) % self.full_attn_interval != 0

    def recurrent_layers(self) -> int:
        return sum(self.is_recurrent(i) for i in range(self.n_layer))

    def as_dict(self) -> dict[str, object]:
        """The fields; hybrid-only ones are left out of dense/MoE shapes (stable cache keys)."""
        d = asdict(self)
        if self.arch != "hybrid":
            for name in HYBRID_FIELDS:
                del d[name]
        return d


def write_model(path: Path, shape: ModelShape, vocab: Vocab, successor: list[int], seed: int) -> None:
    """Write one model whose greedy successor of token t is ``successor[t]``."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), GGUF_ARCH[shape.arch])
    _write_hparams(writer, shape, vocab)
    _write_tokenizer(writer, vocab)
    codes = W.token_codes(rng, vocab.size, shape.n_embd)
    head_dtype = "f32" if shape.dtype == "f32" else "f16"
    _add(writer, "token_embd.weight", W.embedding(codes), head_dtype)
    writer.add_tensor("output_norm.weight", np.ones(shape.n_embd, dtype=np.float32))
    _add(writer, "output.weight", W.readout(codes, successor, vocab.normal_ids), head_dtype)
    for layer in range(shape.n_layer):
        tensors = _hybrid_layer(rng, shape, layer) if shape.arch == "hybrid" else _layer_tensors(rng, shape)
        for name, tensor in tensors.items():
            f32 = tensor.ndim == 1 or name in F32_MATRICES
            _add(writer, f"blk.{layer}.{name}", tensor, "f32" if f32 else shape.dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# Matrices llama.cpp needs in f32: ggml_ssm_conv asserts f32 kernels (convert_hf_to_gguf keeps it f32).
F32_MATRICES = frozenset({"ssm_conv1d.weight"})


def _add(writer: gguf.GGUFWriter, name: str, tensor: np.ndarray, dtype: str) -> None:
    """Norms stay f32; matrices are f16, f32 or Q8_0 (quantized here with gguf.quants)."""
    if dtype == "q8_0":
        qtype = gguf.GGMLQuantizationType.Q8_0
        writer.add_tensor(name, gguf.quants.quantize(tensor, qtype), raw_dtype=qtype)
    else:
        writer.add_tensor(name, tensor.astype(np.float16 if dtype == "f16" else np.float32))


def _write_hparams(writer: gguf.GGUFWriter, shape: ModelShape, vocab: Vocab) -> None:
    writer.add_name(f"specbench-lab-{shape.arch}")
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_dimension_count(shape.n_rot if shape.arch == "hybrid" else shape.head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(vocab.size)
    writer.add_file_type(
        gguf.LlamaFileType.MOSTLY_F16 if shape.dtype == "f16" else gguf.LlamaFileType.ALL_F32
    )
    if shape.arch == "moe":
        writer.add_key_length(shape.head_dim)
        writer.add_value_length(shape.head_dim)
        writer.add_expert_count(shape.n_expert)
        writer.add_expert_used_count(shape.n_expert_used)
        writer.add_expert_feed_forward_length(shape.n_ff_exp)
    if shape.arch == "hybrid":
        writer.add_key_length(shape.head_dim)
        writer.add_value_length(shape.head_dim)
        # Interleaved M-RoPE as Qwen3.5 writes it (text-only: all positions equal); sums to n_rot / 2.
        half, third = shape.n_rot // 2, -(-shape.n_rot // 6)  # 32 -> [11, 11, 10, 0] like Qwen3.5
        writer.add_rope_dimension_sections([third, third, half - 2 * third, 0])
        writer.add_ssm_conv_kernel(shape.ssm_d_conv)
        writer.add_ssm_state_size(shape.ssm_d_state)
        writer.add_ssm_group_count(shape.ssm_n_group)
        writer.add_ssm_time_step_rank(shape.ssm_n_v_head)
        writer.add_ssm_inner_size(shape.ssm_d_inner)
        writer.add_full_attention_interval(shape.full_attn_interval)


def _write_tokenizer(writer: gguf.GGUFWriter, vocab: Vocab) -> None:
    writer.add_tokenizer_model("llama")
    writer.add_token_list(vocab.pieces)
    writer.add_token_scores([0.0] * vocab.size)
    writer.add_token_types(vocab.types)
    writer.add_unk_token_id(UNK)
    writer.add_bos_token_id(vocab.bos)
    writer.add_eos_token_id(vocab.eos)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_bool("tokenizer.ggml.add_space_prefix", False)
    writer.add_chat_template(CHAT_TEMPLATE)


def _layer_tensors(rng: np.random.Generator, s: ModelShape) -> dict[str, np.ndarray]:
    d, hd = s.n_embd, s.head_dim
    ones = np.ones(d, dtype=np.float32)
    t = {
        "attn_norm.weight": ones,
        "attn_q.weight": W.input_projection(rng, s.n_head * hd, d),
        "attn_k.weight": W.input_projection(rng, s.n_head_kv * hd, d),
        "attn_v.weight": W.input_projection(rng, s.n_head_kv * hd, d),
        "attn_output.weight": W.output_projection(rng, d, s.n_head * hd),
        "ffn_norm.weight": ones,
    }
    if s.arch == "dense":
        t["ffn_gate.weight"] = W.input_projection(rng, s.n_ff, d)
        t["ffn_up.weight"] = W.input_projection(rng, s.n_ff, d)
        t["ffn_down.weight"] = W.output_projection(rng, d, s.n_ff)
        return t
    t["attn_q_norm.weight"] = np.ones(hd, dtype=np.float32)
    t["attn_k_norm.weight"] = np.ones(hd, dtype=np.float32)
    t["ffn_gate_inp.weight"] = W.input_projection(rng, s.n_expert, d)
    t["ffn_gate_exps.weight"] = _experts(rng, s, W.input_projection, s.n_ff_exp, d)
    t["ffn_up_exps.weight"] = _experts(rng, s, W.input_projection, s.n_ff_exp, d)
    t["ffn_down_exps.weight"] = _experts(rng, s, W.output_projection, d, s.n_ff_exp)
    return t


def _hybrid_layer(rng: np.random.Generator, s: ModelShape, layer: int) -> dict[str, np.ndarray]:
    """One ``qwen35`` block: gated full attention or Gated DeltaNet, then a SwiGLU FFN.

    Names and shapes follow llama.cpp's ``llama_model_qwen35::load_arch_tensors``. As in the
    other archs, only the output projections (``attn_output``, ``ssm_out``, ``ffn_down``) are
    scaled down, so the recurrent state is real and evolves, but moves the residual by ~1 %.
    """
    d, hd = s.n_embd, s.head_dim
    ones = np.ones(d, dtype=np.float32)
    t: dict[str, np.ndarray] = {"attn_norm.weight": ones, "post_attention_norm.weight": ones}
    if not s.is_recurrent(layer):
        t["attn_q.weight"] = W.input_projection(rng, 2 * s.n_head * hd, d)  # query and output gate
        t["attn_k.weight"] = W.input_projection(rng, s.n_head_kv * hd, d)
        t["attn_v.weight"] = W.input_projection(rng, s.n_head_kv * hd, d)
        t["attn_output.weight"] = W.output_projection(rng, d, s.n_head * hd)
        t["attn_q_norm.weight"] = np.ones(hd, dtype=np.float32)
        t["attn_k_norm.weight"] = np.ones(hd, dtype=np.float32)
    else:
        n_v = s.ssm_n_v_head
        t["attn_qkv.weight"] = W.input_projection(rng, s.ssm_conv_dim, d)
        t["attn_gate.weight"] = W.input_projection(rng, s.ssm_d_inner, d)  # z, the output gate
        # depthwise causal conv, one ssm_d_conv-tap kernel per channel (rows sum to about 1)
        conv = rng.uniform(0.0, 2.0 / s.ssm_d_conv, (s.ssm_conv_dim, s.ssm_d_conv))
        t["ssm_conv1d.weight"] = conv.astype(np.float32)
        # decay g = exp(ssm_a * softplus(alpha + dt_bias)): A = -exp(A_log), A_log ~ log U(1, 16)
        t["ssm_dt.bias"] = np.log(np.expm1(rng.uniform(1e-3, 0.1, n_v))).astype(np.float32)
        t["ssm_a"] = (-rng.uniform(1.0, 16.0, n_v)).astype(np.float32)
        t["ssm_beta.weight"] = W.input_projection(rng, n_v, d)
        t["ssm_alpha.weight"] = W.input_projection(rng, n_v, d)
        t["ssm_norm.weight"] = np.ones(s.ssm_d_state, dtype=np.float32)
        t["ssm_out.weight"] = W.output_projection(rng, d, s.ssm_d_inner)
    t["ffn_gate.weight"] = W.input_projection(rng, s.n_ff, d)
    t["ffn_up.weight"] = W.input_projection(rng, s.n_ff, d)
    t["ffn_down.weight"] = W.output_projection(rng, d, s.n_ff)
    return t


def _experts(
    rng: np.random.Generator, s: ModelShape, make: W.MatrixMaker, rows: int, cols: int
) -> np.ndarray:
    return np.stack([make(rng, rows, cols) for _ in range(s.n_expert)])


def weight_bytes(shape: ModelShape, n_vocab: int) -> dict[str, int]:
    """Weight bytes read per decoded token: the always-read part, and one expert (MoE)."""
    elt = {"f16": 2.0, "f32": 4.0, "q8_0": 34 / 32}[shape.dtype]  # Q8_0: 32 int8 + one f16 scale
    d, hd = shape.n_embd, shape.head_dim
    attn = d * hd * (2 * shape.n_head + 2 * shape.n_head_kv)
    lm_head = n_vocab * d
    if shape.arch == "dense":
        return {"bytes_per_token": round(elt * shape.n_layer * (attn + 3 * d * shape.n_ff) + 2 * lm_head)}
    if shape.arch == "hybrid":
        return _hybrid_bytes(shape, elt, lm_head)
    expert = round(elt * 3 * d * shape.n_ff_exp)
    shared = round(elt * shape.n_layer * (attn + d * shape.n_expert) + 2 * lm_head)
    return {
        "shared_bytes_per_token": shared,
        "bytes_per_expert": expert,
        "bytes_per_token": shared + expert * shape.n_expert_used * shape.n_layer,
    }


def _hybrid_bytes(s: ModelShape, elt: float, lm_head: int) -> dict[str, int]:
    """Hybrid: weights per token, plus the per-sequence recurrent state a checkpoint copies
    (f32 conv and DeltaNet states of the linear layers) and the KV bytes per token (f16)."""
    d, hd = s.n_embd, s.head_dim
    n_recr = s.recurrent_layers()
    n_attn = s.n_layer - n_recr
    attn = d * hd * (3 * s.n_head + 2 * s.n_head_kv)  # q + gate, k, v, output
    linear = d * (s.ssm_conv_dim + 2 * s.ssm_d_inner + 2 * s.ssm_n_v_head)  # qkv, z, out, beta, alpha
    weights = n_attn * attn + n_recr * linear + s.n_layer * 3 * d * s.n_ff
    state = 4 * n_recr * (s.ssm_d_state * s.ssm_d_inner + (s.ssm_d_conv - 1) * s.ssm_conv_dim)
    return {
        "bytes_per_token": round(elt * weights + 2 * lm_head),
        "recurrent_layers": n_recr,
        "attention_layers": n_attn,
        "recurrent_state_bytes": state,
        "kv_bytes_per_token": 2 * 2 * n_attn * s.n_head_kv * hd,
    }
