"""`specbench workloads prompts`: the bundled prompt ids by category, and a user file's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli import app
from specbench.errors import ConfigError
from specbench.workloads.prompts import CATEGORIES, listing, load_bundled, preview


def test_listing_groups_every_bundled_prompt_by_category() -> None:
    groups = listing()
    assert set(groups) == set(CATEGORIES)
    assert sum(len(p) for p in groups.values()) == len(load_bundled())
    assert [p.id for p in groups["json"]] == sorted(p.id for p in groups["json"])


def test_listing_one_category_and_an_unknown_one() -> None:
    (only,) = listing("coding").values()
    assert only and all(p.category == "coding" for p in only)
    with pytest.raises(ConfigError, match="available: chat, coding"):
        listing("poetry")


def test_listing_a_prompt_file(tmp_path: Path) -> None:
    file = tmp_path / "mine.jsonl"
    rows = [{"id": "q1", "category": "faq", "prompt": "What is\\nspeculative decoding?"}, {"prompt": "hi"}]
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    groups = listing(prompt_file=file)
    assert {k: [p.id for p in v] for k, v in groups.items()} == {"custom": ["mine-2"], "faq": ["q1"]}
    assert preview(groups["faq"][0]) == "What is\\nspeculative decoding?"


def test_preview_is_one_cut_line() -> None:
    long = next(p for p in load_bundled() if len(p.messages[-1][1]) > 100)
    text = preview(long, width=40)
    assert len(text) == 40 and text.endswith("…") and "\n" not in text


def test_cli_lists_prompts_of_a_category() -> None:
    result = CliRunner().invoke(app, ["workloads", "prompts", "--category", "json"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"json ({len(listing('json')['json'])})" and lines[1].startswith("  json-01 ")


def test_cli_unknown_category_is_a_config_error() -> None:
    result = CliRunner().invoke(app, ["workloads", "prompts", "--category", "poetry"])
    assert result.exit_code == ConfigError.exit_code and "poetry" in result.output
