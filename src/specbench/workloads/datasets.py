"""Public benchmark datasets as Prompt lists: Spec-Bench, SPEED-Bench, ShareGPT and plain JSONL.

Every format is a sequence of JSON-like records, so reading (by file shape) is separate from
converting (by format): a ``.parquet`` file is read with pyarrow, text starting with ``[`` is a
JSON array, anything else is JSONL. Only the first user turn of a conversation is kept: the
benchmark measures decoding of one answer, and later turns would need the model's own replies.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import ConfigError
from specbench.workloads.prompts import (
    BadRow,
    Converter,
    Message,
    Prompt,
    RawRow,
    as_object,
    gather,
    jsonl_rows,
    label,
    parse_messages,
    prompt_from_row,
    read_text,
    require,
    text_field,
    up_to_first_user,
)

SHAREGPT_ROLES = {"human": "user", "gpt": "assistant", "system": "system"}


@dataclass(frozen=True)
class LoadResult:
    """The prompts read and how many bad rows ``skip_bad`` dropped (so callers can say so)."""

    prompts: list[Prompt]
    skipped: int


def spec_bench_row(value: object, default_id: str) -> Prompt:
    """Spec-Bench ``question.jsonl``: ``question_id``, ``category``, ``turns``; first turn only."""
    row = as_object(value)
    turn = first_turn(require(row, "turns"))
    category = text_field(require(row, "category"), "category")
    return Prompt(id=label(row, ["question_id"], default_id), category=category, messages=(("user", turn),))


def speed_bench_row(value: object, default_id: str) -> Prompt:
    """SPEED-Bench: ``category`` plus ``turns`` or ``messages``; id from ``id``/``question_id``."""
    row = as_object(value)
    category = text_field(require(row, "category"), "category")
    ident = label(row, ["id", "question_id"], default_id)
    return Prompt(id=ident, category=category, messages=_speed_bench_messages(row))


def _speed_bench_messages(row: Mapping[str, object]) -> tuple[Message, ...]:
    if row.get("messages") is not None:
        return up_to_first_user(parse_messages(row["messages"]))
    if row.get("turns") is not None:
        return (("user", first_turn(row["turns"])),)
    raise BadRow("missing field 'turns' or 'messages'")


def sharegpt_row(value: object, default_id: str) -> Prompt:
    """ShareGPT: ``conversations`` of ``{"from", "value"}`` up to and including the first human turn."""
    row = as_object(value)
    turns = require(row, "conversations")
    if not isinstance(turns, list):
        raise BadRow("field 'conversations' must be a list")
    messages = up_to_first_user(tuple(_sharegpt_turns(turns)))
    return Prompt(id=label(row, ["id"], default_id), category="sharegpt", messages=messages)


def _sharegpt_turns(turns: list[object]) -> Iterator[Message]:
    """Mapped turns, stopping after the first human one (later turns are never checked)."""
    for i, turn in enumerate(turns):
        where = f"conversations[{i}]"
        item = as_object(turn)
        role = SHAREGPT_ROLES.get(str(item.get("from")))
        if role is None:
            raise BadRow(
                f"{where}: 'from' must be one of {', '.join(SHAREGPT_ROLES)}, got {item.get('from')!r}"
            )
        yield role, text_field(item.get("value"), f"{where}.value")
        if role == "user":
            return
    raise BadRow("no 'human' turn in 'conversations'")


def first_turn(turns: object) -> str:
    """The first of a ``turns`` list of strings (later turns depend on the model's answers)."""
    if not isinstance(turns, list) or not turns:
        raise BadRow("field 'turns' must be a non-empty list of strings")
    return text_field(turns[0], "turns[0]")


FORMATS: dict[str, Converter] = {
    "jsonl": prompt_from_row,
    "sharegpt": sharegpt_row,
    "spec-bench": spec_bench_row,
    "speed-bench": speed_bench_row,
}


def load_dataset(path: Path, fmt: str, *, skip_bad: bool = False) -> LoadResult:
    """Prompts from ``path`` as ``fmt``; a bad row raises ConfigError, or with ``skip_bad`` is counted."""
    convert = FORMATS.get(fmt)
    if convert is None:
        raise ConfigError(f"unknown dataset format {fmt!r}; valid formats: {', '.join(FORMATS)}")
    path = Path(path)
    prompts, skipped = gather(read_rows(path), convert, skip_bad)
    if not prompts and not skipped:
        raise ConfigError(f"{path}: no rows found")
    return LoadResult(prompts=prompts, skipped=skipped)


def read_rows(path: Path) -> Iterator[RawRow]:
    """The file's records, located as ``file:<line>`` for JSONL and ``file[<index>]`` otherwise."""
    if path.suffix.lower() == ".parquet":
        return _indexed_rows(_parquet_records(path), path)
    text = read_text(path)
    if text.lstrip().startswith("["):
        return _indexed_rows(_json_array(text, path), path)
    return jsonl_rows(text, str(path), path.stem)


def _indexed_rows(records: Iterable[object], path: Path) -> Iterator[RawRow]:
    for index, record in enumerate(records):
        yield RawRow(where=f"{path}[{index}]", default_id=f"{path.stem}-{index}", value=record)


def _json_array(text: str, path: Path) -> list[object]:
    """A whole-file JSON array; a syntax error here is fatal, since no row boundary can be trusted."""
    try:
        records = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}:{err.lineno}: invalid JSON: {err.msg}") from None
    if not isinstance(records, list):
        raise ConfigError(f"{path}: expected a JSON array of rows")
    return records


def _parquet_records(path: Path) -> list[object]:
    """Rows as plain Python objects (pyarrow's ``to_pylist`` keeps lists as lists, unlike pandas)."""
    import pyarrow.parquet as pq

    try:
        return list(pq.read_table(path).to_pylist())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: cannot read Parquet: {err}") from None


def count_by_category(prompts: Iterable[Prompt]) -> dict[str, int]:
    """How many prompts each category has, sorted by category name for stable reports."""
    counts = Counter(prompt.category for prompt in prompts)
    return dict(sorted(counts.items()))
