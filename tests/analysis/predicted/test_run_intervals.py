"""Intervals on a run (analysis/predicted/spread.py): every predicted arm carries the 80 % interval
of the terms the run does not measure and names the widest; a forward probe narrows it. The runs
are SYNTHETIC (tests/support/synth.py) on a fixed fake CPU."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

import pytest

from specbench.analysis.predicted.arms import run_theory
from specbench.analysis.predicted.setup import MEDIAN_SE, Z80, probe_band
from specbench.analysis.predicted.text import format_arm_predictions
from specbench.report.page.document import Bullets, Table
from specbench.report.predicted import theory_section
from tests.support.records import write_cells
from tests.support.synth import FAKE_CPU, Arm, Plan, lab_truth, make_run, spec, use_lab_model


@pytest.fixture(autouse=True)
def fake_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specbench.analysis.predicted.models.stored_cpu", lambda run_dir: FAKE_CPU)


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=20), "draft8": spec(34, acceptance=0.6)},
        prompts_per_category=2,
        repeats=2,
    )
    run = make_run(tmp_path_factory.mktemp("lab") / "run", plan)
    return use_lab_model(run, lab_truth("membound", "dense"))


def _with_probe(run: Path, dest: Path, samples_ms: dict[int, list[float]]) -> Path:
    """A copy of ``run`` whose baseline cells share a forward probe with these samples."""
    shutil.copytree(run, dest)
    cells = [json.loads(line) for line in (dest / "cells.jsonl").read_text().splitlines()]
    samples = [
        {"tokens": t, "rep": i, "prompt_ms": ms, "prompt_n": t}
        for t, values in samples_ms.items()
        for i, ms in enumerate(values)
    ]
    for c in cells:
        if c["arm"] == "baseline":
            c["forward_probe"] = {"version": 1, "sizes": list(samples_ms), "reps": 3, "samples": samples}
    write_cells(dest / "cells.jsonl", cells)
    return dest


PROBE = {1: [30.0, 30.5, 29.5], 2: [31.0, 31.4, 30.8], 5: [33.0, 33.6, 32.7], 9: [90.0, 91.0, 89.5]}


def test_every_arm_carries_its_interval_and_names_the_widest_term(lab_run: Path) -> None:
    (arm,) = run_theory(lab_run).arms
    assert arm.predicted_low <= arm.predicted_speedup <= arm.predicted_high
    assert arm.replayed_low <= arm.replayed_speedup <= arm.replayed_high
    assert arm.predicted_high > arm.predicted_low
    # no probe on a CPU run: the verify spans the roofline up to the 2-core curve, and dominates
    assert arm.widest is not None and arm.widest.startswith(
        "the verify cost of llama.cpp CPU (f16/bf16, dense)"
    )
    text = format_arm_predictions(run_theory(lab_run))
    assert "predicted [80 %]" in text and f"[{arm.predicted_low:.2f}–{arm.predicted_high:.2f}]" in text
    assert f"draft8: the interval is widest in {arm.widest}" in text


def test_a_forward_probe_narrows_the_interval(lab_run: Path, tmp_path: Path) -> None:
    (blind,) = run_theory(lab_run).arms
    (probed,) = run_theory(_with_probe(lab_run, tmp_path / "probed", PROBE)).arms
    assert probed.widest is not None and "llama.cpp CPU" not in probed.widest
    assert probed.replayed_high / probed.replayed_low < blind.replayed_high / blind.replayed_low


def test_the_probe_band_is_the_medians_80_percent_range(lab_run: Path, tmp_path: Path) -> None:
    # one launch of three ran slow throughout (the 2026-12-04 H200 run had one in four): the MAD
    # keeps it from widening the band the way a standard deviation would
    slow = {t: [*v, v[0] * 3] for t, v in PROBE.items()}
    theory = run_theory(_with_probe(lab_run, tmp_path / "slow", slow))
    assert theory.setup.curve_band is not None and theory.setup.curve is not None
    low, high = theory.setup.curve_band
    cells = sum(c["arm"] == "baseline" for c in theory.setup.run.cells)  # each carries the probe

    def se(t: int) -> float:
        v = slow[t] * cells
        mad = statistics.median(abs(x - statistics.median(v)) for x in v)
        return MEDIAN_SE * mad / math.sqrt(len(v))

    assert high.prefill(9) - theory.setup.curve.prefill(9) == pytest.approx(Z80 * math.hypot(se(9), se(1)))
    assert low.prefill(1) == high.prefill(1) == theory.setup.curve.prefill(1)  # the anchor stays
    assert high.prefill(9) - low.prefill(9) < 5.0  # ms, against 90 ms of a slow launch
    assert probe_band(theory.setup.run, 1, theory.setup.baseline_tok_s) is not None


def test_the_fitted_arm_is_refitted_at_every_end(lab_run: Path) -> None:
    (arm,) = run_theory(lab_run, fit_arm="draft8").arms
    assert arm.fitted and arm.replayed_speedup == pytest.approx(arm.measured_speedup, rel=1e-9)
    # every end is fitted again, so none moves the arm above its measurement; the verify's high
    # end (the 2-core curve) costs more than the measurement leaves room for, and the fit clamps
    # at no overhead (arms.fit_round_overhead), so that end alone moves it down
    assert arm.replayed_high == pytest.approx(arm.measured_speedup, rel=1e-6)
    assert arm.replayed_low < arm.measured_speedup


def test_the_report_section_shows_the_interval_and_the_widest_term(lab_run: Path) -> None:
    blocks = theory_section(run_theory(lab_run))
    table = next(b for b in blocks if isinstance(b, Table))
    assert "predicted [80 %]" in table.frame.columns and "replayed [80 %]" in table.frame.columns
    bullets = next(b for b in blocks if isinstance(b, Bullets))
    assert any("the interval is widest in" in line for line in bullets.items)


def test_the_interval_is_in_the_strict_json(lab_run: Path) -> None:
    arm = json.loads(json.dumps(run_theory(lab_run).to_dict(), allow_nan=False))["arms"][0]
    assert arm["predicted_low"] < arm["predicted_speedup"] < arm["predicted_high"] and arm["widest"]


def test_a_gpu_run_without_a_probe_uses_the_engines_measured_curve(tmp_path: Path) -> None:
    # the lab gpu pair on an H200 at the measured baseline, no forward probe: the verify of 9
    # tokens costs what llama.cpp CUDA's f16 curves say (1.5–1.6 steps), not the roofline's 1.0
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=454), "draft8": spec(520, acceptance=0.343)},
        prompts_per_category=2,
        repeats=2,
    )
    run = use_lab_model(make_run(tmp_path / "run", plan), lab_truth("gpu", "dense"), gpu="NVIDIA H200")
    theory = run_theory(run)
    assert "the curves measured for llama.cpp CUDA (f16/bf16, dense)" in theory.describe()
    (arm,) = theory.arms
    assert arm.widest is not None
    assert arm.predicted_low <= arm.predicted_speedup <= arm.predicted_high
    assert theory.setup.verify is not None and theory.setup.verify_floor is not None
    assert theory.setup.verify_floor(9) == pytest.approx((1.62 + 1.52) / 2)
