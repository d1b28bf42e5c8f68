"""Dataset loaders: Spec-Bench, SPEED-Bench (JSON, JSONL, Parquet), ShareGPT and plain JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from specbench.errors import ConfigError
from specbench.workloads.datasets import FORMATS, count_by_category, load_dataset
from specbench.workloads.prompts import Prompt


def write_jsonl(path: Path, rows: list[object | str]) -> Path:
    """Rows as JSONL; a str row is written verbatim (for broken lines)."""
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_json(path: Path, rows: object) -> Path:
    path.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return path


SPEC_ROWS = [
    {"question_id": 81, "category": "writing", "turns": ["Write a poem.", "Now shorten it."]},
    {"question_id": 82, "category": "translation", "turns": ["Translate 'cat' to German."]},
]


def test_spec_bench_uses_question_id_category_and_first_turn(tmp_path: Path) -> None:
    result = load_dataset(write_jsonl(tmp_path / "question.jsonl", list(SPEC_ROWS)), "spec-bench")
    assert result.skipped == 0
    assert result.prompts[0] == Prompt(id="81", category="writing", messages=(("user", "Write a poem."),))
    assert result.prompts[1].category == "translation"


def test_spec_bench_missing_turns_names_file_and_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [SPEC_ROWS[0], {"question_id": 3, "category": "qa"}])
    with pytest.raises(ConfigError) as info:
        load_dataset(path, "spec-bench")
    assert str(info.value) == f"{path}:2: missing field 'turns'"


def test_speed_bench_json_array_with_turns_and_messages(tmp_path: Path) -> None:
    rows = [
        {"question_id": "q-1", "category": "coding", "turns": ["Write fizzbuzz."]},
        {
            "id": "m-1",
            "category": "rag",
            "messages": [
                {"role": "system", "content": "Use the document."},
                {"role": "user", "content": "What is X?"},
                {"role": "assistant", "content": "X is Y."},
                {"role": "user", "content": "And Z?"},
            ],
        },
        {"category": "math", "turns": ["1+1?"]},
    ]
    prompts = load_dataset(write_json(tmp_path / "speed.json", rows), "speed-bench").prompts
    assert [p.id for p in prompts] == ["q-1", "m-1", "speed-2"]
    assert prompts[1].messages == (("system", "Use the document."), ("user", "What is X?"))


def test_speed_bench_parquet_reads_list_columns_as_lists(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "question_id": ["a", "b"],
            "category": ["qa", "multilingual"],
            "turns": [["First question?", "Follow-up?"], ["Bonjour ?"]],
        }
    )
    path = tmp_path / "speed.parquet"
    frame.to_parquet(path)
    prompts = load_dataset(path, "speed-bench").prompts
    assert [(p.id, p.category, p.messages) for p in prompts] == [
        ("a", "qa", (("user", "First question?"),)),
        ("b", "multilingual", (("user", "Bonjour ?"),)),
    ]


def test_speed_bench_parquet_bad_row_names_row_index(tmp_path: Path) -> None:
    frame = pd.DataFrame({"question_id": ["a", "b"], "category": ["qa", "qa"], "turns": [["ok?"], None]})
    path = tmp_path / "speed.parquet"
    frame.to_parquet(path)
    with pytest.raises(ConfigError) as info:
        load_dataset(path, "speed-bench")
    assert str(info.value) == f"{path}[1]: missing field 'turns' or 'messages'"
    assert load_dataset(path, "speed-bench", skip_bad=True).skipped == 1


def test_corrupt_parquet_is_config_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(ConfigError, match="cannot read Parquet"):
        load_dataset(path, "speed-bench", skip_bad=True)


SHAREGPT = [
    {
        "id": "conv-1",
        "conversations": [
            {"from": "system", "value": "You are helpful."},
            {"from": "human", "value": "Plan a trip."},
            {"from": "gpt", "value": "Sure."},
            {"from": "human", "value": "Cheaper please."},
        ],
    },
    {
        "id": "conv-2",
        "conversations": [{"from": "gpt", "value": "Hi, ask me."}, {"from": "human", "value": "Why?"}],
    },
]


def test_sharegpt_keeps_turns_through_first_human_and_maps_roles(tmp_path: Path) -> None:
    prompts = load_dataset(write_json(tmp_path / "sg.json", SHAREGPT), "sharegpt").prompts
    assert prompts[0] == Prompt(
        id="conv-1", category="sharegpt", messages=(("system", "You are helpful."), ("user", "Plan a trip."))
    )
    assert prompts[1].messages == (("assistant", "Hi, ask me."), ("user", "Why?"))


@pytest.mark.parametrize(
    ("conversations", "reason"),
    [
        ([{"from": "gpt", "value": "alone"}], "no 'human' turn"),
        ([{"from": "bing", "value": "x"}], r"conversations\[0\]: 'from' must be one of"),
        ([{"from": "human", "value": ""}], r"conversations\[0\]\.value"),
        ("not a list", "'conversations' must be a list"),
    ],
)
def test_sharegpt_bad_row_names_array_index(tmp_path: Path, conversations: object, reason: str) -> None:
    path = write_json(tmp_path / "sg.json", [SHAREGPT[0], {"id": "bad", "conversations": conversations}])
    with pytest.raises(ConfigError, match=reason) as info:
        load_dataset(path, "sharegpt")
    assert str(info.value).startswith(f"{path}[1]: ")


def test_jsonl_format_matches_prompt_file_rules(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mine.jsonl", [{"prompt": "hi"}, {"prompt": "yo", "category": "chat"}])
    prompts = load_dataset(path, "jsonl").prompts
    assert [(p.id, p.category) for p in prompts] == [("mine-1", "custom"), ("mine-2", "chat")]


def test_skip_bad_counts_every_kind_of_bad_row(tmp_path: Path) -> None:
    rows: list[object | str] = [
        SPEC_ROWS[0],
        "{broken json",
        {"question_id": 5, "turns": ["no category"]},
        SPEC_ROWS[1],
        {"question_id": 6, "category": "qa", "turns": []},
    ]
    result = load_dataset(write_jsonl(tmp_path / "q.jsonl", rows), "spec-bench", skip_bad=True)
    assert [p.id for p in result.prompts] == ["81", "82"]
    assert result.skipped == 3


def test_broken_json_array_is_fatal_even_with_skip_bad(tmp_path: Path) -> None:
    path = tmp_path / "sg.json"
    path.write_text('[{"id": 1,\n "conversations": [}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"sg\.json:2: invalid JSON"):
        load_dataset(path, "sharegpt", skip_bad=True)


def test_unknown_format_lists_valid_formats(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_dataset(tmp_path / "x.jsonl", "alpaca")
    assert all(name in str(info.value) for name in FORMATS)
    assert "'alpaca'" in str(info.value)


def test_file_with_no_rows_is_config_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(ConfigError, match="no rows found"):
        load_dataset(path, "speed-bench")


def test_count_by_category_sorts_by_name() -> None:
    prompts = [Prompt(id=str(i), category=c, messages=(("user", "x"),)) for i, c in enumerate("bab")]
    assert list(count_by_category(prompts).items()) == [("a", 1), ("b", 2)]
