"""The HF lab pair as files: what vLLM will load, checked without vLLM (the real-vLLM tests in
tests/engines/test_vllm_real.py serve the same pair)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specbench.errors import ConfigError
from specbench.lab.hf_make import HfLabSpec, cached_hf_pair, make_hf_pair
from specbench.lab.hf_model import read_safetensors, tokenizer_json
from specbench.lab.vocab import build_vocab


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hf")
    make_hf_pair(HfLabSpec(alpha=0.7), out)
    return out


def _rms(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    return out


@pytest.mark.parametrize("model", ["target", "draft"])
def test_the_readout_gives_the_designed_successor(pair: Path, model: str) -> None:
    """Embedding → final RMSNorm → LM head picks the designed map for every cycle token (the layers
    only nudge the residual by ~1 %, which the designed logit gap of ~15 absorbs)."""
    truth = json.loads((pair / "truth.json").read_text())
    t = read_safetensors(pair / model / "model.safetensors")
    cycle = np.array(truth["cycle"])
    logits = _rms(t["model.embed_tokens.weight"][cycle]) @ t["lm_head.weight"].T
    successor = np.array(truth["target_map"])[cycle]
    agree = np.array(truth["agree"], dtype=bool)[cycle]
    if model == "target":
        assert (logits.argmax(axis=1) == successor).all()
    else:  # the draft proposes the successor where it agrees, the successor's successor elsewhere
        wanted = np.where(agree, successor, np.array(truth["target_map"])[successor])
        assert (logits.argmax(axis=1) == wanted).all()
        assert abs(agree.mean() - 0.7) < 1 / len(cycle)


def test_config_matches_the_weights(pair: Path) -> None:
    for model in ("target", "draft"):
        config = json.loads((pair / model / "config.json").read_text())
        t = read_safetensors(pair / model / "model.safetensors")
        assert config["architectures"] == ["LlamaForCausalLM"]
        assert t["model.embed_tokens.weight"].shape == (config["vocab_size"], config["hidden_size"])
        layers = {k.split(".")[2] for k in t if k.startswith("model.layers.")}
        assert len(layers) == config["num_hidden_layers"]
        q = t["model.layers.0.self_attn.q_proj.weight"]
        assert q.shape == (config["num_attention_heads"] * config["head_dim"], config["hidden_size"])
        template = json.loads((pair / model / "tokenizer_config.json").read_text())["chat_template"]
        assert template.endswith("assistant:{%- endif -%}")


def test_tokenizer_has_one_token_per_lab_character() -> None:
    vocab = build_vocab(16)
    tok = tokenizer_json(vocab)
    assert tok["model"]["byte_fallback"] is True and tok["model"]["merges"] == []
    assert tok["model"]["vocab"]["<0x0A>"] == 3 + 0x0A  # newline falls back to its byte
    assert len(tok["model"]["vocab"]) == vocab.size


def test_pairs_are_cached_by_their_spec(tmp_path: Path) -> None:
    first = cached_hf_pair(HfLabSpec(alpha=0.5), tmp_path)
    stamp = (first / "truth.json").stat().st_mtime_ns
    assert cached_hf_pair(HfLabSpec(alpha=0.5), tmp_path) == first
    assert (first / "truth.json").stat().st_mtime_ns == stamp
    assert cached_hf_pair(HfLabSpec(alpha=0.6), tmp_path) != first
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_bad_alpha_and_size_are_named() -> None:
    with pytest.raises(ConfigError, match="--alpha"):
        HfLabSpec(alpha=1.5).shapes()
    with pytest.raises(ConfigError, match="--size"):
        HfLabSpec(size="membound").shapes()
