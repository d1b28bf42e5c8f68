"""The answer a user reads (issues 27.5, 27.6, 28.1, 28.3, 29.3), on SYNTHETIC run directories."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis import analyse_dir, stats
from specbench.analysis.findings.model import Finding
from specbench.analysis.multiplicity import holm
from specbench.report import render_report, summary, tables
from specbench.report.answer import answer_lines, rates_text
from specbench.report.findinggroups import group_findings
from tests.support.records import write_records
from tests.support.synth import Arm, Plan, make_run, spec


def _rewrite(run: Path, keep: Any) -> Path:
    """Keep the records ``keep(record)`` accepts; the others become failed requests."""
    path = run / "records.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    out = []
    for r in records:
        if not r.get("warmup") and r.get("error") is None and not keep(r):
            r = r | {"error": {"type": "HTTPStatusError", "message": "500"}, "chunks": []}
        out.append(r)
    write_records(path, out)
    return run


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Issue 28's workload: n-gram gains on chat (the base model loops, 85 % accepted) and loses on
    JSON extraction (a quarter accepted)."""
    ngram = spec(30, category_factor={"chat": 1.25, "json": 0.55}, category_acceptance={"json": 0.25})
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=30), "ngram": ngram},
        categories=("chat", "json"),
        prompts_per_category=4,
        repeats=3,
        workload="mine",
    )
    run = make_run(tmp_path_factory.mktemp("split") / "run", plan)
    render_report(run)
    return run


# -- 29.3: thin data is LOW_N, never an exception ------------------------------------------------------
def test_a_baseline_with_one_successful_request_is_low_n_in_run_report_and_summary(tmp_path: Path) -> None:
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}, repeats=3)
    run = make_run(tmp_path / "run", plan)
    first = {"n": 0}

    def keep(r: dict[str, Any]) -> bool:  # the baseline keeps exactly one successful request
        if r["arm"] != "baseline":
            return True
        first["n"] += 1
        return first["n"] == 1

    _rewrite(run, keep)
    result = analyse_dir(run)  # raised ValueError("speedup: need ≥2 positive …") before
    c = result.comparisons["fast"]
    assert c.low_n and c.too_few and c.verdict == "undetermined" and math.isnan(c.ci_low)
    assert stats.verdict_text(c).startswith("undetermined (LOW_N")
    assert any(f.code == "LOW_N" and "fast" in f.arms for f in result.findings)
    assert result.decisions[0].arm is None
    render_report(run)
    with summary.stdout.capture() as cap:
        summary.print_summary(result)
    assert "LOW_N" in cap.get()


# -- 27.5: per-category speedups with the arm-level machinery ------------------------------------------
def test_per_category_speedups_are_paired_launch_level_with_verdicts_and_drafts(split: Path) -> None:
    result = analyse_dir(split)
    rows = {r["category"]: r for r in result.categories.speedups.to_dict("records")}
    assert set(rows) == {"chat", "json"}
    for r in rows.values():  # each verdict is read from the interval printed beside it
        assert stats.verdict(r["ci_low"], r["ci_high"]) == r["verdict"].split(" (")[0]
        assert r["launches"] == 3 and r["family"] == 3  # the arm and its two categories
    assert rows["chat"]["verdict"] == "faster" and rows["json"]["verdict"] == "slower"
    df = result.run.df
    json_rows = df[(df["arm"] == "ngram") & (df["category"] == "json")]
    assert rows["json"]["drafted"] == json_rows["draft_n"].sum()
    assert rows["json"]["acceptance"] == pytest.approx(0.25, abs=0.01)
    md = (split / "report" / "report.md").read_text()
    section = md.split("## Per prompt category", 1)[1].split("\n## ", 1)[0]
    assert "ngram ×" not in section  # the old bare ratio-of-medians column
    assert "| json | ngram |" in section and "slower" in section and "drafted" in section


def test_a_category_measured_in_one_launch_is_low_n(tmp_path: Path) -> None:
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}, categories=("chat", "code"))
    run = _rewrite(make_run(tmp_path / "run", plan), lambda r: r["category"] != "code" or r["repeat"] == 0)
    rows = {r["category"]: r for r in analyse_dir(run).categories.speedups.to_dict("records")}
    assert rows["code"]["verdict"] == "undetermined (LOW_N: 1 launch)" and math.isnan(rows["code"]["ci_low"])
    assert rows["chat"]["verdict"] == "faster" and rows["chat"]["family"] == 2  # LOW_N is not in the family


# -- multiplicity: Holm across arms ---------------------------------------------------------------------
def _cmp(key: str, confidence: float, low: float, high: float) -> stats.Comparison:
    return stats.Comparison(
        key, "base", "decode_tok_s", (low + high) / 2, low, high, confidence, True, 12, 12, 12,
        stats.verdict(low, high), 0.01, "test", True, 4,
    )  # fmt: skip


def test_holm_steps_down_and_each_interval_is_the_level_its_verdict_was_read_at() -> None:
    """``big`` clears the band at α/2; then ``edge`` is tested at α (it clears only there); ``aa``
    never does. Intervals are made narrower at lower confidence, as real ones are."""
    centre = {"big": (1.5, 0.05), "edge": (1.075, 0.04), "aa": (1.0, 0.05)}

    def fit(key: str, confidence: float) -> stats.Comparison:
        mid, half = centre[key]
        half *= 1 + 20 * (confidence - 0.95)  # 0.95 → half, 0.9833 → ×1.67
        return _cmp(key, confidence, mid - half, mid + half)

    out = holm(["big", "edge", "aa"], fit, 0.05)
    assert out["big"].verdict == "faster" and out["big"].confidence == pytest.approx(1 - 0.05 / 3)
    assert out["edge"].verdict == "faster" and out["edge"].confidence == pytest.approx(1 - 0.05 / 2)
    assert out["aa"].verdict == "undetermined" and out["aa"].confidence == pytest.approx(0.95)
    assert {c.family for c in out.values()} == {3}
    for c in out.values():
        assert c.verdict == stats.verdict(c.ci_low, c.ci_high)


def test_with_two_arms_the_run_carries_a_family_wise_rate_and_says_so(split: Path, tmp_path: Path) -> None:
    # One category: the arms alone are the family (categories join it: test_multiplicity.py).
    plan = Plan(
        arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45), "slow": spec(20)}, categories=("chat",)
    )
    result = analyse_dir(make_run(tmp_path / "run", plan))
    for c in result.comparisons.values():
        assert c.family == 2 and c.confidence == pytest.approx(0.975)
        assert "Holm over 2 comparisons" in stats.error_rate_text(c)
    # One arm, two categories: the arm is read at half its α (97.5 %), the other half is its categories'.
    single = analyse_dir(split).comparisons["ngram"]
    assert single.family == 3 and single.confidence == pytest.approx(0.975)


# -- 27.6 / 28: one interval per speedup, everywhere ----------------------------------------------------
def test_every_output_prints_the_interval_the_verdict_used(three_arms: Path) -> None:
    result = analyse_dir(three_arms)
    data = json.loads((three_arms / "report" / "findings.json").read_text())
    with (three_arms / "report" / "summary.csv").open() as fh:
        csv_rows = {r["arm"]: r for r in csv.DictReader(fh)}
    with summary.stdout.capture() as cap:
        summary.print_summary(result)
    console = cap.get()
    md = (three_arms / "report" / "report.md").read_text()
    for arm, c in result.comparisons.items():
        assert c.verdict == stats.verdict(c.ci_low, c.ci_high)
        assert data["comparisons"][arm]["ci_low"] == pytest.approx(c.ci_low)
        assert float(csv_rows[arm]["speedup_ci_low"]) == pytest.approx(c.ci_low)
        assert float(csv_rows[arm]["speedup_ci_high"]) == pytest.approx(c.ci_high)
        assert f"{c.ci_low:.2f}–{c.ci_high:.2f}" in console
        assert f"{c.ratio:.3f} ({c.ci_low:.3f}–{c.ci_high:.3f})" in md
        assert data["comparisons"][arm]["pairs_low"] <= c.ratio  # the data range, named as such


# -- 28.1: the answer first ----------------------------------------------------------------------------
def test_the_answer_comes_first_per_workload_and_per_kind_of_prompt(split: Path) -> None:
    result = analyse_dir(split)
    lines = answer_lines(result)
    assert lines[0].startswith("mine: keep speculation off") or lines[0].startswith("mine: ship")
    text = "\n".join(lines)
    assert "chat ×1.2" in text and "faster" in text and "json ×0.5" in text
    assert "accepted" in text and "25%" in text and "don't use ngram for json" in text
    md = (split / "report" / "report.md").read_text()
    assert md.index("## Answer") < md.index("## Findings") and "don't use ngram for json" in md
    html = (split / "report" / "report.html").read_text()
    assert html.index("Answer") < html.index("Findings")
    data = json.loads((split / "report" / "findings.json").read_text())
    assert next(iter(data)) == "answer" and data["answer"][0]["categories"][1]["category"] == "json"
    with summary.stdout.capture() as cap:
        summary.print_summary(result)
    assert cap.get().splitlines()[0] == lines[0]


def test_findings_are_one_line_per_code_with_the_arms_it_names() -> None:
    busy = [
        Finding("BUSY_MACHINE", (arm,), f"load average 3 while {arm} ran", "warning")
        for arm in ("a", "b", "c")
    ]
    groups = group_findings([*busy, Finding("SPEC_LOSS", ("a", "base"), "a is slower", "error")])
    assert [g.code for g in groups] == ["SPEC_LOSS", "BUSY_MACHINE"]
    assert groups[1].arms == ("a", "b", "c") and len(groups[1].evidence) == 3
    assert groups[1].line == "BUSY_MACHINE (a, b, c): load average 3 while a ran (+2 more like it)"
    table = tables.findings_table(busy)
    assert len(table) == 1 and table.iloc[0]["arms"] == "a, b, c"


def test_the_advice_names_the_unsettled_categories_and_never_says_none_is_settled() -> None:
    """Seen on the demo: five categories faster and two undetermined read "no category's verdict
    is settled"; the advice names the open ones instead."""
    from specbench.analysis.answer import CategoryAnswer, category_advice

    nan = float("nan")
    cats = [
        CategoryAnswer("chat", 1.6, 0.99, 2.58, "undetermined (about 1 more launch, 1–3)", nan, nan),
        CategoryAnswer("coding", 1.62, 1.1, 2.36, "faster", nan, nan),
    ]
    advice = category_advice("draft4", cats, shipped=True)
    assert advice == "chat: not settled yet (more launches would tell)"


def test_the_console_says_the_family_guarantee_once_with_the_levels_it_used() -> None:

    holm = "Holm over 3 comparisons: ≤ 5 % chance of any false verdict among them"
    rates = [f"98.3 % CI; {holm}", f"97.5 % CI; {holm}", f"98.3 % CI; {holm}"]
    assert rates_text(rates) == f"{holm} (CIs at 98.3 %, 97.5 %)"
    assert rates_text(["95 % CI"]) == "95 % CI"
