"""A busy machine and a changed model must not read as a result: SYNTHETIC run directories
(the noise of a busy box is dialled in, which a real engine on a quiet test box cannot be made to show)."""

from __future__ import annotations

from pathlib import Path

from specbench import analysis
from specbench.analysis.compare import compare_runs
from specbench.report import format_comparison
from tests.support.synth import Arm, Plan, make_run, spec


def _plan(noise: float, sha: str = "ab" * 32) -> Plan:
    arms = {"baseline": Arm(decode_tok_s=30), "fast": spec(60)}
    return Plan(arms=arms, repeats=4, prompts_per_category=3, noise=noise, model_sha=sha)


def test_a_busy_machine_gets_no_recommendation_and_a_caveated_verdict(tmp_path: Path) -> None:
    run = analysis.load_run(make_run(tmp_path / "busy", _plan(noise=0.35)))
    found = analysis.judge(run)
    unstable = [f for f in found if f.code == "UNSTABLE"]
    assert unstable and all(f.severity == "error" for f in unstable)
    (decision,) = analysis.decision_table(run, found=found)
    assert decision.arm is None
    assert "UNSTABLE" in decision.reason and "quiet machine" in decision.reason
    verdict = analysis.arm_summary(run).set_index("arm").loc["fast", "verdict"]
    assert "UNSTABLE" in verdict


def test_a_quiet_machine_still_gets_its_recommendation(tmp_path: Path) -> None:
    run = analysis.load_run(make_run(tmp_path / "quiet", _plan(noise=0.03)))
    (decision,) = analysis.decision_table(run)
    assert decision.arm == "fast"
    assert "UNSTABLE" not in analysis.arm_summary(run).set_index("arm").loc["fast", "verdict"]


def test_compare_flags_an_unstable_run(tmp_path: Path) -> None:
    quiet = make_run(tmp_path / "quiet", _plan(noise=0.03))
    busy = make_run(tmp_path / "busy", _plan(noise=0.35))
    df = compare_runs(quiet, busy).set_index("arm")
    assert "UNSTABLE in b" in df.loc["fast", "verdict"]
    assert "UNSTABLE in b" in df.loc["fast", "speedup_verdict"]


def test_compare_warns_when_the_models_differ(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", _plan(noise=0.03, sha="ab" * 32))
    b = make_run(tmp_path / "b", _plan(noise=0.03, sha="cd" * 32))
    text = format_comparison(compare_runs(a, b))
    assert "different models" in text and "abababababab" in text and "cdcdcdcdcdcd" in text
    same = make_run(tmp_path / "same", _plan(noise=0.03))
    assert "different models" not in format_comparison(compare_runs(a, same))


def test_an_undetermined_change_of_speedup_says_how_many_launches_would_settle_it(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", _plan(noise=0.08))
    plan_b = _plan(noise=0.08)
    plan_b.arms["fast"] = spec(61.5)
    plan_b.seed = 1
    row = compare_runs(a, make_run(tmp_path / "b", plan_b)).set_index("arm").loc["fast"]
    # how many MORE launches each run needs, with the range its noise allows (issue 28.3)
    assert row["speedup_verdict"].startswith("undetermined (about "), row["speedup_verdict"]
    assert " more launches per run" in row["speedup_verdict"]
