"""merge_runs and compare_runs on SYNTHETIC runs from two made-up machines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specbench.analysis import load_run
from specbench.errors import StoreError
from specbench.report import compare_runs, format_comparison, merge_runs
from tests.report.conftest import two_machines


def test_merge_tags_records_and_keeps_each_env(merged: Path) -> None:
    run = load_run(merged)
    machines = {r["machine"] for r in run.records}
    assert machines == {"box-a-0", "box-b-1"}
    assert sorted(p.name for p in (merged / "envs").iterdir()) == ["box-a-0.json", "box-b-1.json"]
    assert [s["host"] for s in run.manifest["sources"]] == ["box-a", "box-b"]
    # repeats are renumbered so a pair never spans two machines
    by_machine = {m: {r["repeat"] for r in run.records if r["machine"] == m} for m in machines}
    assert not by_machine["box-a-0"] & by_machine["box-b-1"]


def test_merge_refuses_different_models(tmp_path: Path) -> None:
    runs = two_machines(tmp_path, second_sha="cd" * 32)
    with pytest.raises(StoreError) as err:
        merge_runs(runs, tmp_path / "out")
    message = str(err.value)
    assert "\n" not in message and "ab" * 32 in message and "cd" * 32 in message
    assert not (tmp_path / "out" / "records.jsonl").exists()
    out = merge_runs(runs, tmp_path / "forced", force=True)
    manifest = json.loads((out / "manifest.json").read_text())
    assert "model SHA-256 differs" in manifest["pooled_despite"][0]
    assert len(load_run(out).records) == sum(len(load_run(r).records) for r in runs)


def test_merge_refuses_different_engine_commits(tmp_path: Path) -> None:
    runs = two_machines(tmp_path, second_commit="fff9999")
    with pytest.raises(StoreError, match=r"engine commit differs: abc1234 .* vs fff9999"):
        merge_runs(runs, tmp_path / "out")


def test_compare_reports_what_changed(tmp_path: Path) -> None:
    a, b = two_machines(tmp_path)
    df = compare_runs(a, b).set_index("arm")
    assert df.loc["fast", "verdict"] == "slower" and df["ci_high"]["fast"] < 0.9
    assert df.loc["baseline", "verdict"] in ("equivalent", "undetermined")
    assert not df["args_changed"].any()
    text = format_comparison(compare_runs(a, b))
    assert "fast" in text and "slower" in text and re.search(r"×0\.[78]\d\d", text)


def test_compare_needs_a_common_arm(tmp_path: Path, three_arms: Path) -> None:
    from tests.report.synth import Arm, Plan, make_run

    other = make_run(tmp_path / "other", Plan(arms={"solo": Arm()}, repeats=1, prompts_per_category=1))
    with pytest.raises(StoreError, match="no measured arm in common"):
        compare_runs(three_arms, other)
