"""Every prediction carries an interval from the terms not known for its setup (theory/spread/terms.py),
names the term that dominates its width, and narrows when a term is measured."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from specbench.cli import app
from specbench.engines import theory_priors
from specbench.engines.measured.llamacpp import GPU_SPEC_PASS_S as LLAMACPP_GPU_SPEC_PASS_S
from specbench.theory import predict, predict_stopped
from specbench.theory.measured.engines import UNKNOWN_PASS
from specbench.theory.presets import get_gpu
from specbench.theory.spread.terms import BANDWIDTH, LAUNCH
from tests.theory.labpair import lab_config

PRIORS = theory_priors()  # what each engine was measured to do, as the engines declare it
H200 = get_gpu("H200")
H100 = get_gpu("H100 SXM")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("lab")
    return lab_config(folder, "gpu", "dense"), lab_config(folder, "gpu", "draft")


def _keys(p: object) -> set[str]:
    interval = getattr(p, "interval", None)
    assert interval is not None
    return {s.term.key for s in interval.speedup.swings}


def test_a_blind_prediction_has_an_interval_around_it_and_names_its_widest_term(
    pair: tuple[str, str],
) -> None:
    target, draft = pair
    p = predict(target, H200, "F16", "draft", 4, alpha=0.8, draft_model=draft, context=247, engine="llamacpp",
                priors=PRIORS)  # fmt: skip
    assert p.interval is not None
    s, base = p.interval.speedup, p.interval.baseline_tok_s
    assert s.low < p.speedup < s.high and base.low < p.baseline_tok_s < base.high
    assert _keys(p) == {"verify", "spec_pass_s", "launch", "bandwidth", "acceptance"}
    # no baseline: η_bw (5 published values 0.30–0.93, as the range of one more: 0.16–1.00)
    # makes the baseline's band and dominates the speedup's
    assert (
        p.interval.dominant
        == f"the bandwidth efficiency η_bw (no measured baseline): {BANDWIDTH[0]:.2f}–{BANDWIDTH[1]:.2f}"
    )
    assert s.dominant is not None and s.dominant.term.key == "bandwidth"


def test_a_measured_baseline_removes_the_bandwidth_term_and_narrows_the_interval(
    pair: tuple[str, str],
) -> None:
    target, draft = pair
    kw: dict[str, Any] = {
        "alpha": 0.8, "draft_model": draft, "context": 247, "engine": "llamacpp", "priors": PRIORS,
    }  # fmt: skip
    blind = predict(target, H200, "F16", "draft", 4, **kw)
    fitted = predict(target, H200, "F16", "draft", 4, baseline_tok_s=454.1, **kw)
    assert "bandwidth" not in _keys(fitted)
    assert fitted.interval is not None and blind.interval is not None
    b = fitted.interval.baseline_tok_s
    assert b.high - b.low < 1e-6 * b.central  # the baseline no longer depends on an unknown term
    widths = [p.interval.speedup.high / p.interval.speedup.low for p in (fitted, blind) if p.interval]
    assert widths[0] < widths[1]


def test_an_estimated_acceptance_is_a_term_of_its_own(pair: tuple[str, str]) -> None:
    target, draft = pair
    kw: dict[str, Any] = {
        "alpha": 0.8,
        "draft_model": draft,
        "context": 247,
        "engine": "llamacpp",
        "priors": PRIORS,
        "baseline_tok_s": 454.1,
    }
    exact = predict(target, H200, "F16", "draft", 4, alpha_range=(0.8, 0.8), **kw)
    guessed = predict(target, H200, "F16", "draft", 4, alpha_range=(0.7, 0.85), **kw)
    designed = predict(target, H200, "F16", "draft", 4, **kw)
    assert "acceptance" in _keys(guessed) and "acceptance" not in _keys(exact)
    # an α without a range is a design: what it realises on an engine is a term (terms.DESIGNED_MISS)
    assert designed.interval is not None
    term = next(s.term for s in designed.interval.speedup.swings if s.term.key == "acceptance")
    assert term.describe() == "the acceptance α a design of 0.80 realises: 0.72–0.89"
    assert designed.interval.speedup.low < exact.interval.speedup.low
    assert guessed.speedup == exact.speedup
    assert guessed.interval is not None and exact.interval is not None
    assert guessed.interval.speedup.low < exact.interval.speedup.low
    assert guessed.interval.dominant == "the acceptance α per drafted token (estimated): 0.70–0.85"


def test_each_end_of_a_term_is_the_model_with_that_value(pair: tuple[str, str]) -> None:
    target, draft = pair
    kw: dict[str, Any] = {
        "alpha": 0.8, "draft_model": draft, "context": 247, "engine": "llamacpp", "priors": PRIORS,
    }  # fmt: skip
    p = predict(target, H200, "F16", "draft", 4, **kw)
    assert p.interval is not None
    swing = next(s for s in p.interval.speedup.swings if s.term.key == "spec_pass_s")
    cost = next(c for c in PRIORS.host_costs if c.field == "spec_pass_s")
    assert (swing.term.low, swing.term.central, swing.term.high) == (
        *cost.band()[:1],
        LLAMACPP_GPU_SPEC_PASS_S,
        cost.band()[1],
    )
    assert cost.band()[0] < cost.low and cost.band()[1] > cost.high  # six values: widened to one more
    high = predict(target, H200, "F16", "draft", 4, terms_at=("spec_pass_s", "high"), **kw)
    assert high.breakdown.spec_pass_s == swing.term.high and high.speedup == swing.at_high
    assert (
        high.interval is None
        and predict(target, H200, "F16", "draft", 4, spread=False, **kw).interval is None
    )
    launch = next(s for s in p.interval.speedup.swings if s.term.key == "launch")
    assert (launch.term.low, launch.term.high) == LAUNCH and launch.at_low > p.speedup > launch.at_high


def test_an_engine_without_named_costs_gets_the_unknown_round_host_work() -> None:
    kw: dict[str, Any] = {"accepted_length": 2.1, "context": 512, "baseline_tok_s": 141.4, "priors": PRIORS}
    p = predict("Llama-3.1-8B", H100, "BF16", "eagle", 2, engine="vllm", **kw)
    # a vLLM verify: no curve measured, wide; its host work per round and per drafting pass unknown
    assert _keys(p) == {"verify", "round_s", "draft_pass_s", "launch"}
    assert p.breakdown.draft_host_s == 0.0  # unknown is 0 at the centre, not guessed
    e3 = predict("Llama-3.1-8B", H100, "BF16", "eagle3", 2, engine="vllm", **kw)
    assert "draft_pass_s" in _keys(e3) and "round_s" not in _keys(e3)
    # the same point with the table less the entry fitted on its source: back to the unknown
    held_out = PRIORS.without(next(c.fitted_on for c in PRIORS.host_costs if c.field == "draft_pass_s"))
    loso = predict("Llama-3.1-8B", H100, "BF16", "eagle3", 2, engine="vllm", **{**kw, "priors": held_out})
    assert "round_s" in _keys(loso) and loso.breakdown.draft_host_s == 0.0
    assert loso.speedup > e3.speedup
    # left out, the unknown per-pass band reaches down to what the fitted cost gives
    assert "draft_pass_s" in _keys(loso) and loso.interval is not None
    assert loso.interval.speedup.low < e3.speedup


def test_the_unknown_host_work_per_drafting_pass_weighs_more_the_more_passes_a_round_runs() -> None:
    kw: dict[str, Any] = {"context": 512, "baseline_tok_s": 141.4, "engine": "vllm", "priors": PRIORS}

    def downward_move(k: int) -> float:
        p = predict("Llama-3.1-8B", H100, "BF16", "eagle", k, accepted_length=2.0, **kw)
        assert p.interval is not None
        swing = next(s for s in p.interval.speedup.swings if s.term.key == "draft_pass_s")
        assert swing.term.low == 0.0 and swing.term.high == UNKNOWN_PASS["gpu"].high
        return p.speedup / swing.at_high

    assert 1.0 < downward_move(2) < downward_move(7)
    # an n-gram round runs no drafting pass: no such term, only the round's
    ngram = predict("Llama-3.1-8B", H100, "BF16", "ngram", 4, alpha=0.7, **kw)
    assert "draft_pass_s" not in _keys(ngram) and "round_s" in _keys(ngram)


def test_a_stopped_draft_carries_an_interval_too() -> None:
    kw: dict[str, Any] = {
        "draft_model": "Qwen3.5-0.8B",
        "draft_quant": "Q8_0",
        "replay": True,
        "baseline_tok_s": 139.9,
        "priors": PRIORS,
    }
    p = predict_stopped("Qwen3.6-35B-A3B", "RTX 3090", "UD-Q4_K_XL", "draft", 8, alpha=0.72, stop=0.72,
                        engine="llamacpp", alpha_range=(0.67, 0.77), **kw)  # fmt: skip
    assert p.interval is not None and p.interval.low < p.speedup < p.interval.high
    assert {s.term.key for s in p.interval.swings} >= {"acceptance", "spec_pass_s", "launch"}
    plain = predict_stopped("Qwen3.6-35B-A3B", "RTX 3090", "UD-Q4_K_XL", "draft", 8, alpha=0.72, stop=0.72,
                            engine="llamacpp", spread=False, **kw)  # fmt: skip
    assert plain.interval is None and plain.speedup == p.speedup


def test_predict_prints_the_interval_and_the_widest_term(pair: tuple[str, str]) -> None:
    target, draft = pair
    args = ["predict", "--model", target, "--draft-model", draft, "--gpu", "H200", "--quant", "F16",
            "--method", "draft", "--draft-max", "4", "--alpha", "0.8", "--context", "247"]  # fmt: skip
    out = CliRunner().invoke(app, [*args, "--engine", "llamacpp"]).output
    assert "interval    speedup ×1.4" in out and "widest      the bandwidth efficiency" in out
    measured = ["--baseline-tok-s", "454.1", "--alpha-range", "0.7", "0.85"]
    out = CliRunner().invoke(app, [*args, *measured, "--engine", "llamacpp"]).output
    assert "widest      the acceptance α per drafted token (estimated): 0.70–0.85" in out
    # no engine named: its verify cost is not known, from the roofline up to the worst measured
    unnamed = predict(target, H200, "F16", "draft", 4, alpha=0.8, draft_model=draft, context=247,
                      baseline_tok_s=454.1, priors=PRIORS)  # fmt: skip
    assert unnamed.interval is not None
    verify = next(s for s in unnamed.interval.speedup.swings if s.term.key == "verify")
    assert verify.term.label.startswith(
        "the verify cost of an unnamed engine on CUDA (f16/bf16, dense; no curve"
    )
    assert "--engine" in CliRunner().invoke(app, [*args, "--engine", "tgi"]).output
