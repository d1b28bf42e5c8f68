"""The lab's design, checked without an engine: maps, weights, files, acceptance formulas."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import gguf
import numpy as np
import pytest

from specbench.errors import ConfigError, LabError
from specbench.lab.acceptance import (
    designed_acceptance,
    expected_accepted,
    mean_accepted_length,
    simulate_request,
)
from specbench.lab.make import LabSpec, make_pair
from specbench.lab.vocab import FIRST_NORMAL, build_vocab, cycle_text, design_maps, token_text
from specbench.lab.weights import readout, readout_margin, token_codes


def test_target_map_is_one_cycle_over_every_printable_token() -> None:
    vocab = build_vocab(100)
    maps = design_maps(vocab, alpha=0.5, seed=3)
    seen, tok = [], maps.cycle[0]
    for _ in range(len(maps.cycle)):
        seen.append(tok)
        tok = maps.target[tok]
    assert tok == maps.cycle[0]
    assert sorted(seen) == list(vocab.normal_ids)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.9, 1.0])
def test_draft_agrees_on_exactly_the_designed_fraction(alpha: float) -> None:
    vocab = build_vocab(200)
    maps = design_maps(vocab, alpha=alpha, seed=1)
    agreeing = [t for t in maps.cycle if maps.draft[t] == maps.target[t]]
    assert len(agreeing) == round(alpha * len(maps.cycle))
    assert all(maps.draft[t] != maps.target[t] for t in maps.cycle if not maps.agree[t])


def test_cycle_text_is_valid_text_of_single_character_tokens() -> None:
    vocab = build_vocab(50)
    maps = design_maps(vocab, 0.5, 0)
    text = cycle_text(vocab, maps, start=FIRST_NORMAL, length=len(maps.cycle))
    assert len(text) == len(maps.cycle)
    assert text.encode("utf-8").decode("utf-8") == text
    assert token_text(vocab.pieces[maps.target[FIRST_NORMAL]]) == text[0]


def test_readout_makes_the_designed_successor_the_argmax() -> None:
    rng = np.random.default_rng(0)
    vocab = build_vocab(300)
    maps = design_maps(vocab, 0.7, 0)
    codes = token_codes(rng, vocab.size, 128)
    head = readout(codes, maps.draft, vocab.normal_ids)
    ids = np.array(vocab.normal_ids)
    argmax = (codes[ids] @ head.T).argmax(axis=1)
    assert list(argmax) == [maps.draft[t] for t in ids]
    assert readout_margin(codes[ids], head, [maps.draft[t] for t in ids]) > 0


def test_too_small_embedding_is_refused() -> None:
    vocab = build_vocab(2000)
    maps = design_maps(vocab, 0.5, 0)
    with pytest.raises(LabError, match="margin"):
        readout(token_codes(np.random.default_rng(0), vocab.size, 8), maps.target, vocab.normal_ids)


def test_acceptance_formulas() -> None:
    assert expected_accepted(0.5, 2) == pytest.approx(0.5 + 0.25)
    assert designed_acceptance(0.5, 2) == pytest.approx(0.375)
    assert designed_acceptance(1.0, 8) == pytest.approx(1.0)
    assert designed_acceptance(0.0, 4) == 0.0
    assert mean_accepted_length(0.9, 4) == pytest.approx(1 + 0.9 + 0.81 + 0.729 + 0.6561)


def test_simulated_requests_approach_the_iid_expectation_on_a_long_cycle() -> None:
    vocab = build_vocab(3000)
    maps = design_maps(vocab, 0.6, 0)
    counts = simulate_request(maps, maps.cycle[0], max_tokens=3000, k=4)
    assert counts.ratio == pytest.approx(designed_acceptance(0.6, 4), abs=0.03)
    assert counts.drafted <= 4 * counts.steps


@pytest.mark.parametrize("arch", ["dense", "moe", "hybrid"])
def test_make_pair_writes_readable_gguf_and_truth(tmp_path: Path, arch: str) -> None:
    truth_path = make_pair(LabSpec(arch=arch, alpha=0.7, n_experts=16, top_k=4), tmp_path)  # type: ignore[arg-type]
    truth = json.loads(truth_path.read_text())
    reader = gguf.GGUFReader(str(tmp_path / "target.gguf"))
    names = {t.name for t in reader.tensors}
    assert "output.weight" in names and "token_embd.weight" in names
    assert ("blk.0.ffn_gate_exps.weight" in names) == (arch == "moe")
    assert truth["alpha"] == 0.7 and abs(truth["alpha_realised"] - 0.7) < 0.01
    assert truth["target"]["bytes_per_token"] > truth["draft"]["bytes_per_token"]
    assert len(truth["answer_text"]) == truth["cycle_length"]
    if arch == "moe":
        assert truth["target"]["n_expert"] == 16 and truth["target"]["n_expert_used"] == 4


def test_hybrid_target_is_a_qwen35_gguf_with_the_llama_cpp_names_and_shapes(tmp_path: Path) -> None:
    """Names, shapes (ggml order: input first) and keys as llama_model_qwen35 loads them."""
    make_pair(LabSpec(arch="hybrid", alpha=0.5), tmp_path)
    reader = gguf.GGUFReader(str(tmp_path / "target.gguf"))
    kv = {f.name: f.contents() for f in reader.fields.values() if not f.name.startswith("tokenizer.")}
    shape = json.loads((tmp_path / "truth.json").read_text())["target"]
    d, hd, n_ff = shape["n_embd"], shape["n_embd"] // shape["n_head"], shape["n_ff"]
    state, n_k, n_v = shape["ssm_d_state"], shape["ssm_n_group"], shape["ssm_n_v_head"]
    inner, conv_dim = state * n_v, 2 * state * n_k + state * n_v
    assert kv["general.architecture"] == "qwen35"
    assert kv["qwen35.block_count"] == 4 and kv["qwen35.full_attention_interval"] == 4
    assert kv["qwen35.ssm.conv_kernel"] == 4 and kv["qwen35.ssm.state_size"] == state
    assert kv["qwen35.ssm.group_count"] == n_k and kv["qwen35.ssm.time_step_rank"] == n_v
    assert kv["qwen35.ssm.inner_size"] == inner
    assert kv["qwen35.attention.key_length"] == kv["qwen35.attention.value_length"] == hd
    assert kv["qwen35.rope.dimension_count"] == hd // 4
    assert sum(kv["qwen35.rope.dimension_sections"]) == hd // 8
    tensors = {t.name: (tuple(int(n) for n in t.shape), t.tensor_type.name) for t in reader.tensors}
    common = {
        "attn_norm.weight": ((d,), "F32"),
        "post_attention_norm.weight": ((d,), "F32"),
        "ffn_gate.weight": ((d, n_ff), "F16"),
        "ffn_up.weight": ((d, n_ff), "F16"),
        "ffn_down.weight": ((n_ff, d), "F16"),
    }
    linear = {
        "attn_qkv.weight": ((d, conv_dim), "F16"),
        "attn_gate.weight": ((d, inner), "F16"),
        "ssm_conv1d.weight": ((4, conv_dim), "F32"),
        "ssm_dt.bias": ((n_v,), "F32"),
        "ssm_a": ((n_v,), "F32"),
        "ssm_beta.weight": ((d, n_v), "F16"),
        "ssm_alpha.weight": ((d, n_v), "F16"),
        "ssm_norm.weight": ((state,), "F32"),
        "ssm_out.weight": ((inner, d), "F16"),
    }
    full = {
        "attn_q.weight": ((d, 2 * shape["n_head"] * hd), "F16"),  # query and its output gate
        "attn_k.weight": ((d, shape["n_head_kv"] * hd), "F16"),
        "attn_v.weight": ((d, shape["n_head_kv"] * hd), "F16"),
        "attn_output.weight": ((shape["n_head"] * hd, d), "F16"),
        "attn_q_norm.weight": ((hd,), "F32"),
        "attn_k_norm.weight": ((hd,), "F32"),
    }
    for layer in range(4):
        want = common | (full if layer == 3 else linear)  # 3 Gated DeltaNet : 1 full attention
        got = {n.split(".", 2)[2]: v for n, v in tensors.items() if n.startswith(f"blk.{layer}.")}
        assert got == want, layer
    assert shape["recurrent_layers"] == 3 and shape["attention_layers"] == 1
    assert shape["recurrent_state_bytes"] == 4 * 3 * (state * inner + 3 * conv_dim)


def test_hybrid_fields_stay_out_of_dense_shapes() -> None:
    """Dense/MoE truth.json shapes (and so their cache keys) are what they were before hybrid."""
    dense, draft = LabSpec(arch="dense").shapes()
    assert "ssm_d_state" not in dense.as_dict() and "ssm_d_state" not in draft.as_dict()
    assert LabSpec(arch="hybrid").shapes()[0].as_dict()["ssm_d_state"] == 32


def test_checkpoint_walk_starts_each_draft_after_a_replayed_bonus_token() -> None:
    vocab = build_vocab(3000)
    maps = design_maps(vocab, 0.6, 0)
    plain = simulate_request(maps, maps.cycle[0], max_tokens=3000, k=4)
    ckpt = simulate_request(maps, maps.cycle[0], max_tokens=3000, k=4, checkpoints=True)
    assert ckpt.drafted < plain.drafted  # a partial acceptance emits one more token per round
    assert ckpt.ratio == pytest.approx(designed_acceptance(0.6, 4), abs=0.03)
    always = replace(maps, agree=[True] * vocab.size)  # nothing rejected: nothing to restore
    assert simulate_request(always, maps.cycle[0], 500, 4, checkpoints=True) == (
        simulate_request(always, maps.cycle[0], 500, 4)
    )


def test_bad_lab_options_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--alpha"):
        make_pair(LabSpec(alpha=1.5), tmp_path)
    with pytest.raises(ConfigError, match="--size: unknown preset 'huge'"):
        make_pair(LabSpec(size="huge"), tmp_path)
    with pytest.raises(ConfigError, match="--top-k"):
        make_pair(LabSpec(arch="moe", n_experts=4, top_k=8), tmp_path)


def test_gpu_preset_is_memory_bound_on_an_h100_and_its_draft_is_small() -> None:
    """The first H200 run measured ~0.7 ms of fixed kernel-launch cost a step and a 471 MB target
    reading in 0.1 ms: launch-bound. The gpu preset's target must read for longer than that at an
    H100's 3.35 TB/s, with a draft of a few per cent of its bytes."""
    from specbench.lab.gguf_model import weight_bytes
    from specbench.lab.make import PRESETS

    vocab = build_vocab(512).size
    target = weight_bytes(PRESETS["gpu"]["dense"], vocab)["bytes_per_token"]
    draft = weight_bytes(PRESETS["gpu"]["draft"], vocab)["bytes_per_token"]
    membound = weight_bytes(PRESETS["membound"]["dense"], vocab)["bytes_per_token"]
    assert target / 3.35e12 > 1.0e-3 > membound / 3.35e12
    assert draft / target < 0.05
    assert LabSpec(arch="dense", size="gpu").shapes()[0].n_embd == 4096
