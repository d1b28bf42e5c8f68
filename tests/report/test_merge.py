"""merge_runs and compare_runs on SYNTHETIC runs from two made-up machines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specbench.analysis import load_run
from specbench.analysis.compare import compare_runs
from specbench.errors import StoreError
from specbench.report import format_comparison, merge_runs
from tests.support.synth import two_machines


def test_merge_tags_records_and_keeps_each_env(merged: Path) -> None:
    run = load_run(merged)
    machines = {r.machine for r in run.records}
    assert machines == {"box-a-0", "box-b-1"}
    assert sorted(p.name for p in (merged / "envs").iterdir()) == ["box-a-0.json", "box-b-1.json"]
    assert [s["host"] for s in run.manifest["sources"]] == ["box-a", "box-b"]
    # repeats are renumbered so a pair never spans two machines
    by_machine = {m: {r.repeat for r in run.records if r.machine == m} for m in machines}
    assert not by_machine["box-a-0"] & by_machine["box-b-1"]


def test_merge_refuses_different_models(tmp_path: Path) -> None:
    runs = two_machines(tmp_path, second_sha="cd" * 32)
    with pytest.raises(StoreError) as err:
        merge_runs(runs, tmp_path / "out")
    message = str(err.value)
    assert "\n" not in message and "ab" * 32 in message and "cd" * 32 in message
    assert "pass --force" in message  # the flag as typed
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
    assert str(df.loc["baseline", "verdict"]).startswith(("equivalent", "undetermined"))
    assert not df["args_changed"].any()
    # Same baseline, the arm went from 45 to 36 tok/s: its speedup fell from ×1.5 to ×1.2.
    fast = df.loc["fast"]
    assert fast["speedup_a"] == pytest.approx(1.5, rel=0.05) and fast["speedup_b"] == pytest.approx(
        1.2, rel=0.05
    )
    assert fast["speedup_ci_low"] <= fast["speedup_change"] <= fast["speedup_ci_high"] < 0.9
    assert fast["speedup_verdict"] == "slower"
    text = format_comparison(compare_runs(a, b))
    assert "fast" in text and "slower" in text and re.search(r"×0\.[78]\d\d", text)
    assert "±1 % around ×1.00" in text  # the noise band is explained where verdicts are printed


def test_compare_lists_arms_measured_in_one_run_only(tmp_path: Path) -> None:
    from tests.support.synth import Arm, Plan, make_run, spec

    a = make_run(tmp_path / "a", Plan(arms={"baseline": Arm(), "old": spec(40)}, repeats=3))
    b = make_run(tmp_path / "b", Plan(arms={"baseline": Arm(), "new": spec(40)}, repeats=3))
    df = compare_runs(a, b).set_index("arm")
    assert df.loc["old", "verdict"] == "only in a" and df.loc["new", "verdict"] == "only in b"
    assert "only in b" in format_comparison(compare_runs(a, b))


def test_compare_needs_a_common_arm(tmp_path: Path, three_arms: Path) -> None:
    from tests.support.synth import Arm, Plan, make_run

    other = make_run(tmp_path / "other", Plan(arms={"solo": Arm()}, repeats=1, prompts_per_category=1))
    with pytest.raises(StoreError, match="no measured arm in common"):
        compare_runs(three_arms, other)


def merge_runs_checked(runs: list[Path], out: Path, force: bool = False) -> tuple[Path, list[str]]:
    from specbench.report.compat import merge_checked

    return merge_checked(runs, out, force=force)


def _set(run: Path, name: str, **fields: object) -> None:
    """Overwrite top-level fields of run's manifest.json or env.json (``name``)."""
    path = run / name
    path.write_text(json.dumps(json.loads(path.read_text()) | fields))


def _prompts(text: str) -> list[dict[str, object]]:
    return [
        {
            "prompt_id": "chat-0",
            "category": "chat",
            "max_tokens": 128,
            "messages": [{"role": "user", "content": t}],
        }
        for t in (text,)
    ]


def test_merge_refuses_runs_of_different_prompts_naming_them(tmp_path: Path) -> None:
    """Issue 28: merge pooled two runs made with different prompt files into one workload."""
    a, b = two_machines(tmp_path)
    _set(a, "manifest.json", prompts=_prompts("Summarise this."))
    _set(b, "manifest.json", prompts=_prompts("Extract the JSON."))
    with pytest.raises(StoreError) as err:
        merge_runs_checked([a, b], tmp_path / "out")
    message = str(err.value)
    assert "\n" not in message and "prompts differ: 1 with the same id but other text (chat-0)" in message
    assert "pass --force" in message and not (tmp_path / "out" / "records.jsonl").exists()
    out, warnings = merge_runs_checked([a, b], tmp_path / "forced", force=True)
    assert any("prompts differ" in w for w in warnings)
    assert any(
        "prompts differ" in p for p in json.loads((out / "manifest.json").read_text())["pooled_despite"]
    )


def test_merge_refuses_different_workloads_and_arm_arguments(tmp_path: Path) -> None:
    a, b = two_machines(tmp_path)
    matrix = json.loads((b / "manifest.json").read_text())["matrix"]
    matrix["workload"]["max_tokens"] = 512
    matrix["arms"]["fast"] = ["--spec-type", "ngram-mod"]
    _set(b, "manifest.json", matrix=matrix)
    with pytest.raises(
        StoreError, match=r"workload\.max_tokens differs: 128 vs 512.*arm fast's arguments differ"
    ):
        merge_runs_checked([a, b], tmp_path / "out")


def test_merge_refuses_runs_judged_at_another_alpha(tmp_path: Path) -> None:
    """The matrix's alpha sets a run's verdict level: a merged run would be judged at the first
    run's, so runs that differ in it are not pooled (a run from before the field reads 0.05)."""
    a, b = two_machines(tmp_path)
    matrix = json.loads((b / "manifest.json").read_text())["matrix"]
    matrix["alpha"] = 0.001
    _set(b, "manifest.json", matrix=matrix)
    with pytest.raises(StoreError, match=r"alpha differs: 0\.05 vs 0\.001"):
        merge_runs_checked([a, b], tmp_path / "out")
    matrix["alpha"] = 0.05
    _set(b, "manifest.json", matrix=matrix)
    old = json.loads((a / "manifest.json").read_text())["matrix"]
    old.pop("alpha", None)
    _set(a, "manifest.json", matrix=old)
    merge_runs_checked([a, b], tmp_path / "alike")


def test_merge_warns_of_other_engine_build_options(tmp_path: Path) -> None:
    a, b = two_machines(tmp_path)
    env = json.loads((b / "env.json").read_text())
    env["engine"]["build"]["cmake_args"] = ["-DGGML_NATIVE=OFF"]
    _set(b, "env.json", engine=env["engine"])
    out, warnings = merge_runs_checked([a, b], tmp_path / "out")
    assert warnings == [
        f"warning: engine build cmake_args differs: ['-DGGML_CUDA=ON'] vs ['-DGGML_NATIVE=OFF'] ({a} vs {b})"
    ]
    assert json.loads((out / "manifest.json").read_text())["merge_warnings"] == [
        warnings[0][len("warning: ") :]
    ]


def test_merge_command_names_the_difference_and_exits_5(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from specbench.cli import app

    a, b = two_machines(tmp_path)
    _set(b, "manifest.json", prompts=_prompts("other"))
    _set(a, "manifest.json", prompts=_prompts("one"))
    result = CliRunner().invoke(app, ["merge", str(a), str(b), "--out", str(tmp_path / "m")])
    assert result.exit_code == 5 and "prompts differ" in result.output


def test_compare_flags_a_baseline_that_moved_and_shows_each_runs_findings(tmp_path: Path) -> None:
    """Issue 28: the second run's baseline fell from 66.1 to 46.5 tok/s; compare said nothing."""
    from typer.testing import CliRunner

    from specbench.cli import app
    from specbench.report.compat import compare_lines
    from tests.support.synth import Arm, Plan, make_run, spec

    a = make_run(tmp_path / "a", Plan(arms={"baseline": Arm(decode_tok_s=66.1), "fast": spec(80)}))
    b = make_run(tmp_path / "b", Plan(arms={"baseline": Arm(decode_tok_s=46.5), "fast": spec(56)}, seed=1))
    lines = compare_lines(a, b, compare_runs(a, b))
    assert re.match(r"WARNING: the baseline moved: 6\d\.\d → 4\d\.\d decode_tok_s \(×0\.\d+", lines[0])
    assert "slower" in lines[0] and "speedup columns" in lines[0]
    assert f"findings in a ({a})" in "\n".join(lines) and any(
        ln.startswith(f"findings in b ({b})") for ln in lines
    )
    result = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert result.exit_code == 0 and "WARNING: the baseline moved: " in result.output
    same = make_run(tmp_path / "c", Plan(arms={"baseline": Arm(decode_tok_s=66.1), "fast": spec(80)}, seed=2))
    assert not any("moved" in ln for ln in compare_lines(a, same, compare_runs(a, same)))


def test_merge_keeps_the_argument_table_the_flags_were_checked_against(tmp_path: Path) -> None:
    """CONFOUND reads flags with the run's stored table (engine_args.json): a merged run carries
    it on, so its report reads the flags as the sources' reports did, on any machine."""
    a, b = two_machines(tmp_path)
    table = '{"engine":"llamacpp","table":null}'
    (a / "engine_args.json").write_text(table)
    out = merge_runs([a, b], tmp_path / "merged", force=True)
    assert (out / "engine_args.json").read_text() == table
