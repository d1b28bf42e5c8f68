"""Crossover formula and decision table, on numbers and on SYNTHETIC run directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench import analysis
from specbench.analysis import KEEP_OFF
from specbench.analysis.findings.model import Finding
from specbench.analysis.tables import crossover
from specbench.analysis.tables.crossover import crossover_length, crossover_regime
from specbench.report.answer import answer_lines
from tests.support.synth import Arm, Plan, make_run, spec


def test_crossover_matches_the_published_example() -> None:
    # docs/mistakes.md, mistake 7: a prefill tax of 11.5 s at 29 → 46 tok/s pays back after ≈ 900 tokens.
    length = crossover_length(0.0, 11_500.0, 29.0, 46.0)
    assert length == pytest.approx(11.5 / (1 / 29 - 1 / 46))
    assert 890 < length < 910  # type: ignore[operator]


@pytest.mark.parametrize(
    ("args", "expected", "phrase"),
    [
        ((200.0, 1000.0, 30.0, 45.0), 72.0, "longer than 72"),  # tax repaid by faster decode
        ((1000.0, 200.0, 45.0, 30.0), 72.0, "shorter than 72"),  # faster prefill, slower decode
        ((300.0, 200.0, 30.0, 45.0), None, "every output length"),  # faster at both: always wins
        ((200.0, 300.0, 45.0, 30.0), None, "never wins"),  # slower at both
        ((200.0, 200.0, 30.0, 30.0), None, "ties"),
        ((200.0, float("nan"), 30.0, 45.0), None, "unknown"),
        ((200.0, 300.0, 0.0, 45.0), None, "unknown"),
    ],
)
def test_crossover_cases(args: tuple[float, ...], expected: float | None, phrase: str) -> None:
    length = crossover_length(*args)
    assert length == (pytest.approx(expected) if expected is not None else None)
    assert phrase in crossover_regime(*args)


WORDS = {"equivalent": "equal within the noise band", "undetermined": "difference undetermined"}


def _run(root: Path, **arms: Arm) -> analysis.RunData:
    return analysis.load_run(make_run(root, Plan(arms=dict(arms), repeats=4, prompts_per_category=3)))


def test_decision_picks_the_clearly_faster_arm(tmp_path: Path) -> None:
    run = _run(tmp_path / "r", baseline=Arm(decode_tok_s=30), fast=spec(45), slow=spec(20))
    (decision,) = analysis.decision_table(run)
    assert decision.arm == "fast" and decision.recommendation == "fast"
    assert 1.4 < decision.ci_low <= decision.speedup <= decision.ci_high < 1.6
    assert "decode ×1.5" in decision.reason


def test_decision_keeps_speculation_off_when_the_arm_is_slower(tmp_path: Path) -> None:
    run = _run(tmp_path / "r", baseline=Arm(decode_tok_s=30), slow=spec(20))
    (decision,) = analysis.decision_table(run)
    assert decision.arm is None and decision.recommendation == KEEP_OFF
    assert (
        "no arm is significantly faster" in decision.reason and "every arm decodes slower" in decision.reason
    )
    assert "the closest, slow, reaches ×0.6" in decision.reason and "best:" not in decision.reason


def test_decision_never_recommends_an_arm_with_an_error_finding(tmp_path: Path) -> None:
    # Configured to speculate, never drafts, yet measures faster: a confounded number.
    run = _run(tmp_path / "r", baseline=Arm(decode_tok_s=30), broken=spec(40, drafts=False))
    (decision,) = analysis.decision_table(run)
    assert decision.arm is None
    assert "SILENT_FALLBACK" in decision.reason and "untrustworthy" in decision.reason


def test_decision_refuses_a_decode_win_that_loses_on_wall_clock(tmp_path: Path) -> None:
    # 10 % faster decode cannot repay 2 s of extra prefill on 128-token outputs.
    run = _run(tmp_path / "r", baseline=Arm(decode_tok_s=30), taxed=spec(33, prefill_ms=2200))
    (decision,) = analysis.decision_table(run)
    assert decision.arm is None and "wall clock" in decision.reason


def test_crossovers_and_measured_winners_from_a_sweep(sweep: Path) -> None:
    run = analysis.load_run(sweep)
    assert crossover.crossovers(run)["spec"] == pytest.approx(72, rel=0.1)
    winners = crossover.wall_clock_winners(run).set_index("max_tokens")["winner"]
    assert winners.to_dict() == {32: "baseline", 128: "spec", 512: "spec"}


def test_no_winners_without_a_length_sweep(three_arms: Path) -> None:
    assert crossover.wall_clock_winners(analysis.load_run(three_arms)).empty


def test_a_prefill_difference_within_noise_gives_no_crossover(tmp_path: Path) -> None:
    # 0.5 % slower prefill is inside the ±1 % band: no tax to repay, so no L* from noise
    run = _run(tmp_path / "r", baseline=Arm(decode_tok_s=30), spec=spec(45, prefill_ms=201))
    cmp = crossover.prefill_comparison(run, "spec")
    assert cmp is not None and cmp.verdict in ("equivalent", "undetermined")
    assert crossover.crossovers(run)["spec"] is None
    row = crossover.crossover_frame(run).iloc[0]
    assert row["prefill_tax_s"] == 0 and f"prefill {WORDS[cmp.verdict]}" in row["regime"]
    assert "every output length" in row["regime"]


def test_a_real_prefill_tax_keeps_its_crossover(tmp_path: Path) -> None:
    run = _run(tmp_path / "r", baseline=Arm(decode_tok_s=30), spec=spec(45, prefill_ms=1200))
    assert crossover.prefill_comparison(run, "spec").verdict == "slower"  # type: ignore[union-attr]
    # L* = 1 s / (1/30 − 1/45) s per token = 90 tokens
    assert crossover.crossovers(run)["spec"] == pytest.approx(90, rel=0.15)


def test_a_decode_difference_within_noise_ties_instead_of_never_winning(tmp_path: Path) -> None:
    # 0.3 % slower decode and the same prefill: not "never wins on wall clock", a tie within noise
    run = _run(tmp_path / "r", baseline=Arm(decode_tok_s=30), spec=spec(29.9))
    row = crossover.crossover_frame(run).iloc[0]
    x = crossover.crossover_inputs(run, "spec")
    assert {x.prefill_verdict, x.decode_verdict} <= {"equivalent", "undetermined"}
    notes = f"prefill {WORDS[x.prefill_verdict]}; decode {WORDS[x.decode_verdict]}"
    assert row["regime"] == f"ties at every output length ({notes})"


# -- the decision names only trusted, speculating arms (#27) -------------------------------------
def _confound(arm: str) -> Finding:
    return Finding(
        "CONFOUND", ("baseline", arm), f"{arm} differs from baseline in non-speculative flags.", "error"
    )


def test_a_confounded_non_speculating_arm_is_never_named_the_fastest(tmp_path: Path) -> None:
    """Regression: `--threads 1` on top of `-t 1` got an error CONFOUND, and the decision line then
    named that excluded arm, which does not speculate, as the one that "looks faster"."""
    run = _run(
        tmp_path / "r",
        baseline=Arm(decode_tok_s=30),
        threads=Arm(args=("--threads", "1"), decode_tok_s=45),
        ngram=spec(20),
    )
    found = [*analysis.judge(run), _confound("threads")]  # whatever the confound check decides
    (decision,) = analysis.decision_table(run, found=found)
    assert decision.arm is None and "threads" not in decision.reason
    assert "the closest, ngram" in decision.reason and decision.speedup < 1  # the context: ngram's
    assert "1 arm that looks faster, but CONFOUND makes the comparison untrustworthy" in decision.reason


def test_a_non_speculating_arm_is_never_recommended(tmp_path: Path) -> None:
    """An A/A copy of the baseline (no flags, no finding) that reads faster is no speculative setting."""
    run = _run(tmp_path / "r", baseline=Arm(decode_tok_s=30), same=Arm(decode_tok_s=45), ngram=spec(36))
    (decision,) = analysis.decision_table(run)
    assert decision.arm == "ngram" and "same" not in decision.reason


def test_the_answer_never_names_an_arm_the_decision_may_not(tmp_path: Path) -> None:
    """The answer at the top of the report follows the decision's rule: an A/A copy of the
    baseline that reads faster (it does not speculate) is never "the best" of a workload."""
    run = _run(tmp_path / "r", baseline=Arm(decode_tok_s=30), same=Arm(decode_tok_s=45), ngram=spec(20))
    result = analysis.analyse(run)
    (ans,) = result.answers
    assert ans.ship is None and ans.arm == "ngram"
    assert not any("same" in line for line in answer_lines(result))
