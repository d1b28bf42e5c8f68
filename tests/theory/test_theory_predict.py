"""predict(), calibrate_efficiency(), format_prediction(): wiring, inputs, invariants."""

from __future__ import annotations

import json

import pytest

from specbench.errors import ConfigError
from specbench.theory import (
    Efficiency,
    acceptance_from_alpha,
    alpha_from_acceptance,
    calibrate_efficiency,
    experts_touched,
    format_prediction,
    predict,
    tokens_per_round,
)
from specbench.theory.methods import replay_tokens

MOE = ("Qwen3.6-35B-A3B", "RTX 3090", "UD-Q4_K_XL")
DENSE = ("Qwen3.6-27B", "RTX 3090", "Q4_K_M")


def test_speedup_is_spec_over_baseline_and_rates_follow_breakdown() -> None:
    p = predict(*MOE, "mtp", 3, alpha=0.7)
    b = p.breakdown
    assert p.speedup == pytest.approx(p.spec_tok_s / p.baseline_tok_s)
    assert p.baseline_tok_s == pytest.approx(1 / b.target_step_s)
    assert p.spec_tok_s == pytest.approx(tokens_per_round(0.7, 3) / b.round_s)
    terms = b.draft_s + b.catchup_s + b.verify_s + b.snapshot_s + b.checkpoint_s + b.replay_s + b.overhead_s
    assert b.round_s == pytest.approx(terms)
    assert b.draft_s == pytest.approx(3 * b.draft_step_s)
    assert b.catchup_s > b.draft_step_s  # the MTP pass over the 4 verified tokens
    assert b.replay_s == 0.0  # off unless asked for


def test_replay_after_restore_costs_a_target_pass_per_rejected_round() -> None:
    """Hybrid target restored from a host checkpoint: (1 − α^γ) · (t(m) + t_draft(m)), m = E[a | a < γ]
    + 1; α 0.7, γ 3: P 0.657, 1.65 tokens re-run (ngram: no drafter to mirror the pass)."""
    plain = predict(*MOE, "ngram", 3, alpha=0.7)
    replayed = predict(*MOE, "ngram", 3, alpha=0.7, replay=True)
    p_reject, tokens = replay_tokens(0.7, 3)
    assert p_reject == pytest.approx(1 - 0.7**3)
    assert tokens == pytest.approx(1 + (0.7 * 0.3 + 2 * 0.49 * 0.3) / (1 - 0.343))
    step = replayed.breakdown.target_step_s
    assert p_reject * step < replayed.breakdown.replay_s < p_reject * replayed.breakdown.verify_s
    assert replayed.breakdown.round_s == pytest.approx(plain.breakdown.round_s + replayed.breakdown.replay_s)
    # the replay pass emits a token of its own: τ + P(reject) per round
    assert replayed.breakdown.tokens_per_round == pytest.approx(tokens_per_round(0.7, 3) + p_reject)


def test_snapshot_methods_never_replay_or_checkpoint_on_the_host() -> None:
    # MTP/EAGLE-3/DFlash: the target keeps K per-token state snapshots on the device (n_rs_seq)
    mtp = predict(*MOE, "mtp", 3, alpha=0.7, replay=True).breakdown
    assert mtp.replay_s == 0.0 and mtp.checkpoint_s == 0.0
    # the verify writes 3 extra snapshots of the 62.8 MiB state at the device's bandwidth
    assert mtp.snapshot_s == pytest.approx(3 * 62.8 * 2**20 / (936e9 * 0.6), rel=1e-3)


def test_a_hybrid_draft_model_is_saved_and_restored_every_round_and_mirrors_the_replay() -> None:
    plain = predict(*MOE, "draft", 3, alpha=0.7, draft_model="Qwen3.5-0.8B").breakdown
    replayed = predict(*MOE, "draft", 3, alpha=0.7, draft_model="Qwen3.5-0.8B", replay=True).breakdown
    draft_state = (82.0 - 62.8) * 2**20
    assert plain.checkpoint_draft_s == pytest.approx(draft_state / 13e9 * (2 + 1 - 0.7**3), rel=1e-2)
    assert plain.checkpoint_target_s == pytest.approx(62.8 * 2**20 / 13e9 * (1 + 1 - 0.7**3), rel=1e-3)
    ngram = predict(*MOE, "ngram", 3, alpha=0.7, replay=True).breakdown
    assert replayed.replay_s > ngram.replay_s  # the draft model mirrors the replay pass


def test_a_target_without_recurrent_state_never_replays() -> None:
    p = predict("Llama-3.1-8B", "RTX 3090", "Q4_K_M", "eagle3", 3, alpha=0.7, replay=True)
    assert p.breakdown.replay_s == 0.0 and p.breakdown.checkpoint_s == 0.0


def test_nothing_rejected_nothing_replayed() -> None:
    assert replay_tokens(1.0, 4) == (0.0, 1.0)


def test_acceptance_input_is_converted_to_alpha() -> None:
    p = predict(*MOE, "mtp", 4, acceptance=0.5)
    assert p.breakdown.alpha == pytest.approx(alpha_from_acceptance(0.5, 4))
    q = predict(*MOE, "mtp", 4, alpha=p.breakdown.alpha)
    assert q.breakdown.acceptance == pytest.approx(0.5)
    assert q.speedup == pytest.approx(p.speedup)


def test_verify_experts_are_the_union_over_all_tokens() -> None:
    p = predict(*MOE, "ngram", 4, alpha=0.5, concurrency=3)
    assert p.breakdown.experts_touched_step == pytest.approx(experts_touched(256, 8, 3))
    assert p.breakdown.experts_touched_verify == pytest.approx(experts_touched(256, 8, 15))
    extra_experts = 40 * (experts_touched(256, 8, 15) - experts_touched(256, 8, 3))
    expected = extra_experts * 3 * 2048 * 512 * 4.7 / 8  # 40 MoE layers, 4.7 bits per weight
    assert p.breakdown.verify_bytes - p.breakdown.step_bytes == pytest.approx(expected, rel=0.01)


def test_method_costs() -> None:
    ngram = predict(*MOE, "ngram", 4, alpha=0.6)
    assert ngram.breakdown.draft_s == 0.0
    dflash = predict(*MOE, "dflash", 8, alpha=0.6)
    assert dflash.breakdown.draft_s == pytest.approx(dflash.breakdown.draft_step_s)
    eagle = predict(*MOE, "eagle3", 8, alpha=0.6)
    assert eagle.breakdown.draft_s == pytest.approx(8 * eagle.breakdown.draft_step_s)
    draft = predict(*MOE, "draft", 4, alpha=0.6, draft_model="Qwen3.5-0.8B")
    assert draft.breakdown.draft_step_s > eagle.breakdown.draft_step_s
    assert draft.draft_model == "Qwen3.5-0.8B"


def test_checkpoint_only_for_hybrids_and_includes_a_hybrid_draft() -> None:
    assert predict("Llama-3.1-8B", "RTX 3090", "Q4_K_M", "eagle3", 3, alpha=0.7).breakdown.checkpoint_s == 0
    ngram = predict(*MOE, "ngram", 3, alpha=0.7).breakdown
    draft = predict(*MOE, "draft", 3, alpha=0.7, draft_model="Qwen3.5-0.8B").breakdown
    assert ngram.checkpoint_bytes / 2**20 == pytest.approx(62.8, abs=0.1)
    assert draft.checkpoint_bytes / 2**20 == pytest.approx(82.0, abs=0.2)
    assert draft.checkpoint_s > ngram.checkpoint_s > 0
    # restore happens only on rejection: perfect drafts pay the save alone
    perfect = predict(*MOE, "ngram", 3, alpha=1.0).breakdown
    assert perfect.checkpoint_s == pytest.approx(ngram.checkpoint_s / (2 - 0.7**3))


def test_speedup_grows_with_alpha() -> None:
    speedups = [predict(*DENSE, "mtp", 3, alpha=a).speedup for a in (0.2, 0.5, 0.8, 0.95)]
    assert speedups == sorted(speedups) and speedups[0] < speedups[-1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "medusa"}, "unknown method"),
        ({"alpha": 0.5, "acceptance": 0.5}, "exactly one"),
        ({"alpha": None}, "exactly one"),
        ({"method": "draft"}, "draft_model"),
        ({"draft_model": "Qwen3.5-0.8B"}, "draft_model"),
        ({"draft_max": 0}, "draft_max"),
        ({"concurrency": 0}, "concurrency"),
        ({"alpha": 1.5}, "alpha"),
        ({"model": "Llama-3.1-8B"}, "no MTP"),
        ({"gpu": "rtx9090"}, "unknown gpu"),
    ],
)
def test_bad_inputs_are_config_errors(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"model": MOE[0], "gpu": MOE[1], "quant": MOE[2], "method": "mtp"}
    args |= {"draft_max": 3, "alpha": 0.5} | kwargs
    with pytest.raises(ConfigError, match=match):
        predict(**args)  # type: ignore[arg-type]


def test_to_dict_is_json_ready() -> None:
    d = predict(*MOE, "draft", 8, alpha=0.7, draft_model="Qwen3.5-0.8B", draft_quant="Q8_0").to_dict()
    text = json.dumps(d)
    assert d["breakdown"]["bound"] in ("bandwidth", "compute")
    assert d["breakdown"]["experts_touched_verify"] == pytest.approx(63.6, abs=0.1)
    assert "speedup" in text and d["efficiency"]["bandwidth"] == 0.6


def test_format_prediction_mentions_the_key_numbers() -> None:
    p = predict(*MOE, "draft", 8, alpha=0.7, draft_model="Qwen3.5-0.8B")
    text = format_prediction(p)
    assert "Qwen3.6-35B-A3B" in text and "Qwen3.5-0.8B" in text
    assert f"{p.baseline_tok_s:.1f} tok/s" in text and f"{p.speedup:.2f}x" in text
    assert "63.6 when verifying" in text and "82.1 MiB" in text
    assert "experts" not in format_prediction(predict(*DENSE, "mtp", 3, alpha=0.7))


def test_calibrate_efficiency_reproduces_the_measured_baseline() -> None:
    eff = calibrate_efficiency(100.0, *MOE, context=2048)
    assert 0.0 < eff.bandwidth < 1.0
    assert eff.kernel_s == Efficiency().kernel_s
    p = predict(*MOE, "mtp", 3, alpha=0.7, context=2048, efficiency=eff)
    assert p.baseline_tok_s == pytest.approx(100.0, rel=1e-6)
    faster = calibrate_efficiency(130.0, *MOE, context=2048)
    assert faster.bandwidth > eff.bandwidth


def test_calibrate_efficiency_rejects_impossible_measurements() -> None:
    with pytest.raises(ConfigError, match="faster"):
        calibrate_efficiency(5000.0, *MOE)
    with pytest.raises(ConfigError, match="positive"):
        calibrate_efficiency(0.0, *MOE)


def test_acceptance_helpers_exported_consistently() -> None:
    assert acceptance_from_alpha(alpha_from_acceptance(0.3, 8), 8) == pytest.approx(0.3)


def test_a_draft_sampled_on_the_host_pays_the_vocabulary_per_drafted_token() -> None:
    kw = {"alpha": 0.7, "draft_model": "Qwen3.5-0.8B"}
    device = predict(*MOE, "draft", 4, **kw).breakdown
    host = predict(*MOE, "draft", 4, draft_host_sampling=True, **kw).breakdown
    per_pass = 248320 * (4 / 13e9 + 1.5e-9)  # one logit row over PCIe + one candidate array
    assert host.draft_s - device.draft_s == pytest.approx(4 * per_pass, rel=1e-6)


def test_drafts_that_stop_early_cost_the_mixture_over_draft_lengths() -> None:
    from specbench.theory.stopping import predict_stopped, stop_distribution

    assert sum(stop_distribution(0.6, 8)) == pytest.approx(1.0)
    assert stop_distribution(0.6, 2) == pytest.approx([0.4, 0.24, 0.36])
    kw = {"alpha": 0.7, "draft_model": "Qwen3.5-0.8B"}
    # a drafter that is always sure drafts K every round: the plain prediction
    always = predict_stopped(*MOE, "draft", 4, stop=1.0, **kw)
    assert always.speedup == pytest.approx(predict(*MOE, "draft", 4, **kw).speedup)
    assert always.mean_draft == 4
    # a drafter that is never sure never verifies: every step pays a draft pass for one token
    never = predict_stopped(*MOE, "draft", 4, stop=0.0, **kw)
    assert never.mean_draft == 0 and never.speedup < 1.0
    # long n-max barely matters once drafts stop early
    short, long = (predict_stopped(*MOE, "draft", k, stop=0.7, **kw) for k in (8, 32))
    assert long.speedup == pytest.approx(short.speedup, rel=0.05)
