"""A baseline above the roofline names both bandwidths it speaks of, so a reader can reconcile
the probe's figure with the one the calibration uses (runs are SYNTHETIC, tests/support/synth.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specbench.analysis.predicted.arms import theory_or_reason
from specbench.theory.hardware import Gpu
from tests.support.synth import Arm, Plan, lab_truth, make_run, spec, use_lab_model

# the machine probe a run stores, fixed (a FAKE device: the wording, not the machine, is tested)
FAKE_CPU = Gpu("cpu", bandwidth_gbs=20.0, tflops=1.0, memory_gb=32.0, unified=True, host_link_gbs=20.0)


def test_the_raised_bandwidth_is_said_to_replace_the_probed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("specbench.analysis.predicted.models.stored_cpu", lambda run_dir: FAKE_CPU)
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=200), "fast": spec(300)}, prompts_per_category=2, repeats=2
    )
    run = make_run(tmp_path / "run", plan)
    use_lab_model(run, lab_truth("membound", "dense"))
    theory = theory_or_reason(run)
    assert not isinstance(theory, str)
    text = theory.describe()
    used = theory.setup.gpu.bandwidth_gbs
    assert f"η_bw 1.000 of cpu ({used:.1f} GB/s)" in text
    assert "at the full 20.0 GB/s (the run's probe)" in text
    assert re.search(rf"uses the {used:.1f} GB/s the baseline needs in place of 20\.0 GB/s", text), text
