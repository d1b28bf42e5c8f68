"""Architecture from the GGUF header: the real model, a lab model, and a stray config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.analysis.predicted.models import lab_weights, weights_for
from specbench.errors import ConfigError
from specbench.theory.arch import total_params
from specbench.theory.gguf_header import architecture_from_gguf
from tests.support.lab import lab_pair


def test_gemma_header_gives_its_published_shape(gemma: Path) -> None:
    arch = architecture_from_gguf(gemma)
    shape = (arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.head_dim, arch.vocab, arch.ffn)
    assert shape == (18, 640, 4, 1, 256, 262_144, 2048)
    # Every 6th layer attends globally, the other 15 over a 512-token window; the LM head is tied.
    assert (arch.sliding_layers, arch.sliding_window, arch.tied_embeddings) == (15, 512, True)
    assert 250e6 < total_params(arch) < 300e6  # "270M"


def test_lab_header_agrees_with_its_truth() -> None:
    pair = lab_pair(arch="moe", alpha=0.9)
    from_header = architecture_from_gguf(pair.target)
    from_truth = lab_weights(pair.truth, "target").arch
    for field in ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab", "experts", "top_k"):
        assert getattr(from_header, field) == getattr(from_truth, field), field
    assert from_header.expert_ffn == from_truth.expert_ffn


def test_config_json_beside_a_gguf_does_not_describe_it(gemma: Path, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"num_hidden_layers": 99, "hidden_size": 64, "num_attention_heads": 2, "vocab_size": 9})
    )
    model = tmp_path / gemma.name
    model.symlink_to(gemma)
    found = weights_for(str(model))
    assert found is not None
    weights, source = found
    assert weights.arch.layers == 18 and source.startswith("GGUF header")
    assert weights.quant == "Q4_K_M"


def test_not_a_gguf_names_the_file(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ConfigError, match=r"model.gguf: not a GGUF file"):
        architecture_from_gguf(bogus)
