"""Write a lab model (llama dense or qwen3moe) as GGUF with the ``gguf`` package."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import gguf
import gguf.quants
import numpy as np

from specbench.lab import weights as W
from specbench.lab.vocab import UNK, Vocab

Arch = Literal["dense", "moe"]
GGUF_ARCH: dict[str, str] = {"dense": "llama", "moe": "qwen3moe"}

# Deliberately simple: role, colon, content, newline. Its last token (":") leads into the cycle.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}assistant:{%- endif -%}"
)


@dataclass(frozen=True)
class ModelShape:
    """Sizes of one lab model. ``n_expert == 0`` means dense."""

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

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


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
        for name, tensor in _layer_tensors(rng, shape).items():
            _add(writer, f"blk.{layer}.{name}", tensor, "f32" if tensor.ndim == 1 else shape.dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


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
    writer.add_rope_dimension_count(shape.head_dim)
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
    expert = round(elt * 3 * d * shape.n_ff_exp)
    shared = round(elt * shape.n_layer * (attn + d * shape.n_expert) + 2 * lm_head)
    return {
        "shared_bytes_per_token": shared,
        "bytes_per_expert": expert,
        "bytes_per_token": shared + expert * shape.n_expert_used * shape.n_layer,
    }
