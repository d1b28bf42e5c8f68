"""The rendered-prompts section (issue 15, item 6) on SYNTHETIC run directories: the cells carry
renderings written here the way the runner stores them (tests/run/test_runner_engine.py reads them
from a real llama-server)."""

from __future__ import annotations

import json
from pathlib import Path

from specbench.analysis import analyse_dir
from specbench.report import render_report
from specbench.report.prompts import KEEP, TITLE, shorten
from tests.support.records import write_cells
from tests.support.synth import Arm, Plan, make_run, spec

TEMPLATE = "<start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n"


def _with_renderings(run: Path, texts: dict[str, dict[str, str]]) -> Path:
    """Put ``texts[arm][category]`` into each arm's repeat-0 cell, as the runner does."""
    cells = [json.loads(line) for line in (run / "cells.jsonl").open()]
    for cell in cells:
        mine = texts.get(cell["arm"], {})
        if cell["repeat"] == 0 and mine:
            cell["rendered_prompts"] = [
                {
                    "workload": "natural",
                    "category": cat,
                    "prompt_id": f"{cat}-0",
                    "text": text,
                    "via": "/apply-template",
                }
                for cat, text in mine.items()
            ]
    write_cells(run / "cells.jsonl", cells)
    return run


def test_one_rendered_prompt_per_category_in_markdown_and_html(tmp_path: Path) -> None:
    plan = Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}, categories=("chat", "code"))
    base = {"chat": TEMPLATE.format("Hi <script>x</script>"), "code": TEMPLATE.format("```\nsort()")}
    # ``fast`` renders the code prompt with another template: the section says so
    other = {"chat": base["chat"], "code": "[INST] sort() [/INST]"}
    run = _with_renderings(make_run(tmp_path / "run", plan), {"fast": other, "baseline": base})
    render_report(run, ("md", "html"))
    md = (run / "report" / "report.md").read_text()
    section = md[md.index(f"## {TITLE}") :]
    assert "server of arm baseline" in section and "/apply-template" in section
    assert "chat: prompt chat-0" in section and "code: prompt code-0" in section
    assert "<start_of_turn>user\nHi <script>x</script><end_of_turn>" in section  # verbatim in a fence
    assert "````text\n<start_of_turn>user\n```\nsort()" in section  # a longer fence than the text's
    assert "Rendered differently by arm(s) fast." in section and section.count("Rendered differently") == 1
    html = (run / "report" / "report.html").read_text()
    assert f"<h2>{TITLE}</h2>" in html and "Hi &lt;script&gt;x&lt;/script&gt;" in html
    assert "<script>x" not in html


def test_no_rendering_no_section(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", Plan(arms={"baseline": Arm(decode_tok_s=30), "fast": spec(45)}))
    assert analyse_dir(run).prompts.empty
    render_report(run, ("md",))
    assert TITLE not in (run / "report" / "report.md").read_text()


def test_a_long_prompt_keeps_both_ends() -> None:
    text = "<bos>head " + "filler " * 1000 + "tail<end>"
    short = shorten(text)
    assert short.startswith("<bos>head") and short.endswith("tail<end>")
    assert f"[… {len(text) - 2 * KEEP} characters cut …]" in short and len(short) < 2 * KEEP + 50
    assert shorten("short") == "short"
