"""The bundled prompt set, seeded selection and user JSONL prompt files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from specbench.errors import ConfigError
from specbench.workloads.prompts import CATEGORIES, Prompt, load_bundled, load_prompt_file, select


def write_jsonl(path: Path, rows: list[object | str]) -> Path:
    """Rows as JSONL; a str row is written verbatim (for blank or broken lines)."""
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_bundled_has_at_least_ten_prompts_in_every_category() -> None:
    counts = Counter(prompt.category for prompt in load_bundled())
    assert set(counts) == set(CATEGORIES)
    assert min(counts.values()) >= 10


def test_bundled_ids_are_unique_and_named_after_their_category() -> None:
    prompts = load_bundled()
    assert len({p.id for p in prompts}) == len(prompts)
    assert all(p.id.startswith(f"{p.category}-") for p in prompts)


def test_bundled_prompts_end_with_a_user_message() -> None:
    for prompt in load_bundled():
        messages = prompt.as_messages()
        assert messages[-1]["role"] == "user", prompt.id
        assert len(messages[-1]["content"]) > 10, prompt.id


def test_bundled_rag_and_repetitive_prompts_carry_long_material() -> None:
    """RAG needs a real passage; repetitive prompts need text for n-gram drafts to copy."""
    prompts = load_bundled()
    rag = [p for p in prompts if p.category == "rag"]
    repetitive = [p for p in prompts if p.category == "repetitive"]
    assert all(len(p.messages[-1][1]) > 1500 for p in rag)
    assert all(len(p.messages[-1][1]) > 600 for p in repetitive)


def test_prompt_is_hashable_and_round_trips_messages() -> None:
    prompt = Prompt(id="a", category="chat", messages=(("system", "be brief"), ("user", "hi")))
    same = Prompt(id="a", category="chat", messages=(("system", "be brief"), ("user", "hi")))
    assert len({prompt, same}) == 1
    assert prompt.as_messages() == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


def test_select_is_deterministic_for_a_seed() -> None:
    prompts = load_bundled()
    first = select(prompts, 20, seed=7)
    assert first == select(prompts, 20, seed=7)
    assert first != select(prompts, 20, seed=8)


def test_select_ignores_input_order() -> None:
    prompts = load_bundled()
    assert select(prompts, 15, seed=3) == select(list(reversed(prompts)), 15, seed=3)


def test_small_selection_spans_categories() -> None:
    prompts = load_bundled()
    assert {p.category for p in select(prompts, len(CATEGORIES), seed=1)} == set(CATEGORIES)
    assert len({p.category for p in select(prompts, 4, seed=1)}) == 4


def test_select_restricted_to_categories_deals_round_robin() -> None:
    chosen = select(load_bundled(), 6, seed=0, categories=["json", "chat"])
    assert Counter(p.category for p in chosen) == {"json": 3, "chat": 3}


def test_select_never_repeats_and_caps_at_available() -> None:
    prompts = load_bundled()
    chosen = select(prompts, len(prompts) + 50, seed=0)
    assert len(chosen) == len(prompts)
    assert len(set(chosen)) == len(prompts)


def test_select_unknown_category_is_config_error() -> None:
    with pytest.raises(ConfigError, match="poetry"):
        select(load_bundled(), 3, seed=0, categories=["poetry"])


def test_select_negative_n_is_config_error() -> None:
    with pytest.raises(ConfigError, match=">= 0"):
        select(load_bundled(), -1, seed=0)


def test_prompt_file_accepts_prompt_and_messages_rows(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"prompt": "Say hi"},
            "",
            {"id": 42, "category": "greeting", "messages": [{"role": "user", "content": "Hello"}]},
        ],
    )
    first, second = load_prompt_file(path)
    assert (first.id, first.category, first.messages) == ("mine-1", "custom", (("user", "Say hi"),))
    assert (second.id, second.category) == ("42", "greeting")


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"category": "x"}, "exactly one of 'prompt' or 'messages'"),
        ({"prompt": "a", "messages": [{"role": "user", "content": "b"}]}, "exactly one of"),
        ({"prompt": ""}, "'prompt' must be a non-empty string"),
        ({"messages": [{"role": "robot", "content": "b"}]}, r"messages\[0\]: role must be one of"),
        ({"messages": [{"role": "system", "content": "b"}]}, "no 'user' message"),
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_prompt_file_bad_line_names_file_line_and_reason(tmp_path: Path, bad: object, reason: str) -> None:
    path = write_jsonl(tmp_path / "mine.jsonl", [{"prompt": "ok"}, bad])
    with pytest.raises(ConfigError, match=reason) as info:
        load_prompt_file(path)
    assert str(info.value).startswith(f"{path}:2: ")


def test_empty_prompt_file_is_config_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no prompts found"):
        load_prompt_file(path)


def test_missing_prompt_file_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_prompt_file(tmp_path / "absent.jsonl")
