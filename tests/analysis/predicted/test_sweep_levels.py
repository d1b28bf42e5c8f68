"""A run that sweeps concurrency is calibrated level by level (analysis/predicted/arms.py
SweepTheory): each level's baseline fixes η_bw there, and an arm whose verify (C·(K+1) tokens)
is wider than the forward probe measured is said to be beyond it, never extrapolated silently.
The runs are SYNTHETIC (tests/support/synth.py) on a fixed fake CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from specbench.analysis.predicted import counts
from specbench.analysis.predicted.arms import run_theory
from specbench.analysis.predicted.text import format_arm_predictions
from specbench.report.page.document import Bullets, Table
from specbench.report.predicted import theory_section
from tests.support.records import write_cells
from tests.support.synth import FAKE_CPU, Arm, Plan, lab_truth, make_run, spec, use_lab_model

AT_1, AT_4 = "concurrency-sweep @ 1 in flight", "concurrency-sweep @ 4 in flight"
# The probe times passes of up to 17 tokens: draft8 verifies 1 × 9 at 1 in flight (measured)
# and 4 × 9 = 36 at 4 (beyond it).
PROBE = {1: [30.0, 30.5, 29.5], 2: [31.0, 31.4, 30.8], 9: [40.0, 40.6, 39.5], 17: [52.0, 52.5, 51.6]}


@pytest.fixture(autouse=True)
def fake_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specbench.analysis.predicted.models.stored_cpu", lambda run_dir: FAKE_CPU)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    plan = Plan(
        arms={
            "baseline": Arm(decode_tok_s=20, level_factor={4: 0.5}),
            "draft8": spec(30, acceptance=0.6, level_factor={4: 0.45}),
        },
        prompts_per_category=2,
        repeats=2,
        levels=(1, 4),
        workload="concurrency-sweep",
    )
    run = use_lab_model(
        make_run(tmp_path_factory.mktemp("sweep") / "run", plan), lab_truth("membound", "dense")
    )
    cells = [json.loads(line) for line in (run / "cells.jsonl").read_text().splitlines()]
    samples = [
        {"tokens": t, "rep": i, "prompt_ms": ms, "prompt_n": t}
        for t, v in PROBE.items()
        for i, ms in enumerate(v)
    ]
    for c in cells:
        if c["arm"] == "baseline":
            c["forward_probe"] = {"version": 1, "sizes": list(PROBE), "reps": 3, "samples": samples}
    write_cells(run / "cells.jsonl", cells)
    return run


def test_each_level_is_calibrated_on_its_own_requests(sweep: Path) -> None:
    theory = run_theory(sweep)  # before the levels: ConfigError "the run sweeps concurrency [1, 4]"
    one, four = (lv.theory for lv in theory.levels)  # type: ignore[attr-defined]
    assert one is not None and four is not None
    assert (one.setup.concurrency, four.setup.concurrency) == (1, 4)
    # each level's baseline is its own: 20 tok/s per sequence at 1, half that at 4
    assert one.setup.baseline_tok_s == pytest.approx(20, rel=0.05)
    assert four.setup.baseline_tok_s == pytest.approx(10, rel=0.05)
    assert [(a.point, a.arm) for a in theory.arms] == [(AT_1, "draft8"), (AT_4, "draft8")]
    at_1, at_4 = theory.arms
    # the measured speedup is each level's: 30 / 20 at 1, (30 · 0.45) / (20 · 0.5) at 4
    assert at_1.measured_speedup == pytest.approx(1.5, rel=0.05)
    assert at_4.measured_speedup == pytest.approx(30 * 0.45 / 10, rel=0.05)


def test_a_verify_wider_than_the_probe_is_said_and_bracketed(sweep: Path) -> None:
    at_1, at_4 = run_theory(sweep).arms
    assert (at_1.verify_tokens, at_4.verify_tokens) == (9, 36)
    assert at_1.beyond_probe is None and at_4.beyond_probe is not None
    assert "36 tokens a pass, beyond the forward probe's 17" in at_4.beyond_probe
    assert at_4.predicted_low <= at_4.predicted_speedup <= at_4.predicted_high
    assert at_4.widest is not None and "beyond the forward probe's 17" in at_4.widest
    text = format_arm_predictions(run_theory(sweep))
    assert (
        "At 1 in flight: Calibrated on baseline" in text and "At 4 in flight: Calibrated on baseline" in text
    )
    rows = [line for line in text.splitlines() if line.startswith(("1 in flight", "4 in flight"))]
    assert len(rows) == 2 and "9 tokens" in rows[0] and "36 tokens, beyond the probe" in rows[1]
    assert "draft8 at 4 in flight: verifies 4 × 9 = 36 tokens a pass, beyond the forward probe's 17" in text
    assert "draft8: speculation " in text and "; measured: speculation " in text


def test_the_report_shows_the_same_per_level(sweep: Path) -> None:
    blocks = theory_section(run_theory(sweep))
    (table,) = [b for b in blocks if isinstance(b, Table)]
    assert list(table.frame["level"]) == ["1 in flight", "4 in flight"]
    assert list(table.frame["verify pass"]) == ["9 tokens", "36 tokens, beyond the probe"]
    notes = [line for b in blocks if isinstance(b, Bullets) for line in b.items]
    assert any(line.startswith("At 4 in flight: Calibrated") for line in notes)
    assert any("beyond the forward probe's 17" in line for line in notes)


def test_a_levels_rounds_are_its_share_of_the_launches_counters() -> None:
    # /metrics counts rounds per launch, over every level; each request needs ⌈d/K⌉ at least:
    # here 2 + 2 at this level of 2 + 2 + 4 + 4 in the launches
    assert counts.level_rounds(12.0, [8.0, 8.0], [8.0, 8.0, 16.0, 16.0], 4) == 4.0  # drafted their minimum
    assert (
        counts.level_rounds(30.0, [8.0, 8.0], [8.0, 8.0, 16.0, 16.0], 4) == 4.0 + 18.0 * 4 / 12
    )  # and a share
    assert math.isclose(counts.level_rounds(0.0, [], [], 4), 0.0)
