"""render_report on SYNTHETIC run directories: every file, escaping, order, strict JSON, tables."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from specbench import Analysis, analyse
from specbench.analysis import load_run
from specbench.analysis.tables import frames
from specbench.errors import ConfigError, StoreError
from specbench.report import render_report
from specbench.report.summary import summary_table
from tests.support.synth import SCRIPT

FILES = ("report.md", "report.html", "findings.json", "summary.csv", "requests.parquet", "BENCHMARK_ENV.md")


def test_every_format_writes_its_files(three_arms: Path) -> None:
    report = three_arms / "report"
    for name in FILES:
        assert (report / name).is_file() and (report / name).stat().st_size > 100, name
    assert {p.name for p in (report / "plots").glob("*.png")} == {
        "decode_by_arm.png",
        "decode_by_category.png",
        "acceptance.png",
        "acceptance_by_position.png",
    }


def test_html_is_self_contained_and_escapes_model_output(three_arms: Path) -> None:
    page = (three_arms / "report" / "report.html").read_text()
    assert page.count('<img src="data:image/png;base64,') == 4
    assert SCRIPT not in page and "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)=["'](https?:|//|/)""", page), "external asset referenced"


def test_markdown_puts_findings_first_and_keeps_script_literal(three_arms: Path) -> None:
    md = (three_arms / "report" / "report.md").read_text()
    headings = ("Findings", "Decision", "Per arm", "Per prompt category", "Acceptance by source",
                "Output equivalence", "Plots")  # fmt: skip
    order = [md.index(f"## {h}") for h in headings]
    assert order == sorted(order)
    assert "<script>" not in md and r"\<script\>" in md
    assert "](plots/decode_by_arm.png)" in md


def test_findings_json_is_strict_and_complete(three_arms: Path) -> None:
    data = json.loads((three_arms / "report" / "findings.json").read_text(), parse_constant=_reject)
    assert {"findings", "summary", "comparisons", "decisions"} <= set(data)
    codes = {f["code"] for f in data["findings"]}
    assert {"OUTPUT_DRIFT", "BIMODAL", "SPEC_LOSS"} <= codes
    assert [s["arm"] for s in data["summary"]] == ["baseline", "fast", "slow"]
    assert data["comparisons"]["fast"]["verdict"] == "faster"
    assert data["comparisons"]["slow"]["verdict"] == "slower"


def _reject(token: str) -> float:
    raise AssertionError(f"non-standard JSON constant {token}")


def test_summary_csv_and_parquet(three_arms: Path) -> None:
    summary = pd.read_csv(three_arms / "report" / "summary.csv")
    assert list(summary["arm"]) == ["baseline", "fast", "slow"]
    row = summary.set_index("arm").loc["slow"]
    assert row["decode_tok_s_ci_low"] <= row["decode_tok_s_median"] <= row["decode_tok_s_ci_high"]
    assert 18 < row["decode_tok_s_median"] < 22 and row["verdict"] == "slower"
    requests = pd.read_parquet(three_arms / "report" / "requests.parquet")
    assert len(requests) == 3 * 12 * 3  # arms × prompts × repeats; warm-ups and the failure excluded
    assert {"decode_tok_s", "ttft_ms", "max_tokens", "concurrency", "machine"} <= set(requests.columns)


def test_env_file_names_hardware_engine_model_and_commands(three_arms: Path) -> None:
    env = (three_arms / "report" / "BENCHMARK_ENV.md").read_text()
    for needle in ("NVIDIA RTX 3090", "driver 550.54", "CUDA 12.4", "abc1234", "ab" * 32, "GGML\\_CUDA=ON"):
        assert needle in env, needle
    assert env.count("/opt/llama/bin/llama-server -m /models/target.gguf") == 3
    assert "--spec-type draft-simple --spec-draft-n-max 8" in env


def test_acceptance_per_draft_position(three_arms: Path) -> None:
    frame = frames.position_frame(load_run(three_arms))
    assert list(frame["arm"].unique()) == ["fast"] and list(frame["position"]) == [0, 1, 2, 3]
    assert list(frame["rate"]) == pytest.approx([0.7, 0.49, 0.343, 0.2401], rel=0.01)


def test_category_split_and_divergence_shown(three_arms: Path) -> None:
    md = (three_arms / "report" / "report.md").read_text()
    assert "fast: categories split into code" in md
    assert "first differing outputs" in md


def test_sweep_plots_and_winners(sweep: Path) -> None:
    plots = {p.name for p in (sweep / "report" / "plots").glob("*.png")}
    assert {"speedup_vs_length.png", "latency_vs_concurrency.png"} <= plots
    md = (sweep / "report" / "report.md").read_text()
    assert "wins on wall clock for outputs longer than" in md
    assert not (sweep / "report" / "findings.json").exists()  # only md and html were asked for


def test_merged_report_has_a_panel_per_machine(merged: Path) -> None:
    assert (merged / "report" / "plots" / "decode_by_machine.png").is_file()
    md = (merged / "report" / "report.md").read_text()
    assert "## Per machine" in md and "box-a-0" in md and "box-b-1" in md
    env = (merged / "report" / "BENCHMARK_ENV.md").read_text()
    assert "## Machine box-a-0" in env and "## Machine box-b-1" in env


def test_rejects_unknown_format_and_non_run(tmp_path: Path, three_arms: Path) -> None:
    with pytest.raises(ConfigError, match="pdf"):
        render_report(three_arms, ("pdf",))
    with pytest.raises(StoreError, match="not a run directory"):
        render_report(tmp_path)


class _TagBalance(HTMLParser):
    """Tracks open elements; void elements (img, meta) never need closing."""

    VOID = frozenset({"img", "meta", "br", "hr", "link", "input"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def test_html_elements_are_balanced(three_arms: Path) -> None:
    parser = _TagBalance()
    parser.feed((three_arms / "report" / "report.html").read_text())
    assert parser.errors == [] and parser.stack == []


def test_one_analysis_feeds_the_console_summary_and_every_file(three_arms: Path, tmp_path: Path) -> None:
    run = shutil.copytree(three_arms, tmp_path / "run")
    result = analyse(load_run(run), run)
    assert isinstance(result, Analysis) and [f.code for f in result.findings]
    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(result))
    text = console.export_text()
    assert all(f"{s:.1f}" in text for s in result.summary["decode_tok_s"])
    render_report(run, ("json",), analysis=result)
    again = json.loads((run / "report" / "findings.json").read_text())
    assert again == json.loads((three_arms / "report" / "findings.json").read_text())
    assert [row["arm"] for row in again["summary"]] == list(result.summary["arm"])
