"""Verdicts on the real engine where the answer is known by construction (lab models)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench import api
from specbench.analysis import comparisons, decision_table, judge, load_run
from specbench.analysis.predicted.arms import run_theory
from specbench.report import render_report
from tests.support.lab import lab_pair
from tests.support.matrices import draft, write_matrix

pytestmark = pytest.mark.engine


def run(tmp_path: Path, matrix: Path) -> Path:
    out = tmp_path / "run"
    api.prepare_run(matrix, out).run()
    return out


def test_incompatible_draft_is_reported_as_silent_fallback(llama_server: Path, tmp_path: Path) -> None:
    pair = lab_pair(arch="dense", alpha=0.8, incompatible_draft=True)
    matrix = write_matrix(
        tmp_path, pair, llama_server, {"baseline": [], "draft4": draft(pair.draft, 4)}, repeats=1
    )
    found = judge(load_run(run(tmp_path, matrix)))
    (fallback,) = [f for f in found if f.code == "SILENT_FALLBACK"]
    assert fallback.arms == ("draft4",) and fallback.severity == "error"
    assert "/slots reports speculative=false" in fallback.evidence
    assert "the target and draft vocabs are not compatible" in fallback.evidence


def test_an_a_a_run_finds_no_difference(llama_server: Path, tmp_path: Path) -> None:
    pair = lab_pair(arch="dense", alpha=0.8)
    matrix = write_matrix(
        tmp_path,
        pair,
        llama_server,
        {"baseline": [], "same": []},
        repeats=6,
        workload={"suite": "natural", "max_tokens": 64, "prompts": 5, "prompt_file": "prompts.jsonl"},
        # A 95 % family calls an A/A arm faster or slower in up to 5 % of runs by design: one CI run
        # in ~50 read "slower" ×0.81 (95 % CI 0.72–…) with two llama.cpp threads on a shared 2-core
        # machine, whose stalls give launch means heavy tails (docs/statistics.md). α 0.001 and one
        # thread make a false verdict rare enough that a failure here is evidence of a bias.
        common_args=["-c", "2048", "-np", "1", "-t", "1"],
        alpha=0.001,
    )
    data = load_run(run(tmp_path, matrix))
    cmp = comparisons(data)["same"]
    assert cmp.n_pairs == 30 and cmp.n_launches == 6 and data.confidence == pytest.approx(0.999)
    assert cmp.verdict in ("equivalent", "undetermined"), cmp  # never faster or slower
    assert not [f for f in judge(data) if f.code in ("CONFOUND", "SILENT_FALLBACK", "OUTPUT_DRIFT")]


def test_memory_bound_dense_draft_wins_and_is_recommended(llama_server: Path, tmp_path: Path) -> None:
    """Dense, α 0.9, K 4 on a model large enough that CPU decode is memory-bound: verifying five
    tokens costs about one step, so the draft arm must be faster, and the decision must say so
    unless the run found its own launches too unstable to trust (then it must say that)."""
    pair = lab_pair(arch="dense", alpha=0.9, size="membound")
    matrix = write_matrix(
        tmp_path,
        pair,
        llama_server,
        {"baseline": [], "draft4": draft(pair.draft, 4)},
        # One compute thread in both arms (issue 29: undetermined on a busy machine). llama.cpp's
        # threads meet at a barrier after every operation, so with more threads than the cores
        # other jobs leave free, one descheduled thread stalls the rest; one thread has no barrier
        # and load slows both arms alike. Measured under load average 6 on 2 CPUs: ×1.90 (98.8 %
        # CI 1.04–3.45), "faster" after 5 launch pairs, of the 10 allowed.
        common_args=["-c", "2048", "-np", "1", "-t", "1", "-tb", "1"],
        workload={"suite": "natural", "max_tokens": 48, "prompts": 5, "prompt_file": "prompts.jsonl"},
        repeats="auto",
        max_repeats=10,
    )
    out = run(tmp_path, matrix)
    data = load_run(out)
    sub = data.df[data.df["arm"] == "draft4"]
    acceptance = sub["draft_accepted"].sum() / sub["draft_n"].sum()
    assert acceptance == pytest.approx(pair.truth["designed_acceptance"]["4"], abs=0.1)
    assert comparisons(data)["draft4"].verdict == "faster", comparisons(data)["draft4"]
    (decision,) = decision_table(data)
    # The decision trusts no arm whose launches vary by more than 25 % (UNSTABLE as an error:
    # docs/statistics.md), and on a machine shared with other jobs they can, even at one thread
    # (measured: CV 32 %, load average 6 on 2 CPUs, ×1.90 faster). The run then says so instead
    # of recommending: what is asserted is that it recommends draft4 unless it found its own
    # measurement untrustworthy, and then names why.
    unstable = [f for f in judge(data) if f.code == "UNSTABLE" and f.severity == "error"]
    if unstable:
        assert decision.arm is None and "UNSTABLE" in decision.reason, decision
    else:
        assert decision.arm == "draft4", decision
    html = (Path(p) for p in render_report(out, ["html"]) if str(p).endswith(".html"))
    assert "draft4" in next(html).read_text()
    # The theory, calibrated on the baseline arm alone, with the verify cost from the forward probe:
    # it reproduces the baseline and predicts the measured sign (the ratio: bench/theory_vs_lab.py).
    theory = run_theory(out)
    assert theory.setup.curve is not None
    (arm,) = theory.arms
    assert arm.predicted_speedup > 1.0 and arm.replayed_speedup > 1.0


def test_a_slower_speculative_arm_means_keep_speculation_off(llama_server: Path, tmp_path: Path) -> None:
    """Tiny model (compute-bound on CPU), α 0, K 8: every 9-token verification yields one token."""
    pair = lab_pair(arch="dense", alpha=0.0)
    matrix = write_matrix(
        tmp_path,
        pair,
        llama_server,
        {"baseline": [], "draft8": draft(pair.draft, 8)},
        workload={"suite": "natural", "max_tokens": 64, "prompts": 5, "prompt_file": "prompts.jsonl"},
        # Launch-to-launch noise on a loaded machine can exceed the effect at 4 launches: the
        # sequential rule adds launches until the verdict is settled (valid under repeated looks).
        repeats="auto",
        max_repeats=12,
    )
    data = load_run(run(tmp_path, matrix))
    assert comparisons(data)["draft8"].verdict == "slower", comparisons(data)["draft8"]
    assert data.manifest["adaptive"]["arms"]["draft8"]["stopped"] == "slower"
    (decision,) = decision_table(data)
    assert decision.arm is None and "keep speculation off" in decision.recommendation
    assert any(f.code == "SPEC_LOSS" for f in judge(data))
    (arm,) = run_theory(tmp_path / "run").arms
    assert arm.predicted_speedup < 1.0 and arm.replayed_speedup < 1.0


def test_the_table_carries_what_the_findings_say_of_an_arm(llama_server: Path, tmp_path: Path) -> None:
    """Issue 44 on the real llama-server: an arm that never drafted (a draft whose vocabulary
    llama.cpp rejects) and an arm whose threads differ from the baseline's. Their verdict cells
    name SILENT_FALLBACK and CONFOUND, and neither offers "more launches" (they would not make
    either a valid comparison); the baseline keeps its plain "baseline"."""
    pair = lab_pair(arch="dense", alpha=0.8, incompatible_draft=True)
    arms = {
        "baseline": ["-t", "2"],
        "draft4": ["-t", "2", *draft(pair.draft, 4)],
        "ngram": ["-t", "1", "--spec-type", "ngram-mod"],
    }
    data = load_run(run(tmp_path, write_matrix(tmp_path, pair, llama_server, arms, repeats=3)))
    from specbench.analysis import analyse

    a = analyse(data)
    verdicts = dict(zip(a.summary["arm"], a.summary["verdict"], strict=True))
    assert verdicts["baseline"] == "baseline"
    assert "not trusted: SILENT_FALLBACK" in verdicts["draft4"], verdicts
    assert "not trusted: CONFOUND" in verdicts["ngram"], verdicts
    assert not any("more launch" in verdicts[arm] for arm in ("draft4", "ngram")), verdicts
    assert not any(d.arm in ("draft4", "ngram") for d in a.decisions)
