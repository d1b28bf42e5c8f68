"""Recurrent-state traffic per pass: llama.cpp stages a hybrid model's state, others update it in place."""

from __future__ import annotations

import pytest

from specbench.engines import theory_priors
from specbench.errors import ConfigError
from specbench.theory.arch import recurrent_state_bytes
from specbench.theory.cost import Efficiency, forward_cost, moved_bytes
from specbench.theory.measured.engines import engine_efficiency, state_traffic
from specbench.theory.methods import DraftSetup, snapshot_time
from specbench.theory.presets import get_gpu, get_model

PRIORS = theory_priors()
HYBRID = get_model("Qwen3.6-35B-A3B")
DENSE = get_model("Llama-3.1-8B")


def test_llamacpp_moves_each_state_byte_six_times_a_pass_and_each_snapshot_three() -> None:
    eff = engine_efficiency(PRIORS.named("llamacpp"), get_gpu("A100 80GB"))
    assert (eff.state_moves, eff.snapshot_moves) == (6.0, 3.0)
    step = forward_cost(HYBRID, 0.6, 1, 1, 4096)
    r = recurrent_state_bytes(HYBRID)
    # 62.8 MiB of state (docs/theory.md): gathered, read, written, copied back = 6·R, not 2·R
    assert r / 2**20 == pytest.approx(62.8, abs=0.1)
    assert moved_bytes(step, eff) - step.bytes == pytest.approx(4 * r)
    assert moved_bytes(step, Efficiency()) == step.bytes


def test_an_engine_that_updates_state_in_place_or_is_unknown_keeps_two_moves() -> None:
    for engine in ("vllm", "sglang", None):
        eff = state_traffic(PRIORS.of(engine), Efficiency())
        assert (eff.state_moves, eff.snapshot_moves) == (2.0, 1.0)


def test_a_model_without_recurrent_state_moves_nothing_more() -> None:
    eff = engine_efficiency(PRIORS.named("llamacpp"), get_gpu("H100 SXM"))
    step = forward_cost(DENSE, 2.0, 1, 1, 4096)
    assert step.state_bytes == 0.0
    assert moved_bytes(step, eff) == step.bytes


def test_mtp_snapshots_cost_three_times_their_bytes_on_llamacpp() -> None:
    gpu = get_gpu("A100 80GB")
    setup = DraftSetup("mtp", HYBRID, 0.6, None, 0.6, 4, 1, 4096)
    plain = snapshot_time(setup, gpu, Efficiency())
    staged = snapshot_time(setup, gpu, engine_efficiency(PRIORS.named("llamacpp"), gpu))
    assert plain == pytest.approx(4 * recurrent_state_bytes(HYBRID) / (gpu.bandwidth * 0.6))
    assert staged == pytest.approx(3 * plain)


def test_fewer_state_moves_than_a_read_and_a_write_are_refused() -> None:
    with pytest.raises(ConfigError):
        Efficiency(state_moves=1.0)
    with pytest.raises(ConfigError):
        Efficiency(snapshot_moves=0.5)
