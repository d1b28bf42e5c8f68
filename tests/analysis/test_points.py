"""Operating points (issue 40): every comparison stays inside one level of a sweep.

SYNTHETIC runs (tests/support/synth.py) shaped like the membound CPU case of the issue: a draft
model ×1.5 at 1 request in flight and ×0.8 at 4, the baseline decoding twice as fast per request
at 4 in flight as at 1. Before operating points the run was answered with one number pooled over
the two levels (true at neither), and the baseline read as DRIFT and BIMODAL because the levels
run one after the other.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from specbench.analysis import analyse_dir, load_run
from specbench.analysis.points import level_of, phase_named, phase_of
from specbench.analysis.tables.measures import MEASURES, launch_table, objective_of
from specbench.report.answer import answer_lines
from specbench.report.render import findings_json
from tests.support.synth import Arm, Plan, make_run, spec

AT_1, AT_4 = "concurrency-sweep @ 1 in flight", "concurrency-sweep @ 4 in flight"


@pytest.fixture(scope="module")
def flips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    plan = Plan(
        arms={
            "baseline": Arm(decode_tok_s=20, level_factor={4: 2.0}),
            "draft4": spec(30, level_factor={4: 32 / 30}),  # ×1.5 at 1 in flight, ×0.8 at 4
        },
        levels=(1, 4),
        prompts_per_category=2,
        repeats=4,
        workload="concurrency-sweep",
        noise=0.02,
    )
    return make_run(tmp_path_factory.mktemp("flips") / "run", plan)


def test_levels_are_read_from_phases_and_prompt_ids() -> None:
    assert level_of("c8") is not None and level_of("c8").label == "8 in flight"  # type: ignore[union-attr]
    assert level_of("natural/len500").label == "500 tokens out"  # type: ignore[union-attr]
    assert level_of("r2.5").label == "2.5 req/s"  # type: ignore[union-attr]
    assert level_of("identical").kind == "phase"  # type: ignore[union-attr]
    assert level_of("main") is None and level_of(None) is None
    assert phase_named(None, "coding-04@c64#3") == "c64"  # an imported record without a phase
    assert phase_named("len100", "coding-04") == "len100"
    assert phase_named(None, "coding-04") == "main"


def test_a_sweep_is_answered_level_by_level_never_pooled(flips: Path) -> None:
    a = analyse_dir(flips)
    assert [d.workload for d in a.decisions] == [AT_1, AT_4]
    by = {d.workload: d for d in a.decisions}
    assert by[AT_1].arm == "draft4" and by[AT_1].measure == "throughput"
    assert by[AT_4].arm is None  # slower there: keep it off
    lines = answer_lines(a)
    assert not any(line.startswith("concurrency-sweep:") for line in lines)  # no pooled answer
    along = "\n".join(lines)
    assert "draft4 better at 1 in flight, worse at 4 in flight" in along
    assert "the sign flips between 1 and 4 in flight: keep it off from 4 in flight up" in along
    assert a.comparisons == {}  # the per-arm comparison would pool the levels


def test_no_drift_or_two_modes_from_pooled_levels(flips: Path) -> None:
    """The baseline's rate doubles from the first level to the second, which run one after the
    other: pooled, that read as DRIFT (+100 % from the first third to the last) and BIMODAL."""
    found = analyse_dir(flips).findings
    assert [f for f in found if f.code in ("DRIFT", "BIMODAL") and "baseline" in f.arms] == []


def test_findings_json_carries_every_level_measure_and_interval(flips: Path) -> None:
    rows = json.loads(json.dumps(findings_json(analyse_dir(flips))))["operating_points"]
    at4 = {r["measure"]: r for r in rows if r["arm"] == "draft4" and r["point"] == AT_4}
    assert set(at4) >= {"throughput", "ttft_p99", "e2e_p99", "decode"}
    t = at4["throughput"]
    assert t["decides"] and t["level"] == 4 and t["level_kind"] == "concurrency"
    assert t["ratio"] < 0.9 and t["ci_high"] < 1 and t["verdict"] == "slower"
    assert at4["decode"]["verdict"] == "slower" and at4["decode"]["ci_low"] <= at4["decode"]["ratio"]
    at1 = [r for r in rows if r["arm"] == "draft4" and r["point"] == AT_1 and r["measure"] == "decode"]
    assert at1[0]["verdict"] == "faster" and 1.3 < at1[0]["ratio"] < 1.7


def test_throughput_is_tokens_over_the_points_wall_time(flips: Path) -> None:
    run = load_run(flips)
    table = launch_table(run)
    row = table[(table["arm"] == "baseline") & (table["point"] == AT_1) & (table["repeat"] == 0)].iloc[0]
    recs = [
        r
        for r in run.records
        if r.arm == "baseline" and r.repeat == 0 and phase_of(r) == "c1" and not r.warmup
    ]
    start = min(r.wall_start or 0.0 for r in recs)
    end = max((r.wall_start or 0.0) + (r.t_end_ns or 0) / 1e9 for r in recs)
    tokens = sum(r.completion_tokens for r in recs if r.error is None)
    assert math.isclose(row["throughput_tok_s"], tokens / (end - start))
    assert MEASURES["throughput"].higher_is_better and not MEASURES["ttft_p99"].higher_is_better


def test_the_objective_defaults_by_suite_and_the_matrix_overrides_it(flips: Path) -> None:
    run = load_run(flips)
    assert objective_of(run, "concurrency-sweep") == "throughput"
    matrix = run.manifest["matrix"]
    decode = {**run.manifest, "matrix": {**matrix, "workload": {**matrix["workload"], "objective": "decode"}}}
    from dataclasses import replace

    assert objective_of(replace(run, manifest=decode), "concurrency-sweep") == "decode"
    single = {**run.manifest, "matrix": {**matrix, "workload": {"suite": "single"}}}
    assert objective_of(replace(run, manifest=single), "single") == "decode"


def test_a_scenario_is_judged_by_its_own_kind_of_serving(flips: Path) -> None:
    """The scenarios suite's phases are named after suites: single decides by decode, the
    concurrent ones by throughput; named phases have no order, so no crossover, but on/off."""
    from dataclasses import replace

    from specbench.analysis.points import Level, Point
    from specbench.analysis.tables.sweeps import ArmAlong
    from specbench.report.answer import along_text

    run = load_run(flips)
    matrix = {**run.manifest["matrix"], "workload": {"suite": "scenarios"}}
    scen = replace(run, manifest={**run.manifest, "matrix": matrix})

    def at(name: str) -> Point:
        return Point(f"scenarios @ {name}", "scenarios", (name,), Level("phase", math.nan, name))

    assert objective_of(scen, "scenarios", at("single")) == "decode"
    assert objective_of(scen, "scenarios", at("concurrent")) == "throughput"
    assert objective_of(scen, "scenarios", at("chat")) == "throughput"
    along = ArmAlong("draft4", [("single", "faster"), ("prefill", "undetermined"), ("concurrent", "slower")])
    named = replace(along, named=True)
    assert along_text(named, "mixed") == (
        "draft4: on for single; off for concurrent; prefill not settled (no significant difference)"
    )


def test_a_rate_sweep_is_decided_rate_by_rate_on_goodput() -> None:
    """Issue 40: rate sweeps give per-level verdicts the same way, on goodput; the rate table stays."""
    from specbench.analysis import analyse
    from tests.analysis.test_goodput import run_of, sweep_records

    run = run_of(sweep_records({1.0: 0.7, 2.0: 0.7, 4.0: 1.3}), {"e2e_ms": 1000.0})
    run.manifest["matrix"]["workload"] = {"suite": "rate-sweep"}
    a = analyse(run)
    assert [d.workload for d in a.decisions] == [f"rate-sweep @ {r:g} req/s" for r in (1.0, 2.0, 4.0)]
    assert {d.measure for d in a.decisions} == {"goodput"}
    assert not a.goodput.table.empty  # the rate sweep's own table and load crossover stay


def test_a_length_sweep_is_answered_length_by_length_and_keeps_its_crossover(tmp_path: Path) -> None:
    """Records without a sweep phase (the synthetic ones say "main", as an import may) are placed
    by the level their prompt id names (``@len32``)."""
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=30, prefill_ms=200), "spec": spec(45, prefill_ms=1000)},
        lengths=(32, 512),
        prompts_per_category=2,
        workload="length-sweep",
    )
    a = analyse_dir(make_run(tmp_path / "run", plan))
    assert [d.workload for d in a.decisions] == [
        "length-sweep @ 32 tokens out",
        "length-sweep @ 512 tokens out",
    ]
    assert set(a.crossovers["workload"]) == {"length-sweep"}  # L* spans the lengths
    assert a.crossover_lengths  # and the speedup-vs-length plot still has its L*


def test_compare_goes_level_by_level(flips: Path, tmp_path: Path) -> None:
    from specbench.analysis.compare import compare_runs

    plan = Plan(
        arms={
            "baseline": Arm(decode_tok_s=20, level_factor={4: 2.0}),
            "draft4": spec(30, level_factor={4: 1.2}),
        },
        levels=(1, 4),
        prompts_per_category=2,
        repeats=4,
        workload="concurrency-sweep",
        seed=1,
    )
    df = compare_runs(flips, make_run(tmp_path / "b", plan))
    rows = df[df["arm"] == "draft4"].set_index("point")
    assert list(rows.index) == [AT_1, AT_4]
    assert rows.loc[AT_1, "speedup_change"] < 1.05 and rows.loc[AT_4, "speedup_change"] > 1.08  # ×0.8 → ×0.9
