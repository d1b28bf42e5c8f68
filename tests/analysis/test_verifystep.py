"""VERIFY_STEP (analysis/verifystep.py): an arm whose rounds verify just past a step in the forward
probe's verify cost. Every run here is SYNTHETIC (tests/support/synth.py): a 20 tok/s baseline
(a 50 ms decode step) whose cells are given a probe, and arms whose /metrics ``drafts`` delta is
set to give the mean draft per round each test needs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specbench.analysis import load_run
from specbench.analysis.findings.judge import judge
from specbench.analysis.findings.verifystep import StepCheck, probe_curve, verify_step
from specbench.analysis.rundata import RunData
from tests.support.records import write_cells
from tests.support.synth import Arm, Plan, make_run

NGRAM16 = ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "16")
# flat (1.0–1.1 steps) to 13 tokens, then 2.8 steps at 17: the H200's f16 kernel switch, in small
STEP = {1: 30.0, 2: 31.0, 5: 32.0, 9: 33.0, 13: 34.0, 17: 120.0, 25: 125.0}
# a CPU-like curve: every token costs about the same, no step anywhere
SMOOTH = {1: 30.0, 2: 34.0, 5: 46.0, 9: 62.0, 13: 78.0, 16: 90.0, 17: 94.0, 25: 126.0}


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    plan = Plan(
        arms={
            "baseline": Arm(decode_tok_s=20),
            "ngram16": Arm(args=NGRAM16, decode_tok_s=30, acceptance=0.9),
            "ngram64": Arm(args=("--spec-type", "ngram-mod"), decode_tok_s=30, acceptance=0.9),
            "ngram64set": Arm(args=(*NGRAM16[:3], "64"), decode_tok_s=30, acceptance=0.9),
        },
        prompts_per_category=2,
        repeats=2,
    )
    return make_run(tmp_path_factory.mktemp("vs") / "run", plan)


def _variant(
    run: Path, dest: Path, probe_ms: dict[int, float] | None, mean_draft: float | None = 15.0
) -> Path:
    """A copy of ``run`` with ``probe_ms`` on the baseline's cells (None: no probe) and each
    speculating arm's counted rounds set to drafted / ``mean_draft`` (None: not counted)."""
    shutil.copytree(run, dest)
    cells = [json.loads(line) for line in (dest / "cells.jsonl").read_text().splitlines()]
    for c in cells:
        if c["arm"] == "baseline" and probe_ms is not None:
            samples = [{"tokens": t, "rep": 0, "prompt_ms": ms, "prompt_n": t} for t, ms in probe_ms.items()]
            c["forward_probe"] = {"version": 1, "sizes": list(probe_ms), "reps": 1, "samples": samples}
        before, after = c["metrics_before"]["spec"], c["metrics_after"]["spec"]
        if "drafts" not in after:
            continue
        if mean_draft is None:
            del before["drafts"], after["drafts"]
        else:
            after["drafts"] = before["drafts"] + (after["draft_tokens"] - before["draft_tokens"]) / mean_draft
    write_cells(dest / "cells.jsonl", cells)
    return dest


def _check(run: RunData, arm: str = "ngram16") -> StepCheck | None:
    curve = probe_curve(run)
    assert curve is not None
    return verify_step(run, arm, curve)


def _steps(run_dir: Path) -> list[str]:
    return [f.evidence for f in judge(load_run(run_dir)) if f.code == "VERIFY_STEP"]


def test_fires_on_rounds_just_past_a_step(plain_run: Path, tmp_path: Path) -> None:
    run = load_run(_variant(plain_run, tmp_path / "r", STEP))
    found = [f for f in judge(run) if f.code == "VERIFY_STEP"]
    assert [(f.arms, f.severity) for f in found] == [(("ngram16",), "info")]
    text, curve = found[0].evidence, probe_curve(run)
    assert curve is not None  # v in steps of the baseline's measured ~50 ms: (50 + 90) / 50, (50 + 4) / 50
    v17, v13 = curve.ratio(17), curve.ratio(13)
    assert v17 == pytest.approx(2.8, rel=0.05) and v13 == pytest.approx(1.08, rel=0.05)
    assert "verify up to 17 tokens (draft max 16; 15.0 drafted tokens per round" in text
    assert f"v(17) = {v17:.2f} decode steps against v(13) = {v13:.2f}" in text
    assert "14–16 not probed" in text
    assert f"A draft max of 12 keeps every round at or under 13 tokens, v = {v13:.2f}." in text


def test_the_step_is_measured_from_the_largest_probed_size_below(plain_run: Path, tmp_path: Path) -> None:
    probe = {**STEP, 15: 34.5, 16: 35.0}  # the step is between 16 and 17: b′ = 16
    run = load_run(_variant(plain_run, tmp_path / "r", probe))
    (text,) = _steps(tmp_path / "r")
    curve = probe_curve(run)
    assert curve is not None
    assert f"v(17) = {curve.ratio(17):.2f} decode steps against v(16) = {curve.ratio(16):.2f}" in text
    assert "A draft max of 15 keeps every round at or under 16 tokens" in text


def test_silent_on_a_smooth_curve(plain_run: Path, tmp_path: Path) -> None:
    run = load_run(_variant(plain_run, tmp_path / "r", SMOOTH))
    curve = probe_curve(run)
    assert curve is not None
    check = verify_step(run, "ngram16", curve)
    assert check is not None and check.finding is None and check.reason and check.reason.startswith("no step")
    assert not [f for f in judge(run) if f.code == "VERIFY_STEP"]


def test_silent_when_rounds_rarely_reach_k(plain_run: Path, tmp_path: Path) -> None:
    run = load_run(_variant(plain_run, tmp_path / "r", STEP, mean_draft=6.0))
    check = _check(run)
    assert check is not None and check.finding is None
    assert check.reason == "the rounds rarely reach K: 6.0 tokens per round < 0.75 × 16"
    assert not _steps(tmp_path / "r")


def test_unknown_and_silent_without_counted_rounds(plain_run: Path, tmp_path: Path) -> None:
    run = load_run(_variant(plain_run, tmp_path / "r", STEP, mean_draft=None))
    check = _check(run)
    assert check is not None and check.finding is None and check.reason and check.reason.startswith("unknown")
    assert not _steps(tmp_path / "r")


def test_silent_without_a_probe(plain_run: Path, tmp_path: Path) -> None:
    run = load_run(_variant(plain_run, tmp_path / "r", None))
    assert probe_curve(run) is None
    assert not _steps(tmp_path / "r")


def test_unknown_when_b_itself_was_not_probed(plain_run: Path, tmp_path: Path) -> None:
    probe = {t: ms for t, ms in STEP.items() if t != 17}  # 13 then 25: v(17) would be a guess
    run = load_run(_variant(plain_run, tmp_path / "r", probe))
    check = _check(run)
    assert check is not None and check.finding is None and check.reason == "v(17) was not probed"
    assert not _steps(tmp_path / "r")


def test_never_on_a_draft_max_left_to_the_engine_default(plain_run: Path, tmp_path: Path) -> None:
    """ngram64 sets no n_max (llama.cpp's default is 64): a step at 65 says nothing about it,
    while the same rounds with n_max 64 written out (ngram64set) fire."""
    probe = {1: 30.0, 2: 31.0, 61: 34.0, 65: 120.0}
    run = load_run(_variant(plain_run, tmp_path / "r", probe, mean_draft=60.0))
    curve = probe_curve(run)
    assert curve is not None and verify_step(run, "ngram64", curve) is None
    assert [f.arms for f in judge(run) if f.code == "VERIFY_STEP"] == [("ngram64set",)]
