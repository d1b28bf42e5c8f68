"""Write a lab model as a Hugging Face folder (``LlamaForCausalLM``) that vLLM serves as is.

Same construction as the GGUF lab models (:mod:`specbench.lab.weights`): the residual carries
a code of the current token, every layer does real work but moves it by about 1 %, and the LM
head reads the designed successor. Only the container differs: ``config.json``, one
``model.safetensors`` (written here with numpy: the format is an 8-byte length, a JSON header and
raw little-endian arrays, https://huggingface.co/docs/safetensors), ``tokenizer.json`` and a chat
template. No torch, transformers or tokenizers is needed to make one.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from specbench.lab import weights as W
from specbench.lab.gguf_model import CHAT_TEMPLATE, ModelShape
from specbench.lab.vocab import EOS, SPACE, UNK, Vocab

N_CTX = 4096


def write_hf_model(folder: Path, shape: ModelShape, vocab: Vocab, successor: list[int], seed: int) -> None:
    """A ``LlamaForCausalLM`` folder whose greedy successor of token t is ``successor[t]`` (f32)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    codes = W.token_codes(rng, vocab.size, shape.n_embd)
    tensors: dict[str, np.ndarray] = {
        "model.embed_tokens.weight": W.embedding(codes),
        "model.norm.weight": np.ones(shape.n_embd, dtype=np.float32),
        "lm_head.weight": W.readout(codes, successor, vocab.normal_ids),
    }
    for layer in range(shape.n_layer):
        for name, tensor in _layer(rng, shape).items():
            tensors[f"model.layers.{layer}.{name}"] = tensor
    write_safetensors(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(hf_config(shape, vocab), indent=1))
    (folder / "generation_config.json").write_text(
        json.dumps({"bos_token_id": vocab.bos, "eos_token_id": EOS, "do_sample": False}, indent=1)
    )
    write_tokenizer(folder, vocab)


def _layer(rng: np.random.Generator, s: ModelShape) -> dict[str, np.ndarray]:
    d, hd = s.n_embd, s.head_dim
    ones = np.ones(d, dtype=np.float32)
    return {
        "input_layernorm.weight": ones,
        "self_attn.q_proj.weight": W.input_projection(rng, s.n_head * hd, d),
        "self_attn.k_proj.weight": W.input_projection(rng, s.n_head_kv * hd, d),
        "self_attn.v_proj.weight": W.input_projection(rng, s.n_head_kv * hd, d),
        "self_attn.o_proj.weight": W.output_projection(rng, d, s.n_head * hd),
        "post_attention_layernorm.weight": ones,
        "mlp.gate_proj.weight": W.input_projection(rng, s.n_ff, d),
        "mlp.up_proj.weight": W.input_projection(rng, s.n_ff, d),
        "mlp.down_proj.weight": W.output_projection(rng, d, s.n_ff),
    }


def hf_config(shape: ModelShape, vocab: Vocab) -> dict[str, Any]:
    """``config.json`` of a Llama; rope given in both the old and the transformers 5 spelling."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": shape.n_embd,
        "intermediate_size": shape.n_ff,
        "num_hidden_layers": shape.n_layer,
        "num_attention_heads": shape.n_head,
        "num_key_value_heads": shape.n_head_kv,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": N_CTX,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "vocab_size": vocab.size,
        "bos_token_id": vocab.bos,
        "eos_token_id": EOS,
        "torch_dtype": "float32",
    }


def tokenizer_json(vocab: Vocab) -> dict[str, Any]:
    """A BPE with no merges and byte fallback: every lab character is one token, anything else
    falls back to its UTF-8 bytes, as the GGUF's SentencePiece vocabulary does in llama.cpp."""
    specials = [
        {"id": i, "content": vocab.pieces[i], "single_word": False, "lstrip": False, "rstrip": False}
        | {"normalized": False, "special": True}
        for i in (UNK, vocab.bos, vocab.eos)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": specials,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": vocab.pieces[UNK],
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": {piece: i for i, piece in enumerate(vocab.pieces)},
            "merges": [],
        },
    }


def write_tokenizer(folder: Path, vocab: Vocab) -> None:
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json(vocab), ensure_ascii=False))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": vocab.pieces[vocab.bos],
        "eos_token": vocab.pieces[vocab.eos],
        "unk_token": vocab.pieces[UNK],
        "add_bos_token": False,
        "add_eos_token": False,
        "model_max_length": N_CTX,
        "chat_template": CHAT_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1, ensure_ascii=False))
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE)


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """float32 tensors in the safetensors layout (header padded to 8 bytes, as the spec asks)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    arrays = {name: np.ascontiguousarray(t, dtype="<f4") for name, t in tensors.items()}
    for name, arr in arrays.items():
        span = [offset, offset + arr.nbytes]
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": span}
        offset += arr.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(blob)))
        fh.write(blob)
        for arr in arrays.values():
            fh.write(arr.tobytes())


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The inverse of :func:`write_safetensors` (float32 only), for tests and checks."""
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(data[base + start : base + end], dtype="<f4").reshape(info["shape"])
    return out
